package consultopo

import (
	"context"
	"net"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTermEndKeepsConnections: the end of a term does not cost a TCP
// connection. The term's monitor (started as the leader looks at its
// leadership context) has a blocking query in flight on the election key
// when the leader resigns; the release answers it, so the
// monitor lets it end rather than cancel it (cancelling an HTTP/1.1
// request closes its connection, and the Conn's next request dials a new
// one: a connection per term on each of the agent and the client).
func TestTermEndKeepsConnections(t *testing.T) {
	root := testRoot(t)
	var dials atomic.Int64
	mk := func() *Conn {
		c := newTestConn(t, root)
		dial := c.transport.DialContext
		c.transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dial(ctx, network, addr)
		}
		return c
	}
	parts := []*Conn{mk(), mk()}
	ctx := t.Context()
	term := func(i int) {
		p, err := parts[i%2].NewLeaderParticipation("e", "c")
		require.NoError(t, err)
		lctx, err := p.WaitForLeadership()
		require.NoError(t, err)
		_ = lctx.Done() // a leader watching its term: the monitor runs
		require.NoError(t, p.Resign(ctx))
	}
	const warm, terms = 10, 40
	for i := range warm {
		term(i)
	}
	before := dials.Load()
	for i := range terms {
		term(i)
	}
	require.LessOrEqualf(t, dials.Load()-before, int64(2), "%d terms dialled %d connections", terms, dials.Load()-before)
}
