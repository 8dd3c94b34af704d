package zk2topo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
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

// TestLockWithdrawnLastOnSessionRemovesDirectory: contenders for a named
// lock share one Conn; the one queued last on the session is withdrawn
// (its context cancelled), not unlocked, and the others' Unlocks read
// nothing while it is queued. The named lock's directory is still
// removed once every contender is gone, whichever order they go in.
func TestLockWithdrawnLastOnSessionRemovesDirectory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	for round, cancelFirst := range []bool{true, false, true, false} {
		dir := fmt.Sprintf("n%d/x", round)
		locksZp := driver{c}.parent(claims.Queue{Path: dir})
		h, err := c.LockName(ctx, dir, "h")
		require.NoError(t, err)
		w1 := lockWaiter(c, ctx, dir, "w1")
		queuedEntries(t, raw, locksZp, 2)
		w2ctx, w2cancel := context.WithCancel(ctx)
		defer w2cancel()
		w2 := lockWaiter(c, w2ctx, dir, "w2")
		queuedEntries(t, raw, locksZp, 3)
		if cancelFirst {
			w2cancel()
			require.Error(t, (<-w2).err)
		}
		require.NoError(t, h.Unlock(ctx))
		r := <-w1
		require.NoError(t, r.err)
		if !cancelFirst {
			require.NoError(t, r.l.Unlock(ctx))
			w2cancel()
			if r2 := <-w2; r2.err == nil { // granted before the cancel
				require.NoError(t, r2.l.Unlock(ctx))
			}
		} else {
			require.NoError(t, r.l.Unlock(ctx))
		}
		// A cancelled Lock returns without waiting for its entry's delete
		// and clean-up, which may run after the others' Unlocks.
		require.Eventually(t, func() bool {
			exists, _, err := raw.Exists(c.zkPath(fmt.Sprintf("n%d", round)))
			return err == nil && !exists
		}, time.Minute, 5*time.Millisecond, "round %d (cancel first %v) left the lock's directory", round, cancelFirst)
	}
}

// TestLockQueuedEntryDeletedBehindItsBackRemovesDirectory: a holder and
// a waiter of a named lock share one Conn; the waiter's entry is deleted
// by another client and the holder unlocks at once (before or after its
// Conn learnt of the deletion). Once the waiter's Lock failed (or its
// lock, granted before the deletion was seen, ended), the named lock's
// directory is gone within a few seconds: nothing is left behind. The
// clean-up may come after Lock returns: the session does it when it sees
// the entry deleted (see forgetGone), whether or not the engine then
// calls Delete for the waiter's claim (it does not when it finds the
// claim lost as its wait ends).
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
		requireGone(t, raw, c.zkPath(fmt.Sprintf("n%d", round)), fmt.Sprintf("round %d left the lock's directory", round))
	}
}

// TestLockEntryDeletedBehindItsBackCleansUpWithoutDelete: two entries of
// one session queue for a named lock, H ahead of W. W's entry is deleted
// by another client while the session's reads are held back, and H is
// released meanwhile: H's release sees W still known and reads nothing
// (W's release is to clean up: see releaseLock). W's claim never calls
// Delete, as when the engine finds the claim lost as its wait ends
// (claims' await, "lost as it was granted") or a lost holder never
// unlocks. Once the session has seen W deleted, the lock's directory is
// gone all the same: the session cleans up for an entry deleted behind
// its back when it learns of the deletion, not when the claim comes
// back. (Before, only the claim's Delete did, and
// TestLockQueuedEntryDeletedBehindItsBackRemovesDirectory failed about
// once in 80 runs.)
func TestLockEntryDeletedBehindItsBackCleansUpWithoutDelete(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := freshRoot(t)
	g := &readGate{sent: make(chan struct{})}
	c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: 20 * time.Second, Dialer: g.dial}, root)
	require.NoError(t, err)
	defer c.Close()
	raw := rawConn(t)
	d := driver{c}
	q := claims.Queue{Path: "n/x"}
	h, hs, err := d.Create(ctx, q, "h", claims.CreateOptions{})
	require.NoError(t, err)
	w, ws, err := d.Create(ctx, q, "w", claims.CreateOptions{})
	require.NoError(t, err)
	require.Same(t, hs, ws, "the test needs both entries on one session")
	s := hs.Ref().(*zkSession)

	g.hold()
	require.NoError(t, raw.Delete(w.Key, -1))
	released := make(chan error, 1)
	go func() { released <- d.Delete(ctx, q, hs, h) }()
	// H's delete was sent and its release looked for other entries of
	// the session (entry.deleteSent): W, its deletion's event held back,
	// was one, so nothing was read behind the delete.
	require.Eventually(t, func() bool {
		e := s.entry(h.Key)
		return e != nil && e.deleteSent
	}, hangGuard, time.Millisecond, "H's delete never sent")
	require.NotNil(t, s.entry(w.Key), "the session saw W's deletion with its reads held")
	g.release()
	require.NoError(t, <-released)
	require.Eventually(t, func() bool { return s.entry(w.Key) == nil }, hangGuard, time.Millisecond, "the session never saw W deleted")
	requireGone(t, raw, c.zkPath("n"), "the lock's directory was left")
}

