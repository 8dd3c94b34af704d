package etcdcluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestStoppingServerClosesUnderReads stops an embedded server (as etcd
// does itself after the member's removal) while clients keep reading
// from it in tight loops, before and after etcd has closed its backend,
// then closes it: no read may reach the closed backend (it would panic
// inside etcd holding the backend's read lock, and every later read and
// Close itself would wait forever), and Close returns.
func TestStoppingServerClosesUnderReads(t *testing.T) {
	n, cfg := startGateServer(t, "g")
	e := n.srv

	// The key read is committed to the backend and not in its read
	// buffer: etcd answers a read of a missing key from its in-memory
	// index, and one of a key written in the current batch from the
	// buffer, neither touching the backend's transaction.
	c := committedKey(t, e, cfg)
	_, err := c.Put(context.Background(), "other", "v")
	require.NoError(t, err)

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ok, afterStop atomic.Int64
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				_, err := c.Get(rctx, "k", clientv3.WithSerializable())
				rcancel()
				if err == nil {
					ok.Add(1)
				}
				if stopped(e) {
					afterStop.Add(1)
				}
			}
		})
	}
	eventually(t, bound, "reads served", func() (bool, string) { return ok.Load() >= 100, "" })
	go e.Server.HardStop()
	<-e.Server.StopNotify()
	eventually(t, bound, "reads sent to the stopped server", func() (bool, string) { return afterStop.Load() >= 100, "" })

	requireCloses(t, n)
}

// TestStoppingServerClosesUnderHealthAndSnapshots is
// TestStoppingServerClosesUnderReads for the requests that reach the
// server outside gRPC's unary calls: the health endpoints, which bypass
// the gate but read only the empty key (from etcd's in-memory index,
// never the backend), and Maintenance Snapshot streams, which read the
// backend and pass the gate (TestGateHoldsSnapshots). Neither reaches the
// closed backend, and Close returns.
func TestStoppingServerClosesUnderHealthAndSnapshots(t *testing.T) {
	n, cfg := startGateServer(t, "h")
	e := n.srv
	c := committedKey(t, e, cfg)

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var healthy, snapshots, afterStop atomic.Int64
	hc := &http.Client{Timeout: 200 * time.Millisecond}
	for range 6 {
		wg.Go(func() {
			for ctx.Err() == nil {
				if resp, err := hc.Get(cfg.ClientURL + "/health?serializable=true"); err == nil {
					if resp.StatusCode == http.StatusOK {
						healthy.Add(1)
					}
					resp.Body.Close()
				}
				if stopped(e) {
					afterStop.Add(1)
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				sctx, scancel := context.WithTimeout(ctx, 200*time.Millisecond)
				if rc, err := c.Snapshot(sctx); err == nil {
					if _, err := io.Copy(io.Discard, rc); err == nil {
						snapshots.Add(1)
					}
					rc.Close()
				}
				scancel()
			}
		})
	}
	eventually(t, bound, "health checks and snapshots served", func() (bool, string) {
		return healthy.Load() >= 50 && snapshots.Load() >= 5, fmt.Sprint(healthy.Load(), " ", snapshots.Load())
	})
	go e.Server.HardStop()
	<-e.Server.StopNotify()
	eventually(t, bound, "health checks sent to the stopped server", func() (bool, string) { return afterStop.Load() >= 100, "" })

	requireCloses(t, n)
}

// TestGateHoldsSnapshots: a Snapshot stream is admitted by the gate like
// a unary request, so the server's shutdown (the gate's close) waits
// until it has returned, its context canceled first; once the gate is
// closed new Snapshot streams are refused.
func TestGateHoldsSnapshots(t *testing.T) {
	g := newRequestGate()
	info := &grpc.StreamServerInfo{FullMethod: snapshotMethod}
	started := make(chan struct{})
	var returned atomic.Bool
	errc := make(chan error, 1)
	go func() {
		errc <- g.streamInterceptor()(nil, ctxStream{ctx: context.Background()}, info, func(_ any, ss grpc.ServerStream) error {
			close(started)
			<-ss.Context().Done()
			returned.Store(true)
			return ss.Context().Err()
		})
	}()
	<-started
	g.mu.Lock()
	admitted := g.admitted
	g.mu.Unlock()
	require.Equal(t, 1, admitted, "the running snapshot is admitted by the gate")
	g.close()
	require.True(t, returned.Load(), "the gate closed while a snapshot still ran")
	require.Error(t, <-errc)
	err := g.streamInterceptor()(nil, ctxStream{ctx: context.Background()}, info, func(any, grpc.ServerStream) error {
		t.Error("a snapshot ran after the gate closed")
		return nil
	})
	require.Equal(t, codes.Unavailable, status.Code(err))
}

// ctxStream is a server stream that only has a context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s ctxStream) Context() context.Context { return s.ctx }

// startGateServer starts a one-member embedded server named name, with
// its request gate, and waits until it is ready.
func startGateServer(t *testing.T, name string) (*Node, Config) {
	t.Helper()
	cfg, err := localConfig(t, name).withDefaults()
	require.NoError(t, err)
	n := &Node{cfg: cfg, log: cfg.Logger}
	require.NoError(t, n.startServer(cfg.Name+"="+cfg.AdvertisePeerURL, false))
	select {
	case <-n.srv.Server.ReadyNotify():
	case <-time.After(bound):
		t.Fatal("the server did not become ready")
	}
	return n, cfg
}

// requireCloses closes n's stopped server and requires that it returns.
func requireCloses(t *testing.T, n *Node) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		n.closeServer()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(bound):
		t.Fatal("closing the stopped server did not return: a request holds it")
	}
}

// committedKey writes k=v through a client of e (closed with the test)
// and commits it to e's backend, so that reading k reads the backend.
func committedKey(t *testing.T, e *embed.Etcd, cfg Config) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.ClientURL}, Logger: zap.NewNop()})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = c.Put(context.Background(), "k", "v")
	require.NoError(t, err)
	e.Server.Backend().ForceCommit()
	return c
}
