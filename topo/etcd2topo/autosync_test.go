package etcd2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// TestAutoSyncFollowsMembers: a Conn given one member's address and
// Options.AutoSyncInterval learns the other members, and keeps working
// once the member it was given is stopped.
func TestAutoSyncFollowsMembers(t *testing.T) {
	cl := etcdtest.StartCluster(t, 3)
	opts := testOptions(cl.Addr(0))
	opts.AutoSyncInterval = 50 * time.Millisecond
	c, err := NewConn(opts, newRoot())
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = c.Create(ctx, "f", []byte("v"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(c.Client().Endpoints()) == 3 }, 30*time.Second, 10*time.Millisecond,
		"the client learns every member: %v", c.Client().Endpoints())

	cl.StopMember(0)
	got, _, err := c.Get(ctx, "f")
	require.NoError(t, err, "a Get once the only given member is down")
	require.Equal(t, "v", string(got))
}
