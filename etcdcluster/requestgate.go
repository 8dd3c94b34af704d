package etcdcluster

import (
	"context"
	"sync"

	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// requestGate keeps the embedded server's unary requests off its backend
// once the server begins to stop.
//
// etcd v3.6 closes its backend when the server stops (after the member's
// own removal, or on Close) without waiting for the requests its gRPC
// server is still running, and keeps taking requests until embed.Close
// stops that gRPC server (etcd-io/etcd#22189). A read of the closed
// backend dereferences its nil bbolt transaction while holding the
// backend's read lock; the panic leaves the lock held, so every later read
// waits forever, and so does Close, which waits for those requests.
//
// The gate admits a request only while the server is not stopping, and
// holds the server's shutdown -- a goroutine tracked by the server's own
// wait group (EtcdServer.GoAttach), which etcd waits for before it closes
// the backend -- until every admitted request has returned. Once the
// server is stopping it cancels the admitted requests' contexts, so that
// those waiting on a proposal or a linearizable read return at once, and
// refuses new ones with Unavailable (clients retry another member).
// Snapshot streams are held like unary requests. The health endpoints
// (/health, /livez, /readyz) need no gate: the one range they read is of
// the empty key, which etcd answers from its in-memory index without
// touching the backend (TestStoppingServerClosesUnderHealthAndSnapshots
// reads them while the server stops). Other streams (Watch,
// LeaseKeepAlive) are not held: etcd serves them from
// its own goroutines, which it stops before closing the backend. They are
// ended instead (their context canceled, which etcd's stream handlers
// return on) once the server begins to stop or endStreams is called, and
// new ones are refused: gRPC's graceful stop would otherwise wait for
// every client's watches and keepalives, up to etcd's request timeout
// (7 s with the default election timeout), before the member closes.
// Clients resume them on another member, as when a member dies. Safe for
// concurrent use.
type requestGate struct {
	stopping context.Context // canceled when the server begins to stop
	stop     context.CancelFunc
	// streams is canceled when streams must end: on stopping, or by
	// endStreams.
	streams    context.Context
	endStreams context.CancelFunc

	mu     sync.Mutex
	idle   *sync.Cond // signalled when admitted drops to 0
	closed bool
	// admitted counts the requests between admission and return.
	admitted int
}

func newRequestGate() *requestGate {
	g := &requestGate{}
	g.stopping, g.stop = context.WithCancel(context.Background())
	g.streams, g.endStreams = context.WithCancel(g.stopping)
	g.idle = sync.NewCond(&g.mu)
	return g
}

// enter admits a request unless the gate is closed.
func (g *requestGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.admitted++
	return true
}

// leave ends an admitted request.
func (g *requestGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.admitted--
	if g.admitted == 0 {
		g.idle.Broadcast()
	}
}

// close refuses every later request, cancels the admitted ones' contexts
// and waits until they have returned.
func (g *requestGate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	g.stop()
	for g.admitted > 0 {
		g.idle.Wait()
	}
}

// interceptor is the gate as the embedded server's innermost unary
// interceptor.
func (g *requestGate) interceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !g.enter() {
			return nil, status.Error(codes.Unavailable, "etcdcluster: the member is stopping")
		}
		// Deferred, so that it also runs when removalRaceHook ends the
		// request's goroutine.
		defer g.leave()
		hctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(g.stopping, cancel)()
		resp, err := handler(hctx, req)
		if err != nil && hctx.Err() != nil && ctx.Err() == nil {
			// Cut short because the member stops, not by the client:
			// say so with the code clients fail over on (the request's
			// outcome is unknown to them, as with any Unavailable).
			return nil, status.Error(codes.Unavailable, "etcdcluster: the member is stopping")
		}
		return resp, err
	}
}

// snapshotMethod is the stream that reads the backend from its handler
// (etcd's Maintenance Snapshot: a read transaction of the whole database,
// which on a closed backend panics holding its read lock or ends the
// process through etcd's logger).
const snapshotMethod = "/etcdserverpb.Maintenance/Snapshot"

// streamInterceptor ends the embedded server's streams when g.streams
// ends, and refuses new ones after that. A Snapshot stream is also
// admitted like a unary request: the server's shutdown waits until it
// returned, so that it never reads a closed backend.
func (g *requestGate) streamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if g.streams.Err() != nil {
			return status.Error(codes.Unavailable, "etcdcluster: the member is stopping")
		}
		if info != nil && info.FullMethod == snapshotMethod {
			if !g.enter() {
				return status.Error(codes.Unavailable, "etcdcluster: the member is stopping")
			}
			defer g.leave()
		}
		ctx, cancel := context.WithCancel(ss.Context())
		defer cancel()
		defer context.AfterFunc(g.streams, cancel)()
		return handler(srv, streamWithContext{ServerStream: ss, ctx: ctx})
	}
}

// streamWithContext is a server stream with another context.
type streamWithContext struct {
	grpc.ServerStream
	ctx context.Context
}

func (s streamWithContext) Context() context.Context { return s.ctx }

// attach makes e's shutdown wait for the gate: once e begins to stop, the
// gate closes, and e closes its backend only after that. When e is
// stopping already, the gate closes at once (requests admitted before
// are not waited for: etcd was stopping before it could be told to wait).
func (g *requestGate) attach(e *embed.Etcd) {
	attached := make(chan struct{})
	e.Server.GoAttach(func() {
		close(attached)
		<-e.Server.StoppingNotify()
		g.close()
	})
	select {
	case <-attached:
	case <-e.Server.StoppingNotify():
		// GoAttach refused (the server was stopping) or raced with it;
		// either way the gate must close now.
		go g.close()
	}
}
