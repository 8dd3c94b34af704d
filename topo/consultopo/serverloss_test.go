package consultopo

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestServerDestroyedSessionReportedWithinLockDelay: a session that
// Consul ends on its own account (destroyed by another client; an
// invalidation past its TTL is the same release of its keys) is reported
// by the lock's Done and the term's context within the documented margin:
// the lock-delay (Options.LockDelay, 1 s by default) during which Consul
// keeps the keys from every other session, so no successor holds while the
// old holder's Done is open. The log gives the real figure.
func TestServerDestroyedSessionReportedWithinLockDelay(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	ctx := t.Context()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	done := l.Done()
	p, err := c.NewLeaderParticipation("elec", "id")
	require.NoError(t, err)
	defer p.Stop()
	term, err := p.WaitForLeadership()
	require.NoError(t, err)
	requireOpen(t, done, "held")
	require.NoError(t, term.Err())

	destroying := time.Now()
	for _, id := range c.sessionIDs() {
		_, err := rawClient(t).Session().Destroy(id, nil)
		require.NoError(t, err)
	}
	margin := c.opts.LockDelay
	require.Positive(t, margin)
	for what, ch := range map[string]<-chan struct{}{"the lock's Done": done, "the term's context": term.Done()} {
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatalf("%s never closed", what)
		}
		after := time.Since(destroying)
		t.Logf("%s closed %v after the destroy was sent", what, after.Round(time.Millisecond))
		require.LessOrEqual(t, after, margin, "%s closed later than the documented margin (the lock-delay) %v", what, margin)
	}
	requireCode(t, l.Check(ctx), topo.LockLost)
}
