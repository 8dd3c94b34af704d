package consultopo

import (
	"context"
	"net"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
)

// Aborting a request. net/http puts a connection back in its idle pool
// as soon as it has read an answer without a body (Consul's 404 to a GET
// of a missing key), before the request's RoundTrip has taken that
// answer; a cancellation of the request's context in that gap closes the
// connection, which another request may have taken meanwhile: that one
// fails with the first one's cancellation cause. (A semaphore's session
// create failed with "consul session destroyed by its connection": a
// released lock's Monitor query, answered 404 by the release, was
// cancelled by the end of its session at that moment;
// TestAbortSparesReusedConnection.) So a request is sent with a context
// of its own (requestGate), cancelled only while it has no connection;
// once it has one, an abort closes the connection, and only while no byte
// of the answer has been read from it, atomically with those reads
// (trackedConn). Once a byte is read, the abort waits until RoundTrip has
// returned the answer's headers (Consul sends the rest with them), unless
// it is the request's bound (boundedTransport), which ends it at once.

// trackedConn is a connection to the agent whose reads count as an answer
// to the request using it (requestGate.reading).
type trackedConn struct {
	net.Conn
	cur atomic.Pointer[requestGate] // the request that has it, or had it last
}

// Read implements net.Conn: bytes read for an aborted request are
// dropped, with an error, so that its connection never returns to the
// pool.
func (c *trackedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if g := c.cur.Load(); g != nil && !g.reading(c, n) {
		return 0, net.ErrClosed
	}
	return n, err
}

// trackedDial wraps dial's connections as trackedConns.
func trackedDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &trackedConn{Conn: c}, nil
	}
}

// requestGate decides how one request is aborted (see above).
type requestGate struct {
	cancel context.CancelCauseFunc // of the context the request is sent with

	mu       sync.Mutex
	gotConn  bool
	conn     *trackedConn // nil when untracked (TLS)
	answered bool         // a byte of the answer was read
	returned bool         // RoundTrip returned
	cause    error        // the abort's, once aborted
	pending  error        // an abort waiting for RoundTrip to return
}

// newRequestGate returns a gate and the context to send a request of
// parent with: parent's values, not its cancellation.
func newRequestGate(parent context.Context) (*requestGate, context.Context) {
	g := &requestGate{}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	g.cancel = cancel
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: g.gotConnection})
	return g, ctx
}

// gotConnection registers the request with its connection (GotConn runs
// before the request is written); a request aborted before it had one
// closes it.
func (g *requestGate) gotConnection(info httptrace.GotConnInfo) {
	tc, _ := info.Conn.(*trackedConn)
	if tc != nil {
		tc.cur.Store(g)
	}
	g.mu.Lock()
	g.gotConn, g.conn = true, tc
	aborted := g.cause != nil
	g.mu.Unlock()
	if aborted && tc != nil {
		_ = tc.Close()
	}
}

// reading reports whether n bytes just read from c may go to the HTTP
// client: not once the request was aborted.
func (g *requestGate) reading(c *trackedConn, n int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conn != c {
		return true
	}
	if g.cause != nil && !g.returned {
		return false
	}
	if n > 0 {
		g.answered = true
	}
	return true
}

// abort ends the request with cause: at once without a connection or
// before its answer (closing the connection), else once RoundTrip
// returns; force (the request's bound) ends it at once in any case.
func (g *requestGate) abort(cause error, force bool) {
	g.mu.Lock()
	if g.cause != nil {
		g.mu.Unlock()
		return
	}
	var conn *trackedConn
	switch {
	case !g.gotConn || g.returned || force:
	case g.conn != nil && !g.answered:
		conn = g.conn
	case g.conn != nil:
		if g.pending == nil {
			g.pending = cause
		}
		g.mu.Unlock()
		return
	}
	g.cause = cause
	g.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
	}
	g.cancel(cause)
}

// roundTripped records that RoundTrip returned and runs an abort that
// waited for it. It returns the abort's cause, nil when not aborted
// before.
func (g *requestGate) roundTripped() error {
	g.mu.Lock()
	g.returned = true
	cause, pending := g.cause, g.pending
	g.mu.Unlock()
	if cause == nil && pending != nil {
		g.abort(pending, true)
	}
	return cause
}

// deferred reports whether an abort waits for RoundTrip (a test hook
// reads it).
func (g *requestGate) deferred() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.pending != nil && g.cause == nil
}
