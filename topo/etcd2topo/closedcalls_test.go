package etcd2topo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestClosedParticipationReadsSendNothing: once the Conn is closed, a
// participation's reads (Leader, GetCurrentLeaderID, WaitForNewLeader,
// Observe) return Closed without sending etcd a request (the closed client
// failed them only after seconds of retries).
func TestClosedParticipationReadsSendNothing(t *testing.T) {
	var sc storeCounter
	o := testOptions(serverAddr)
	o.dialOptions = sc.dialOptions()
	c, err := NewConn(o, newRoot())
	require.NoError(t, err)
	ctx := context.Background()
	p, err := c.NewLeaderParticipation("elec", "id")
	require.NoError(t, err)
	c.Close()
	before := sc.reqs.Load()
	_, err = p.Leader(ctx)
	require.Truef(t, topo.IsErrType(err, topo.Closed), "Leader: %v", err)
	_, err = p.GetCurrentLeaderID(ctx)
	require.Truef(t, topo.IsErrType(err, topo.Closed), "GetCurrentLeaderID: %v", err)
	_, err = p.WaitForNewLeader(ctx)
	require.Truef(t, topo.IsErrType(err, topo.Closed), "WaitForNewLeader: %v", err)
	_, err = p.Observe(ctx)
	require.Truef(t, topo.IsErrType(err, topo.Closed), "Observe: %v", err)
	require.Zero(t, sc.reqs.Load()-before, "requests sent by reads on a closed Conn")
	p.Stop()
}