// TestLookaheadWaiterSessionExpires: W waits behind P behind H; H's
// release makes W's lookahead read the queue (only P ahead), and then W's
// session expires. When P unlocks, W is not granted (its entry went with
// its session), and a contender that queued after W's session ended
// takes the lock alone.
func TestLookaheadWaiterSessionExpires(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	oc := &opCounter{}
	cw, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, Dialer: oc.dial}, root)
	require.NoError(t, err)
	t.Cleanup(cw.Close)
	raw := rawConn(t)
	_, err = c.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	locksZp := driver{c}.parent(claims.Queue{Path: "d"})
	h, err := c.Lock(ctx, "d", "h")
	require.NoError(t, err)
	p := make(chan lockResult, 1)
	go func() {
		l, err := c.Lock(ctx, "d", "p")
		p <- lockResult{l, err}
	}()
	queuedEntries(t, raw, locksZp, 2)
	w := make(chan lockResult, 1)
	go func() {
		l, err := cw.Lock(ctx, "d", "w")
		w <- lockResult{l, err}
	}()
	kids := queuedEntries(t, raw, locksZp, 3)
	require.Len(t, kids, 3)
	// W's queue read may reach the server after H's deletion (another
	// session's request): then W sees only P ahead and sets no lookahead.
	// Release H only once the server shows W watching both H and P.
	ws, err := cw.session("")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return watchedBy(t, ws.zk.SessionID(), locksZp+"/"+kids[0], locksZp+"/"+kids[1])
	}, time.Minute, time.Millisecond, "W never watched both entries ahead of it")
	oc.reset()
	require.NoError(t, h.Unlock(ctx))
	pr := <-p
	require.NoError(t, pr.err)
	// W's lookahead read follows H's deletion; wait until it was sent.
	require.Eventually(t, func() bool {
		return oc.count(opGetChildren)+oc.count(opGetChildren2) > 0
	}, time.Minute, time.Millisecond, "W's lookahead never read the queue")
	expireSession(t, cw, testServer)
	z := make(chan lockResult, 1)
	go func() {
		l, err := c.Lock(ctx, "d", "z")
		z <- lockResult{l, err}
	}()
	queuedEntries(t, raw, locksZp, 2) // P and Z: W's entry went
	require.NoError(t, pr.l.Unlock(ctx))
	zr := <-z
	require.NoError(t, zr.err)
	select {
	case wr := <-w:
		require.Error(t, wr.err, "W was granted the lock with its session gone, while Z holds it")
	case <-ctx.Done():
		t.Fatal("W's Lock never returned")
	}
	require.NoError(t, zr.l.Unlock(ctx))
}

