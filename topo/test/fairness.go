package test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
)

// Fairness checks: waiters are served in the order they queued, and a
// contender that lets go and asks again queues behind those already
// waiting, so that nobody starves in a loop of contenders with no hold
// time. The backend's tests call them with a function that waits until n
// entries (holder and waiters) are queued on the lock of directory "d"
// (kind "lock") or on election "e" (kind "election"), as its store shows
// them.

// Queued waits until n entries are queued on the lock of directory "d"
// (kind "lock") or on election "e" (kind "election").
type Queued func(t *testing.T, kind string, n int)

// fairTimeout bounds each fairness check.
const fairTimeout = 2 * time.Minute

// RequireLockFIFO checks that n Lock calls, queued one after the other
// (through conns, in turn) behind a holder, acquire in the order they
// queued once the holder lets go, each as its predecessor unlocks.
func RequireLockFIFO(t *testing.T, conns []topo.Conn, n int, queued Queued) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fairTimeout)
	defer cancel()
	_, err := conns[0].Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	holder, err := conns[0].Lock(ctx, "d", "holder")
	require.NoError(t, err)
	order := make(chan int, n)
	errs := make(chan error, n)
	for i := range n {
		c := conns[(i+1)%len(conns)]
		go func() {
			ld, err := c.Lock(ctx, "d", fmt.Sprintf("c%d", i))
			if err != nil {
				errs <- err
				return
			}
			order <- i
			errs <- ld.Unlock(ctx)
		}()
		queued(t, "lock", i+2)
	}
	require.NoError(t, holder.Unlock(ctx))
	for i := range n {
		require.Equal(t, i, <-order, "waiters acquired out of the order they queued")
	}
	for range n {
		require.NoError(t, <-errs)
	}
}

// RequireElectionRotation checks that n candidates, joined one after
// the other (through conns, in turn), lead in the order they joined, and
// that a leader who stops and joins again queues behind the others: over
// 3n terms every candidate leads, each within n terms of its last. The
// leader's Stop must have removed its entry when it returns (as every
// backend's does while the store answers).
func RequireElectionRotation(t *testing.T, conns []topo.Conn, n int, queued Queued) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fairTimeout)
	defer cancel()
	type lead struct {
		i int
		p topo.LeaderParticipation
	}
	leads := make(chan lead, n)
	errs := make(chan error, 3*n)
	join := func(i int) {
		p, err := conns[i%len(conns)].NewLeaderParticipation("e", fmt.Sprintf("c%d", i))
		if err != nil {
			errs <- err
			return
		}
		go func() {
			if _, err := p.WaitForLeadership(); err != nil {
				errs <- err
				return
			}
			leads <- lead{i, p}
		}()
	}
	for i := range n {
		join(i)
		queued(t, "election", i+1)
	}
	last := make([]int, n)
	for i := range last {
		last[i] = -1
	}
	for term := range 3 * n {
		var l lead
		select {
		case l = <-leads:
		case err := <-errs:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatalf("term %d: nobody leads", term)
		}
		if term < n {
			require.Equal(t, term, l.i, "candidates led out of the order they joined")
		}
		if last[l.i] >= 0 {
			require.LessOrEqual(t, term-last[l.i], n, "candidate %d waited more than %d terms", l.i, n)
		}
		last[l.i] = term
		l.p.Stop()
		if term < 3*n-1 {
			join(l.i)
			queued(t, "election", n) // behind the others
		}
	}
	for i, at := range last {
		require.GreaterOrEqual(t, at, 0, "candidate %d never led in %d terms", i, 3*n)
	}
}

