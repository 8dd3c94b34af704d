package etcd2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
)

// TestClosedWithdrawSendsNothing: once the Conn is closed, withdrawing a
// claim (Resign of a term, Stop of a candidacy whose wait Close ended,
// the Unlock of a lock) sends etcd nothing and returns at once: Close
// revoked the Conn's leases, and their entries went with them. Before,
// each withdrawal sent its delete on the closed client, which failed it
// only after about 2.5 s of retries. Nothing of the Conn is left in the
// store, and another Conn takes the lock and the lead at once.
func TestClosedWithdrawSendsNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := newRoot()
	var sc storeCounter
	o := testOptions(serverAddr)
	o.dialOptions = sc.dialOptions()
	c, err := NewConn(o, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	other := openConn(t, serverAddr, root)

	_, err = c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	ld, err := c.LockWithTTL(ctx, "d", "own lease", time.Minute)
	require.NoError(t, err)
	lead, err := c.NewLeaderParticipation("e", "leader")
	require.NoError(t, err)
	_, err = lead.WaitForLeadership()
	require.NoError(t, err)
	first, err := other.NewLeaderParticipation("e2", "first")
	require.NoError(t, err)
	_, err = first.WaitForLeadership()
	require.NoError(t, err)
	waiter, err := c.NewLeaderParticipation("e2", "waiter")
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() { _, err := waiter.WaitForLeadership(); waited <- err }()
	cli := rawClient(t, serverAddr)
	entries := func(prefix string) int64 {
		resp, err := cli.Get(ctx, root+"/"+prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		require.NoError(t, err)
		return resp.Count
	}
	require.Eventually(t, func() bool { return entries("elections/e2/locks/") == 2 }, 30*time.Second, 5*time.Millisecond,
		"the waiter's entry never showed")

	c.Close()
	require.Truef(t, topo.IsErrType(<-waited, topo.Closed), "the waiter after Close")
	before := sc.reqs.Load()
	require.Truef(t, topo.IsErrType(lead.Resign(ctx), topo.Closed), "Resign after Close")
	lead.Stop()
	waiter.Stop()
	require.Truef(t, topo.IsErrType(ld.Unlock(ctx), topo.Closed), "Unlock after Close")
	require.Zero(t, sc.reqs.Load()-before, "requests sent by withdrawals on a closed Conn")

	require.Zero(t, entries("d/locks/"), "a lock entry of the closed Conn is left")
	require.Zero(t, entries("elections/e/"), "the closed Conn's term is left")
	require.EqualValues(t, 1, entries("elections/e2/locks/"), "only the other Conn's candidate is left")
	l, err := other.TryLock(ctx, "d", "next")
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	next, err := other.NewLeaderParticipation("e", "next")
	require.NoError(t, err)
	_, err = next.WaitForLeadership()
	require.NoError(t, err)
	next.Stop()
	first.Stop()
}
