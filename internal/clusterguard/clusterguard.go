// Package clusterguard pins an etcd client to one etcd cluster: gRPC
// client interceptors compare the cluster ID in each unary answer's
// response header, and in each message of a stream (watch events, lease
// keep-alives), with the first one seen (or the one pinned) and turn an
// answer from another cluster into an error wrapping ErrMismatch, so
// that a client whose connection was re-established to an address now
// served by another cluster (a member that lost its data and bootstrapped
// anew at its old URLs) never takes that cluster's answer, or its
// acknowledgement of a write, for its own cluster's.
package clusterguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
)

// ErrMismatch is wrapped by the error of a call answered by another
// cluster than the guard's.
var ErrMismatch = errors.New("etcd answer from another etcd cluster")

// Guard holds the cluster ID a client is pinned to. The zero value pins
// to the first cluster ID answered. Safe for concurrent use.
type Guard struct {
	id       atomic.Uint64
	mismatch atomic.Bool
}

type skipKey struct{}

// Skip returns ctx with the guard's check off, for calls that ask a
// given endpoint which cluster it belongs to.
func Skip(ctx context.Context) context.Context { return context.WithValue(ctx, skipKey{}, true) }

// Pin pins the guard to cluster id when it is not pinned yet, and
// reports whether it is now pinned to id.
func (g *Guard) Pin(id uint64) bool {
	g.id.CompareAndSwap(0, id)
	return g.id.Load() == id
}

// ID returns the pinned cluster ID, 0 when none yet.
func (g *Guard) ID() uint64 { return g.id.Load() }

// TakeMismatch reports whether a mismatch was seen since its last call.
func (g *Guard) TakeMismatch() bool { return g.mismatch.Swap(false) }

// DialOptions returns the gRPC dial options that install the check: on
// unary calls, and on every message a stream receives (a stream whose
// message comes from another cluster fails with the error, and the
// client's watch or keep-alive loop opens it again).
func (g *Guard) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err != nil || ctx.Value(skipKey{}) != nil {
				return err
			}
			return g.check(method, reply)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil || ctx.Value(skipKey{}) != nil {
				return cs, err
			}
			return &guardedStream{ClientStream: cs, g: g, method: method}, nil
		}),
	}
}

// check returns the ErrMismatch error when reply (an answer, or a
// stream's message) carries a cluster ID other than the pinned one; it
// pins the first one seen.
func (g *Guard) check(method string, reply any) error {
	h, ok := reply.(interface {
		GetHeader() *etcdserverpb.ResponseHeader
	})
	if !ok || h.GetHeader() == nil || h.GetHeader().ClusterId == 0 {
		return nil
	}
	got := h.GetHeader().ClusterId
	if !g.Pin(got) {
		g.mismatch.Store(true)
		return fmt.Errorf("%w: %s answered by cluster %x, not %x (was a member's data lost and the member bootstrapped anew at its old address?)", ErrMismatch, method, got, g.ID())
	}
	return nil
}

// guardedStream checks each message a stream receives.
type guardedStream struct {
	grpc.ClientStream
	g      *Guard
	method string
}

// RecvMsg receives m and fails with the ErrMismatch error when it comes
// from another cluster.
func (s *guardedStream) RecvMsg(m any) error {
	if err := s.ClientStream.RecvMsg(m); err != nil {
		return err
	}
	return s.g.check(s.method, m)
}

// CheckEndpoints asks each of endpoints, when there are several, for its
// status through cli (each request bounded by timeout; an endpoint that
// does not answer in time is not checked, nor one that refuses TCP
// connections, which is not waited for: gRPC would dial it again until
// the timeout) and compares the cluster IDs
// of the answers. When they agree it pins g to that cluster ID and
// returns "". When they differ it returns a description naming each
// cluster ID with its endpoints, sorted ("cluster 1a at a,b and cluster
// 2b at c"), and pins nothing. It must run before cli is shared: Status
// on one endpoint dials it apart from the client's balancer.
func (g *Guard) CheckEndpoints(ctx context.Context, cli *clientv3.Client, endpoints []string, timeout time.Duration) string {
	if len(endpoints) < 2 {
		return ""
	}
	ctx, cancel := context.WithTimeout(Skip(ctx), timeout)
	defer cancel()
	ids := make([]uint64, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Go(func() {
			if refuses(ctx, ep) {
				return
			}
			if sr, err := cli.Status(ctx, ep); err == nil && sr.Header != nil {
				ids[i] = sr.Header.ClusterId
			}
		})
	}
	wg.Wait()
	byID := map[uint64][]string{}
	var order []uint64
	for i, id := range ids {
		if id == 0 {
			continue
		}
		if _, ok := byID[id]; !ok {
			order = append(order, id)
		}
		byID[id] = append(byID[id], endpoints[i])
	}
	switch len(order) {
	case 0:
		return ""
	case 1:
		g.Pin(order[0])
		return ""
	}
	parts := make([]string, 0, len(order))
	for _, id := range order {
		eps := byID[id]
		slices.Sort(eps)
		parts = append(parts, fmt.Sprintf("cluster %x at %s", id, strings.Join(eps, ",")))
	}
	return strings.Join(parts, " and ")
}

// refuses reports whether a TCP connection to endpoint's host:port
// (a URL, or host:port) fails at once, bounded by ctx: nothing listens
// there. Endpoints of other schemes (unix sockets) are not tried.
func refuses(ctx context.Context, endpoint string) bool {
	host := endpoint
	if i := strings.Index(host, "://"); i >= 0 {
		scheme := host[:i]
		if scheme != "http" && scheme != "https" {
			return false
		}
		host = host[i+3:]
	}
	host, _, _ = strings.Cut(host, "/")
	if _, _, err := net.SplitHostPort(host); err != nil {
		return false
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	_ = c.Close()
	return false
}
