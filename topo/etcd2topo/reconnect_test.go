package etcd2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// TestReconnectAfterLongOutage: a Conn whose only member was down for
// 45 s dials it again soon after it is back, so that a call made then
// succeeds within an ordinary deadline (10 s here). With gRPC's default
// backoff (1 s growing 1.6 times per attempt, up to 120 s) the attempts
// had drifted apart to about 27 s by then, and calls failed Unavailable
// for some 25 s after the member was back (before the fix: "no call
// succeeded within 10s of the member's restart"); the backoff is now
// capped at MaxReconnectDelay.
func TestReconnectAfterLongOutage(t *testing.T) {
	t.Parallel()
	c := etcdtest.StartCluster(t, 1)
	conn, err := NewConn(Options{Endpoints: []string{c.Addr(0)}}, "/reconnect")
	require.NoError(t, err)
	defer conn.Close()
	ctx := t.Context()
	_, err = conn.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)

	c.StopMember(0)
	// The outage itself: long enough for gRPC's default backoff to have
	// grown past the deadline below.
	outage := time.NewTimer(45 * time.Second)
	<-outage.C
	gctx, cancel := context.WithTimeout(ctx, time.Second)
	_, _, err = conn.Get(gctx, "f")
	cancel()
	require.Error(t, err, "the member is down")

	c.RestartMember(0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		gctx, cancel := context.WithDeadline(ctx, deadline)
		data, _, err := conn.Get(gctx, "f")
		cancel()
		if err == nil {
			require.Equal(t, "x", string(data))
			return
		}
		require.Falsef(t, time.Now().After(deadline), "no call succeeded within 10s of the member's restart: %v", err)
		<-time.After(100 * time.Millisecond) // poll
	}
}
