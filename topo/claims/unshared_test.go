package claims_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// lazyDriver is the fake GoneSignaler and Roomer without Monitor or
// Acquire whose Create grants an entry that heads its queue (Entry.Granted), as
// memorytopo's does: its locks granted at Create are unshared (on no
// session's list until Done is called).
type lazyDriver struct{ signalDriver }

func (d lazyDriver) Create(ctx context.Context, q claims.Queue, contents string, o claims.CreateOptions) (claims.Entry, *claims.Session, error) {
	s := d.s
	for {
		e, sess, err := d.driver.Create(ctx, q, contents, o)
		if err != nil {
			return e, sess, err
		}
		s.mu.Lock()
		i, x := d.find(q, e)
		if sess.IsLost() {
			// Lost since Create took it (expire): a store refuses an
			// entry on an ended session, and expire may have dropped
			// that session's entries already.
			if x != nil {
				s.queues[key(q)] = slices.Delete(s.queues[key(q)], i, i+1)
				close(x.gone)
				s.notify()
			}
			s.mu.Unlock()
			continue
		}
		s.mu.Unlock()
		e.Granted = i == 0
		return e, sess, nil
	}
}

// CreateLock implements claims.Roomer (the engine's unshared locks are
// for a Roomer's only, as memorytopo is).
func (d lazyDriver) CreateLock(ctx context.Context, q claims.Queue, contents string, o claims.CreateOptions) (*claims.LockRoom, *claims.Session, error) {
	e, sess, err := d.Create(ctx, q, contents, o)
	if err != nil {
		return nil, nil, err
	}
	r := &claims.LockRoom{}
	r.SetEntry(e.Token, e.Key, e.Session, e.Contents, e.Granted, e.Ref)
	return r, sess, nil
}

var (
	_ claims.GoneSignaler = lazyDriver{}
	_ claims.Roomer       = lazyDriver{}
)

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestUnsharedLockLossRaces hammers locks granted at Create (unshared)
// and a term on the same session with Unlock, Done, Check and
// FenceGuard's Live, all racing the session's Lost (the driver's expire:
// Lost, then its entries dropped). After the round: exactly one Unlock
// per lock released or lost it (nil or LockLost), the others said
// Interrupted; every Done taken, before or after, is closed, and once
// (a second close panics); Check says Interrupted or LockLost, Live is
// false; the term's leadership context is cancelled; a later Lock on a
// new session is granted. Run with -race and a high -count.
func TestUnsharedLockLossRaces(t *testing.T) {
	ctx := t.Context()
	paths := []string{"a", "b", "c", "d"}
	for round := range 200 {
		s := newStore()
		d := lazyDriver{signalDriver{&driver{s: s}}}
		e := claims.New(d, claims.Options{})
		var lds []topo.LockDescriptor
		for _, p := range paths {
			ld, err := e.Lock(ctx, p, "x")
			require.NoError(t, err)
			lds = append(lds, ld)
		}
		part, err := e.NewLeaderParticipation("el", "id")
		require.NoError(t, err)
		lead, err := part.WaitForLeadership()
		require.NoError(t, err)

		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		firsts := make([]int, len(lds))
		var dones []<-chan struct{}
		for i, ld := range lds {
			// Lock "a" only loses its session (no Unlock, no Done before).
			if i == 0 {
				continue
			}
			for range 2 {
				wg.Go(func() {
					<-start
					err := ld.Unlock(ctx)
					mu.Lock()
					defer mu.Unlock()
					if err == nil || topo.IsErrType(err, topo.LockLost) {
						firsts[i]++
						return
					}
					require.True(t, topo.IsErrType(err, topo.Interrupted), "round %d: %v", round, err)
				})
				wg.Go(func() {
					<-start
					ch := ld.Done()
					mu.Lock()
					dones = append(dones, ch)
					mu.Unlock()
				})
			}
			wg.Go(func() {
				<-start
				_ = ld.Check(ctx)
			})
			wg.Go(func() {
				<-start
				g, ok := claims.FenceGuard(ld)
				require.True(t, ok)
				_ = g.Live()
			})
		}
		wg.Go(func() {
			<-start
			d.expire()
		})
		close(start)
		wg.Wait()

		for i, ld := range lds {
			if i > 0 {
				require.Equal(t, 1, firsts[i], "round %d, lock %d: Unlocks that released", round, i)
			}
			ch := ld.Done()
			require.True(t, isDone(ch), "round %d, lock %d: Done open after the loss", round, i)
			dones = append(dones, ch)
			err := ld.Check(ctx)
			require.True(t, topo.IsErrType(err, topo.LockLost) || topo.IsErrType(err, topo.Interrupted), "round %d, lock %d: %v", round, i, err)
			g, _ := claims.FenceGuard(ld)
			require.False(t, g.Live(), "round %d, lock %d", round, i)
		}
		for _, ch := range dones {
			require.True(t, isDone(ch), "round %d: a Done taken before is open", round)
		}
		// The lock lost without any call before: LockLost, then Interrupted.
		require.True(t, topo.IsErrType(lds[0].Unlock(ctx), topo.LockLost))
		require.True(t, topo.IsErrType(lds[0].Unlock(ctx), topo.Interrupted))
		require.Error(t, context.Cause(lead))
		require.True(t, topo.IsErrType(context.Cause(lead), topo.LockLost), "%v", context.Cause(lead))

		// The store handed every lock on: a new session takes each.
		for _, p := range paths {
			ld, err := e.TryLock(ctx, p, "y")
			require.NoError(t, err, "round %d", round)
			require.NoError(t, ld.Unlock(ctx))
		}
		e.Close()
	}
}