// TestLockHandoverWithLargeFrames: contenders on three Conns take and
// release one lock, some withdrawing while queued, while other readers
// Get a file of 512 KiB and list a directory of thousands of names
// on the same Conns (answers many times the read buffer, split across its
// boundary). The lock never has two holders, every read returns what was
// written, and the lock's directory keeps only its file.
func TestLockHandoverWithLargeFrames(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root := freshRoot(t)
	conns := []*Conn{
		openConn(t, []string{testServer}, root),
		openConn(t, []string{testServer}, root),
		openConn(t, []string{testServer}, root),
	}
	c := conns[0]
	big := []byte(strings.Repeat("0123456789abcdef", topo.MaxValueSize/16))
	_, err := c.Create(ctx, "big/f", big)
	require.NoError(t, err)
	const names = 3000
	var wg sync.WaitGroup
	for i := range names {
		wg.Go(func() {
			_, err := c.Create(ctx, fmt.Sprintf("many/%05d-%s", i, strings.Repeat("n", 40)), nil)
			require.NoError(t, err)
		})
		if i%200 == 199 {
			wg.Wait()
		}
	}
	wg.Wait()
	_, err = c.Create(ctx, "d/f", nil)
	require.NoError(t, err)

	var holders, grants atomic.Int32
	var stop atomic.Bool
	for ci, conn := range conns {
		for k := range 4 {
			wg.Go(func() {
				for i := 0; !stop.Load(); i++ {
					lctx, lcancel := context.WithCancel(ctx)
					if (i+k)%5 == 4 {
						go func() {
							time.Sleep(time.Duration(i%3) * time.Millisecond)
							lcancel()
						}()
					}
					l, err := conn.Lock(lctx, "d", fmt.Sprintf("c%d-%d", ci, k))
					if err != nil {
						lcancel()
						if lctx.Err() == nil {
							t.Errorf("Lock: %v", err)
							return
						}
						continue
					}
					if n := holders.Add(1); n != 1 {
						t.Errorf("%d holders of the lock", n)
					}
					grants.Add(1)
					if _, _, err := conn.Get(ctx, "d/f"); err != nil {
						t.Errorf("Get while holding: %v", err)
					}
					holders.Add(-1)
					if err := l.Unlock(ctx); err != nil {
						t.Errorf("Unlock: %v", err)
					}
					lcancel()
					if grants.Load() >= 300 {
						stop.Store(true)
					}
				}
			})
		}
		wg.Go(func() {
			for !stop.Load() {
				got, _, err := conn.Get(ctx, "big/f")
				if err != nil || len(got) != len(big) || string(got) != string(big) {
					t.Errorf("Get of the large file: %d bytes, %v", len(got), err)
					return
				}
				entries, err := conn.ListDir(ctx, "many", false)
				if err != nil || len(entries) != names {
					t.Errorf("ListDir: %d names, %v", len(entries), err)
					return
				}
			}
		})
	}
	wg.Wait()
	entries, err := c.ListDir(ctx, "d", false)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "f"}}, entries)
	raw := rawConn(t)
	kids, _, err := raw.Children(driver{c}.parent(claims.Queue{Path: "d"}))
	if err == nil {
		require.Empty(t, kids, "lock entries left behind")
	}
}

// requireGone waits until the znode zp is gone, and otherwise fails
// with msg and what is left below zp when the wait ends.
func requireGone(t *testing.T, raw *zk.Conn, zp, msg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		exists, _, err := raw.Exists(zp)
		if err == nil && !exists {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", msg, dump(raw, zp))
		}
		time.Sleep(10 * time.Millisecond)
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

// watchedBy reports whether the server's watch table ("wchp": paths and
// the sessions watching each) shows session id watching every one of
// paths.
func watchedBy(t *testing.T, id int64, paths ...string) bool {
	out, err := zktest.FourLetter(testServer, "wchp")
	require.NoError(t, err)
	watchers := map[string]bool{}
	cur := ""
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "/"):
			cur = strings.TrimSpace(line)
		case strings.TrimSpace(line) == fmt.Sprintf("0x%x", id):
			watchers[cur] = true
		}
	}
	for _, p := range paths {
		if !watchers[p] {
			return false
		}
	}
	return true
}
