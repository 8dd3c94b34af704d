package zk2topo

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestResumedWaiterOutlivesCurrentSession: a resumed candidacy waits for
// the leader just ahead of it through an exists watch set on the Conn's
// current session, not on the candidacy's own. When that current session
// ends, the client ends its watches with it while the leader still
// leads: the candidacy keeps waiting (its watch set again on the next
// session) and leads only once the leader resigns. It used to take the
// ended watch for the leader's deletion and lead at once: two leaders.
func TestResumedWaiterOutlivesCurrentSession(t *testing.T) {
	ctx := valuesCtx(t)
	p1, c3, r := resumedWaiter(ctx, t)
	term, err := p1.Term()
	require.NoError(t, err)
	leader := entryNode(term)
	got := make(chan error, 1)
	go func() {
		_, err := r.WaitForLeadership()
		got <- err
	}()
	require.Eventually(t, func() bool { return watching(c3, leader) }, time.Minute, time.Millisecond, "the resumed candidate never watched the leader")
	expireSession(t, c3, testServer) // c3's current session; the candidacy's lives on
	awaitWatchedFirst(ctx, t, c3, leader, got, "the resumed candidate led while the leader leads")
	l, err := p1.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "id1", l)
	select {
	case err := <-got:
		t.Fatalf("the resumed candidate led while the leader leads (err %v)", err)
	default:
	}
	require.NoError(t, p1.Resign(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the resumed candidate did not lead after the leader resigned")
	}
	_, err = r.Term()
	require.NoError(t, err)
}

// watching reports whether c's current session has a data watch (an
// exists watch on an existing znode files one) on zp in the client
// library's table of watches.
func watching(c *Conn, zp string) bool {
	s, err := c.session("")
	if err != nil {
		return false
	}
	mu := libraryField(s.zk, "watchersLock").Addr().Interface().(*sync.Mutex)
	mu.Lock()
	defer mu.Unlock()
	for it := libraryField(s.zk, "watchers").MapRange(); it.Next(); {
		// The key is the library's watchPathType: path, then kind (0: data).
		if k := it.Key(); k.Field(0).String() == zp && k.Field(1).Int() == 0 && it.Value().Len() > 0 {
			return true
		}
	}
	return false
}

// awaitWatchedFirst waits until c's current session watches zp, failing
// with msg when done (a waiting call's result) comes first.
func awaitWatchedFirst(ctx context.Context, t *testing.T, c *Conn, zp string, done <-chan error, msg string) {
	t.Helper()
	for !watching(c, zp) {
		select {
		case err := <-done:
			t.Fatalf("%s (err %v)", msg, err)
		case <-ctx.Done():
			t.Fatalf("%s never watched again", zp)
		case <-time.After(time.Millisecond):
		}
	}
}