// TestUnsharedLockHolderStaysAlone: many goroutines lock the same
// directories through engines of one store, each holder checking that no
// other holder is inside, while sessions are lost at random points
// (expire) and holders take Done before, during or never. A holder is
// inside from Lock's return until its Unlock or until its Done closes;
// a holder whose Done is closed or whose Check says LockLost has left.
// The store's own order (the fake's queue) decides the holder; the test
// checks the engine's answers against it: Check nil only while the
// entry heads its queue on its live session.
func TestUnsharedLockHolderStaysAlone(t *testing.T) {
	ctx := t.Context()
	s := newStore()
	const workers, rounds = 6, 150
	var wg sync.WaitGroup
	for w := range workers {
		d := lazyDriver{signalDriver{&driver{s: s}}}
		e := claims.New(d, claims.Options{})
		wg.Go(func() {
			defer e.Close()
			for r := range rounds {
				ld, err := e.Lock(ctx, "p", "x")
				if err != nil {
					require.True(t, topo.IsErrType(err, topo.LockLost), "%v", err)
					continue
				}
				var done <-chan struct{}
				if (w+r)%3 == 0 {
					done = ld.Done()
				}
				if (w+r)%4 == 1 {
					go d.expire()
				}
				if err := ld.Check(ctx); err == nil {
					// Held in the store at that moment: the entry heads
					// the queue on a live session.
					s.mu.Lock()
					q := s.queues[key(claims.Queue{Path: "p"})]
					ok := len(q) > 0 && q[0].e.Token == ld.Token() || !slices.ContainsFunc(q, func(x *fentry) bool { return x.e.Token == ld.Token() })
					s.mu.Unlock()
					require.True(t, ok, "Check said held while another entry heads the queue")
				}
				if done == nil {
					done = ld.Done()
				}
				err = ld.Unlock(ctx)
				require.True(t, err == nil || topo.IsErrType(err, topo.LockLost), "%v", err)
				require.True(t, isDone(done), "Done open after Unlock returned")
				require.True(t, topo.IsErrType(ld.Unlock(ctx), topo.Interrupted))
			}
		})
	}
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Empty(t, s.queues[key(claims.Queue{Path: "p"})], "entries left behind")
}