// RequireNoStarvation checks that in a loop of n contenders (through
// conns, in turn) each taking the lock of "d" (kind "lock") or leading
// election "e" (kind "election") and letting go at once, as often as
// they can, every contender acquires at least once in 3n acquisitions.
// The loop starts once all n have queued behind a first holder (so that
// the first to run cannot take every turn before the others exist).
func RequireNoStarvation(t *testing.T, conns []topo.Conn, kind string, n int, queued Queued) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fairTimeout)
	defer cancel()
	var gate func()
	if kind == "lock" {
		_, err := conns[0].Create(ctx, "d/f", []byte("x"))
		require.NoError(t, err)
		ld, err := conns[0].Lock(ctx, "d", "gate")
		require.NoError(t, err)
		gate = func() { require.NoError(t, ld.Unlock(ctx)) }
	} else {
		p, err := conns[0].NewLeaderParticipation("e", "gate")
		require.NoError(t, err)
		_, err = p.WaitForLeadership()
		require.NoError(t, err)
		gate = p.Stop
	}
	var (
		mu     sync.Mutex
		total  int
		counts = make([]int, n)
		wg     sync.WaitGroup
	)
	errs := make(chan error, n)
	// acquired counts one acquisition; false once 3n are done.
	acquired := func(i int) bool {
		mu.Lock()
		defer mu.Unlock()
		if total >= 3*n {
			return false
		}
		total++
		counts[i]++
		if total == 3*n {
			cancel()
		}
		return true
	}
	for i := range n {
		c := conns[i%len(conns)]
		id := fmt.Sprintf("c%d", i)
		wg.Go(func() {
			for ctx.Err() == nil {
				release, err := claimOnce(ctx, c, kind, id)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				ok := acquired(i)
				release()
				if !ok {
					return
				}
			}
		})
	}
	queued(t, kind, n+1)
	gate()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 3*n, total, "the loop ended before %d acquisitions", 3*n)
	for i, k := range counts {
		require.Positive(t, k, "contender %d never acquired in %d acquisitions (%v)", i, 3*n, counts)
	}
}

// RequireSemaphoreFIFO checks that n Acquire calls on a semaphore of
// directory "d" with limit slots, queued one after the other (through
// conns, in turn) while limit holders hold every slot, are admitted in
// the order they queued, each release admitting the next waiter only, and
// never more than limit at once. A semaphore's waiters queue on the lock
// of its directory (see package semaphore), so queued counts them with
// kind "lock": the contender next in line holds that lock, the others
// wait on it.
func RequireSemaphoreFIFO(t *testing.T, conns []topo.Conn, limit, n int, queued Queued) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), fairTimeout)
	defer cancel()
	sem := func(i int) *semaphore.Semaphore {
		s, err := semaphore.New(conns[i%len(conns)], "d", limit, semaphore.Options{})
		require.NoError(t, err)
		return s
	}
	holders := make([]topo.LockDescriptor, limit)
	for i := range holders {
		ld, err := sem(i).Acquire(ctx)
		require.NoError(t, err)
		holders[i] = ld
	}
	type admitted struct {
		i  int
		ld topo.LockDescriptor
	}
	got := make(chan admitted, n)
	errs := make(chan error, n)
	for i := range n {
		s := sem(i + 1)
		go func() {
			ld, err := s.Acquire(ctx)
			if err != nil {
				errs <- err
				return
			}
			got <- admitted{i, ld}
		}()
		queued(t, "lock", i+1)
	}
	select {
	case a := <-got:
		t.Fatalf("waiter %d was admitted while every slot was held", a.i)
	case err := <-errs:
		require.NoError(t, err)
	default:
	}
	// Each release admits exactly the next waiter: until the waiter
	// admitted last releases, nobody else is admitted.
	require.NoError(t, holders[0].Unlock(ctx))
	for want := range n {
		var a admitted
		select {
		case a = <-got:
		case err := <-errs:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatalf("waiter %d was not admitted", want)
		}
		require.Equal(t, want, a.i, "waiters were admitted out of the order they queued")
		select {
		case b := <-got:
			t.Fatalf("waiter %d was admitted beside waiter %d with one slot free", b.i, a.i)
		default:
		}
		require.NoError(t, a.ld.Unlock(ctx))
	}
	for _, ld := range holders[1:] {
		require.NoError(t, ld.Unlock(ctx))
	}
}
