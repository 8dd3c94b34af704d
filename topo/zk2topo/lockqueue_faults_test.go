package zk2topo

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// lockWaiter starts conn.LockName(wctx, dir, id) in a goroutine; its
// channel yields the lock or the error.
func lockWaiter(conn *Conn, wctx context.Context, dir, id string) <-chan lockResult {
	out := make(chan lockResult, 1)
	go func() {
		l, err := conn.LockName(wctx, dir, id)
		out <- lockResult{l, err}
	}()
	return out
}

type lockResult struct {
	l   topo.LockDescriptor
	err error
}

// queuedEntries waits until the locks znode zp has n children and
// returns them, oldest first.
func queuedEntries(t *testing.T, raw *zk.Conn, zp string, n int) []string {
	t.Helper()
	var kids []string
	require.Eventually(t, func() bool {
		var err error
		kids, _, err = raw.Children(zp)
		return err == nil && len(kids) == n
	}, time.Minute, time.Millisecond)
	slices.Sort(kids)
	return kids
}

// TestLockQueuedEntryDeletedBehindItsBackRemovesDirectory: a holder and
// a waiter of a named lock share one Conn; the waiter's entry is deleted
// by another client and the holder unlocks at once (before or after its
// Conn learnt of the deletion). Once the waiter's Lock failed, the named
// lock's directory is gone: nothing is left behind.
func TestLockQueuedEntryDeletedBehindItsBackRemovesDirectory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	for round := range 10 {
		dir := fmt.Sprintf("n%d/x", round)
		locksZp := driver{c}.parent(claims.Queue{Path: dir})
		h, err := c.LockName(ctx, dir, "h")
		require.NoError(t, err)
		w := lockWaiter(c, ctx, dir, "w")
		kids := queuedEntries(t, raw, locksZp, 2)
		require.NoError(t, raw.Delete(locksZp+"/"+kids[1], -1))
		require.NoError(t, h.Unlock(ctx))
		r := <-w
		if r.err == nil { // granted before its deletion was seen: lost now
			select {
			case <-r.l.Done():
			case <-ctx.Done():
				t.Fatal("a lock whose entry was deleted never ended")
			}
			_ = r.l.Unlock(ctx)
		}
		require.Eventually(t, func() bool {
			exists, _, err := raw.Exists(c.zkPath(fmt.Sprintf("n%d", round)))
			return err == nil && !exists
		}, 10*time.Second, 10*time.Millisecond, "round %d left the lock's directory: %s", round, dump(raw, c.zkPath(fmt.Sprintf("n%d", round))))
	}
}

func dump(raw *zk.Conn, zp string) string {
	kids, st, err := raw.Children(zp)
	if err != nil {
		return zp + ": " + err.Error()
	}
	out := fmt.Sprintf("%s (%d children, cversion %d)", zp, st.NumChildren, st.Cversion)
	for _, k := range kids {
		out += "; " + dump(raw, zp+"/"+k)
	}
	return out
}
