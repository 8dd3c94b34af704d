package consultopo

import (
	"context"
	"net"
	"net/http/httptrace"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAbortSparesReusedConnection: a request whose answer has no body (a
// GET of a missing key: 404) is aborted by the end of its session just
// as net/http has put its connection back in the pool, and a session
// create has taken that connection: the create must not fail with the
// other request's cause. (The abort cancelled the request's context,
// which closed the connection under the create: "Put
// .../v1/session/create: consul session destroyed by its connection",
// seen in CI in Scale/SemaphoreHandoverCostFlat, where a released lock's
// Monitor query was answered 404 as its session ended.) The PutIdleConn
// trace hook runs in net/http's read loop in that very gap: it holds the
// loop there while the create takes the connection and the session ends.
func TestAbortSparesReusedConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := testOptions()
	opts.SessionTTL = time.Hour // no renewal takes the connection meanwhile
	c, err := NewConn(opts, testRoot(t))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	s, err := c.newSession(ctx, "a", time.Hour, true)
	require.NoError(t, err)
	// A's dial is then the pool's only connection.
	c.transport.CloseIdleConnections()

	var (
		aConn    net.Conn
		bConn    = make(chan net.Conn, 1)
		bDone    = make(chan error, 1)
		once     sync.Once
		events   []string
		deferred = c.bounded.deferred.Load()
	)
	aTrace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { aConn = info.Conn },
		PutIdleConn: func(err error) {
			if err != nil {
				return
			}
			once.Do(func() {
				bctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
					bConn <- info.Conn
				}})
				go func() {
					b, err := c.newSession(bctx, "b", time.Hour, true)
					if err == nil {
						c.destroySession(ctx, b)
					}
					bDone <- err
				}()
				if <-bConn != aConn {
					events = append(events, "the create did not take A's connection")
				}
				c.forgetSession(s, errSessionClosed)
				// The abort closes the create's connection (it fails) or
				// waits for A's answer.
				for c.bounded.deferred.Load() == deferred {
					select {
					case err := <-bDone:
						events = append(events, "the create ended before A's answer")
						bDone <- err
						return
					case <-time.After(time.Millisecond):
					}
				}
			})
		},
	}
	actx := httptrace.WithClientTrace(claimContext(s.ctx, prioClaimOther), aTrace)
	_, _, aErr := c.kv.Get(c.key("missing"), c.consistentOptions(actx))
	var bErr error
	select {
	case bErr = <-bDone:
	case <-ctx.Done():
		t.Fatal("the session create did not end")
	}
	require.NoError(t, bErr, "a session create failed with another request's abort cause (%v)", events)
	require.Empty(t, events)
	require.ErrorIs(t, aErr, errSessionClosed, "the aborted request returns its own cause")
}
