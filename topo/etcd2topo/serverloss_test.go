package etcd2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestServerRevokedLeaseReportedWithinMargin: a lease that etcd ends on
// its own account (revoked by another client; an expiry is the same
// deletion of its keys) is reported by the lock's Done and the term's
// context as soon as the Conn's watches see the keys go, and no later
// than the documented margin (SafetyMargin of the lease TTL) after the
// revoke was sent. etcd lets a successor in at once, so nothing shorter
// can be promised; the log gives the real figure.
func TestServerRevokedLeaseReportedWithinMargin(t *testing.T) {
	root := newRoot()
	c := openConn(t, serverAddr, root)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
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

	revoking := time.Now()
	_, err = rawClient(t, serverAddr).Revoke(ctx, l.(*lockDescriptor).cl.lease.id)
	require.NoError(t, err)
	margin := SafetyMargin(c.opts.LockTTL)
	for what, ch := range map[string]<-chan struct{}{"the lock's Done": done, "the term's context": term.Done()} {
		select {
		case <-ch:
		case <-time.After(time.Minute):
			t.Fatalf("%s never closed", what)
		}
		after := time.Since(revoking)
		t.Logf("%s closed %v after the revoke was sent", what, after.Round(time.Millisecond))
		require.LessOrEqual(t, after, margin, "%s closed later than the documented margin %v", what, margin)
	}
	require.ErrorIs(t, l.Check(ctx), topo.LockLost)
}
