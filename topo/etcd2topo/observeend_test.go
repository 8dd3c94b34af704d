package etcd2topo

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/claims"
)

// endingHeads is the Conn's driver, except that a watching Head (an
// Observe's) cancels the Observe's context and returns its change signal
// already closed, as when the caller cancels as a change comes; it
// counts the Heads asked with an ended context.
type endingHeads struct {
	driver
	cancel context.CancelFunc
	late   atomic.Int64
}

func (d *endingHeads) Head(ctx context.Context, q claims.Queue, watch bool) (claims.Entry, bool, <-chan struct{}, error) {
	if ctx.Err() != nil {
		d.late.Add(1)
	}
	h, ok, changed, err := d.driver.Head(ctx, q, watch)
	if watch && err == nil {
		d.cancel()
		closed := make(chan struct{})
		close(closed)
		changed = closed
	}
	return h, ok, changed, err
}

// TestObserveReadsNothingAfterItsEnd: an Observe whose context ended
// sends no request, also when a change came at the same time. Its loop
// chose at random between the change and the end, and on the change read
// the head again with the ended context: the watches it opened then were
// sent after Observe's channel closed (TestRoundTrips counted one in a
// later operation's window: ResumeInfo, Resign). Each round here gives
// that choice twice (the send of the first leader, then the wait for a
// change): 40 rounds miss it with a chance of about 1 in 100,000.
func TestObserveReadsNothingAfterItsEnd(t *testing.T) {
	c := openConn(t, serverAddr, newRoot())
	ctx := context.Background()
	p, err := c.NewLeaderParticipation("e", "me")
	require.NoError(t, err)
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	defer p.Stop()
	d := &endingHeads{driver: driver{c}}
	eng := claims.New(d, claims.Options{})
	defer eng.Close()
	obs, err := eng.NewLeaderParticipation("e", "observer")
	require.NoError(t, err)
	for range 40 {
		octx, cancel := context.WithCancel(ctx)
		d.cancel = cancel
		ch, err := obs.Observe(octx)
		require.NoError(t, err)
		for range ch {
		}
		cancel()
	}
	require.Zero(t, d.late.Load(), "Observe read the head again after its context ended")
}
