package zk2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestIdleHolderOnPartedFollowerGivesUpFirst: an idle lock holder (only
// the client library's pings on the wire) whose follower is parted from
// the leader just after answering a ping must see its lock end before a
// waiter on the leader's side is granted it. The follower tells the
// leader which of its sessions were active only in its answers to the
// leader's pings (every half tick): the answered ping's own activity may
// never reach the leader, whose latest news of the session is then the
// ping before, one ping interval (a third of the session timeout) older.
func TestIdleHolderOnPartedFollowerGivesUpFirst(t *testing.T) {
	e := zktest.StartEnsembleWithLinks(t, 3)
	l := e.WaitLeader(zktest.StartTimeout)
	f, g := (l+1)%3, (l+2)%3
	root := freshRoot(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	holder, err := NewConn(Options{Servers: []string{e.Addr(f)}, SessionTimeout: testSessionTimeout}, root)
	require.NoError(t, err)
	t.Cleanup(holder.Close)
	waiter := openConn(t, []string{e.Addr(l), e.Addr(g)}, root)
	_, err = waiter.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	ld, err := holder.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	done := ld.Done()
	granted := make(chan bool, 1) // whether the holder's Done was open then
	go func() {
		wl, err := waiter.Lock(ctx, "d", "waiter")
		if err == nil {
			granted <- !isClosed(done)
			_ = wl.Unlock(ctx)
		}
	}()
	holder.mu.Lock()
	s := holder.cur
	holder.mu.Unlock()
	// Two pings answered while idle: the second's touch is the one cut off
	// before the follower reports it.
	for range 2 {
		before, _ := s.obs.lastProof()
		for p, _ := s.obs.lastProof(); p.Equal(before); p, _ = s.obs.lastProof() {
			time.Sleep(time.Millisecond) // polled: the cut must follow the answer closely
		}
	}
	e.CutLink(f, l)
	defer e.HealLink(f, l)
	select {
	case parted := <-granted:
		require.False(t, parted, "the waiter was granted the lock while the idle parted holder's Done was still open")
	case <-ctx.Done():
		t.Fatal("the waiter was not granted the lock of a holder parted from the leader")
	}
}
