package etcd2topo

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// TestTxnRequestSizeBound: txnRequestSize, computed from the public
// client API, is at least the size of the TxnRequest gRPC actually sends
// for the plan (measured with gRPC's own proto codec, whatever the etcd
// client version), and at most 15 bytes per compare above it (the writes
// are counted exactly): for every kind of op, a native term's compares,
// and keys and contents around protobuf's length-varint boundaries.
func TestTxnRequestSizeBound(t *testing.T) {
	var mu sync.Mutex
	var sent []int
	codec := encoding.GetCodecV2("proto")
	measure := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if method == "/etcdserverpb.KV/Txn" {
			b, err := codec.Marshal(req)
			if err != nil {
				return err
			}
			mu.Lock()
			sent = append(sent, b.Len())
			mu.Unlock()
			b.Free()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(serverAddr, ","),
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(measure)},
	})
	require.NoError(t, err)
	defer cli.Close()
	ctx := context.Background()

	c := &Conn{rootPrefix: newRoot() + "/"}
	for _, kl := range []int{1, 100, 127, 128, 1000, 16383, 16384} {
		for _, vl := range []int{0, 1, 127, 128, 16383, 16384, 1 << 20} {
			p := strings.Repeat("k", kl)
			val := make([]byte, vl)
			ops := []backendkit.TxnOp{
				{Index: 0, Kind: topo.TxnIfHeld},
				{Index: 1, Kind: topo.TxnIfHeld},
				{Index: 2, Kind: topo.TxnIfHeld},
				{Index: 3, Kind: topo.TxnUpdate, Path: p + "/u", Contents: val, Version: 1<<63 - 1},
				{Index: 4, Kind: topo.TxnCreate, Path: p + "/c", Contents: val[:min(vl, 100)]},
				{Index: 5, Kind: topo.TxnUpdate, Path: p + "/a", Version: backendkit.AnyVersion},
				{Index: 6, Kind: topo.TxnDelete, Path: p + "/d", Version: backendkit.AnyVersion},
				{Index: 7, Kind: topo.TxnDelete, Path: p + "/v", Version: 1},
				{Index: 8, Kind: topo.TxnIfVersion, Path: p + "/i", Version: 1 << 40},
				{Index: 9, Kind: topo.TxnIfVersion, Path: p + "/z", Version: 0},
				{Index: 10, Kind: topo.TxnIfAbsent, Path: p + "/x"},
				{Index: 11, Kind: topo.TxnIfPresent, Path: p + "/y"},
			}
			entry := c.key(p) + "/locks/" + strings.Repeat("e", kl%40+1)
			term := c.key(p) + "/term"
			g := &guard{key: term, held: true, cmps: []clientv3.Cmp{
				clientv3.Compare(clientv3.CreateRevision(term), "=", 1<<62),
				clientv3.Compare(clientv3.LeaseValue(term), "=", clientv3.LeaseID(1<<62)),
			}}
			entryGuard := func(rev int64, held bool) *guard {
				return &guard{key: entry, held: held, cmps: []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(entry), "=", rev)}}
			}
			pl := txnPlan{ops: ops, guards: []*guard{entryGuard(1<<63-1, true), g, entryGuard(1, false)}}
			pl.guards = append(pl.guards, make([]*guard, len(ops)-3)...)
			pl.build(c)

			mu.Lock()
			sent = nil
			mu.Unlock()
			_, err := cli.Txn(ctx).If(pl.cmps...).Then(pl.then...).Commit()
			require.NoError(t, err)
			mu.Lock()
			require.Len(t, sent, 1)
			exact := sent[0]
			mu.Unlock()
			bound := txnRequestSize(&pl)
			require.GreaterOrEqual(t, bound, exact, "key %d, value %d", kl, vl)
			require.LessOrEqual(t, bound-exact, 15*len(pl.cmps), "key %d, value %d", kl, vl)
		}
	}
}
