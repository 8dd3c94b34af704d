package etcd2topo

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/claims"
)

// TestNativeSessionTTL: the Session of a native entry read from the store
// (here through Inspect, the QueueReader topo/inspect uses) names its lease
// as SessionTTL reads it, like every other entry's Session: SessionTTL
// answers with the lease's time left, for an etcd concurrency.Election
// leader and for a topokit candidate waiting behind it.
func TestNativeSessionTTL(t *testing.T) {
	ctx := testCtx(t)
	c := openConn(t, serverAddr, newRoot())
	cli := rawClient(t, serverAddr)
	// No leading '/': Inspect takes the prefix as a lock path.
	prefix := fmt.Sprintf("native%d", rootCount.Add(1))
	_, e := etcdElection(t, cli, prefix)
	require.NoError(t, e.Campaign(ctx, "etcd"))
	p := native(t, c, prefix, "tk")
	go func() { _, _ = p.WaitForLeadership() }()
	waitNativeKeys(t, cli, prefix, 2)

	st, err := c.Inspect(ctx, claims.Queue{Path: prefix, Native: true})
	require.NoError(t, err)
	require.True(t, st.Held)
	require.Len(t, st.Waiting, 1)
	for _, s := range []string{st.Holder.Session, st.Waiting[0].Session} {
		ttl, ok, err := c.SessionTTL(ctx, s)
		require.NoError(t, err)
		require.True(t, ok, "SessionTTL(%q) finds no live lease", s)
		require.Greater(t, ttl, time.Duration(0))
	}
}
