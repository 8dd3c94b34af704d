package etcd2topo

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// rtCounter counts the requests a client sends to etcd: every unary call
// (Range, Put, Txn, DeleteRange, LeaseGrant, LeaseRevoke, ...) and every
// message sent on a stream (a watch's create and cancel requests, a lease
// keepalive). The benchmarks report them per operation ("rt/op" for
// topokit, "raw-rt/op" for the raw client): on etcd each is one round trip
// to the leader.
type rtCounter struct{ n atomic.Int64 }

func (r *rtCounter) load() int64 { return r.n.Load() }

// dialOptions are the gRPC interceptors that count.
func (r *rtCounter) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			r.n.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return countingStream{cs, r}, nil
		}),
	}
}

type countingStream struct {
	grpc.ClientStream
	r *rtCounter
}

func (s countingStream) SendMsg(m any) error {
	s.r.n.Add(1)
	return s.ClientStream.SendMsg(m)
}

// countedConn opens a Conn at root whose requests r counts.
func countedConn(b *testing.B, root string, r *rtCounter) *Conn {
	b.Helper()
	c, err := NewConn(Options{Endpoints: []string{serverAddr}, dialOptions: r.dialOptions()}, root)
	must(b, err)
	b.Cleanup(c.Close)
	return c
}

// countedClient opens a raw client whose requests r counts.
func countedClient(b *testing.B, r *rtCounter) *clientv3.Client {
	b.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(serverAddr, ","),
		DialTimeout: 5 * time.Second,
		DialOptions: r.dialOptions(),
	})
	must(b, err)
	b.Cleanup(func() { cli.Close() })
	return cli
}

// benchEnv is a benchmark's two sides: a Conn and a raw client under one
// root, each with its request counter, and an uncounted client (obs) for
// the benchmark's own bookkeeping (polls, writes that trigger events).
type benchEnv struct {
	c      *Conn
	cli    *clientv3.Client
	obs    *clientv3.Client
	root   string
	tc, rc *rtCounter
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	e := &benchEnv{root: newRoot(), tc: &rtCounter{}, rc: &rtCounter{}}
	e.c = countedConn(b, e.root, e.tc)
	e.cli = countedClient(b, e.rc)
	e.obs = rawClient(b, serverAddr)
	return e
}

// rtMark is the two counters at some point.
type rtMark struct{ t, r int64 }

func (e *benchEnv) mark() rtMark { return rtMark{e.tc.load(), e.rc.load()} }

// reportRT reports each side's requests per iteration since m.
func (e *benchEnv) reportRT(b *testing.B, m rtMark, iters int) {
	b.Helper()
	if iters == 0 {
		return
	}
	b.ReportMetric(float64(e.tc.load()-m.t)/float64(iters), "rt/op")
	b.ReportMetric(float64(e.rc.load()-m.r)/float64(iters), "raw-rt/op")
}
