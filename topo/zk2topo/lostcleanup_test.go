package zk2topo

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// TestLockEntriesDeletedBehindTheirBackUnderContention: contenders on
// two Conns take and release one named lock over and over while another
// client deletes queued and holding entries behind their backs, so the
// sessions' clean-ups after deleted entries (see forgetGone) race with
// new contenders creating the lock's directory and entries. Every Lock
// either succeeds or fails with LockLost (a contender whose entry went
// retries: its directory may have been removed between its creation and
// the entry's create), two holds that ended by a successful Unlock (so
// their entries were there from grant to release) never overlap, and
// once everyone is gone the directory is gone too.
func TestLockEntriesDeletedBehindTheirBackUnderContention(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := freshRoot(t)
	conns := []*Conn{openConn(t, []string{testServer}, root), openConn(t, []string{testServer}, root)}
	raw := rawConn(t)
	const dir = "n/x"
	locksZp := driver{conns[0]}.parent(claims.Queue{Path: dir})

	// A hold spans two events of one total order (seq): its grant
	// seen, and its Unlock called.
	type hold struct{ from, to int64 }
	var (
		seq     atomic.Int64
		mu      sync.Mutex
		genuine []hold
		lost    atomic.Int64
	)
	stop := make(chan struct{})
	deleterDone := make(chan struct{})
	go func() {
		defer close(deleterDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			kids, _, err := raw.Children(locksZp)
			if err != nil || len(kids) == 0 {
				continue
			}
			slices.Sort(kids)
			// Mostly a waiter, every third time the holder.
			victim := kids[len(kids)-1]
			if i%3 == 0 {
				victim = kids[0]
			}
			_ = raw.Delete(locksZp+"/"+victim, -1)
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for ci, c := range conns {
		for g := range 3 {
			wg.Go(func() {
				for range 40 {
					l, err := c.LockName(ctx, dir, fmt.Sprintf("c%d-%d", ci, g))
					if topo.IsErrType(err, topo.LockLost) {
						lost.Add(1)
						continue
					}
					if err != nil {
						errs <- fmt.Errorf("LockName: %w", err)
						return
					}
					from := seq.Add(1)
					// A round trip inside the hold (the lock may be
					// lost meanwhile: then its Unlock says so).
					if err := l.Check(ctx); err != nil && !topo.IsErrType(err, topo.LockLost) {
						errs <- fmt.Errorf("Check: %w", err)
					}
					to := seq.Add(1)
					switch err := l.Unlock(ctx); {
					case err == nil:
						mu.Lock()
						genuine = append(genuine, hold{from, to})
						mu.Unlock()
					case topo.IsErrType(err, topo.LockLost):
						lost.Add(1)
					default:
						errs <- fmt.Errorf("Unlock: %w", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	<-deleterDone
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	slices.SortFunc(genuine, func(a, b hold) int { return int(a.from - b.from) })
	for i := 1; i < len(genuine); i++ {
		require.Greater(t, genuine[i].from, genuine[i-1].to, "two holds overlap: %v and %v", genuine[i-1], genuine[i])
	}
	t.Logf("%d holds released, %d lost", len(genuine), lost.Load())
	requireGone(t, raw, conns[0].zkPath("n"), "the lock's directory was left")
}
