package consultopo

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// queueLen returns how many contenders wait in the queue beside key (the
// full lock or election key), read through c's client.
func queueLen(t testing.TB, c *Conn, key string) int {
	t.Helper()
	keys, _, err := c.kv.Keys(queuePrefixOf(key), "", nil)
	require.NoError(t, err)
	return len(keys)
}

// queuePrefixOf is the queue prefix the tests expect beside a lock key
// (<dir>/Lock: <dir>/locks/queue/) or an election key
// (elections/<name>: elections/<name>/locks/queue/); see docs/layout-consul.md.
func queuePrefixOf(key string) string {
	if dir, ok := strings.CutSuffix(key, "/"+lockName); ok {
		return dir + "/locks/queue/"
	}
	return key + "/locks/queue/"
}

// waitQueued waits until n contenders wait in the queue beside key.
func waitQueued(t testing.TB, c *Conn, key string, n int) {
	t.Helper()
	require.Eventuallyf(t, func() bool { return queueLen(t, c, key) == n }, 30*time.Second, 5*time.Millisecond,
		"%d contenders should wait in the queue beside %s", n, key)
}

// TestFairLockOrder: contenders that queued one after the other, each on a
// Conn of its own, acquire in that order (issue 33).
func TestFairLockOrder(t *testing.T) {
	const n = 6
	root := testRoot(t)
	ctx := context.Background()
	conns := make([]*Conn, n)
	for i := range conns {
		conns[i] = newTestConn(t, root)
	}
	_, err := conns[0].Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	first, err := conns[0].Lock(ctx, "d", "0")
	require.NoError(t, err)
	key := conns[0].dirPrefix("d") + lockName
	got := make(chan int, n)
	locks := make(chan topo.LockDescriptor, n)
	for i := 1; i < n; i++ {
		go func() {
			l, err := conns[i].Lock(ctx, "d", fmt.Sprint(i))
			if err != nil {
				t.Errorf("contender %d: %v", i, err)
				got <- -1
				return
			}
			got <- i
			locks <- l
		}()
		waitQueued(t, conns[0], key, i)
	}
	require.NoError(t, first.Unlock(ctx))
	for want := 1; want < n; want++ {
		require.Equal(t, want, <-got, "contenders must acquire in the order they queued")
		require.NoError(t, (<-locks).Unlock(ctx))
	}
}

// TestFairLockLoop: n contenders on Conns of their own lock and unlock in
// a loop; within 3n acquisitions every one of them acquires at least once
// (before the queue, several of the 60 never did: whoever sent its acquire
// first after a release won).
func TestFairLockLoop(t *testing.T) {
	const n = 60
	root := testRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c0 := newTestConn(t, root)
	_, err := c0.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	var mu sync.Mutex
	counts := make([]int, n)
	total := 0
	var wg sync.WaitGroup
	for i := range n {
		c := newTestConn(t, root)
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := c.Lock(ctx, "d", fmt.Sprint(i))
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("contender %d: %v", i, err)
					}
					return
				}
				mu.Lock()
				counts[i]++
				total++
				if total >= 3*n {
					cancel()
				}
				mu.Unlock()
				if err := l.Unlock(context.Background()); err != nil {
					t.Errorf("contender %d: unlock: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i, k := range counts {
		require.Positivef(t, k, "contender %d never acquired in %d acquisitions: %v", i, total, counts)
	}
}

// TestFairElection: n candidates on Conns of their own; the first leads
// and the others queue one after the other; each leader then resigns and
// campaigns again at once. The first n terms go to the candidates in the
// order they queued (each leads within n terms), and each candidate leads
// again within the next 2n terms (issue 33).
func TestFairElection(t *testing.T) {
	const n = 6
	root := testRoot(t)
	c0 := newTestConn(t, root)
	key := c0.key(electionsDir + "/fair")
	release0 := make(chan struct{}) // lets candidate 0 end its first term
	order := runCandidates(t, root, n, 3*n, func(i int, first bool, stop <-chan struct{}) {
		if i == 0 && first {
			select {
			case <-release0:
			case <-stop:
			}
		}
	}, func(i int) {
		if i > 0 {
			waitQueued(t, c0, key, i)
		}
		if i == n-1 {
			close(release0)
		}
	})
	for i := range n {
		require.Equalf(t, i, order[i], "the first %d terms go to the candidates in queue order: %v", n, order)
	}
	for i := range n {
		require.Containsf(t, order[n:3*n], i, "candidate %d must lead again within 2n terms: %v", i, order)
	}
}

// TestFairElectionLoop: n candidates on Conns of their own each resign as
// soon as they lead and campaign again; within 3n terms every one of them
// leads at least once (before the queue, several of the 60 never did).
func TestFairElectionLoop(t *testing.T) {
	const n = 60
	order := runCandidates(t, testRoot(t), n, 3*n, nil, nil)
	counts := make([]int, n)
	for _, i := range order[:3*n] {
		counts[i]++
	}
	for i, k := range counts {
		require.Positivef(t, k, "candidate %d never led in %d terms: %v", i, 3*n, counts)
	}
}

// runCandidates runs n candidates of the election "fair" under root, each
// on a Conn of its own, each resigning as soon as it leads (after
// inTerm(i, first, stop), when given; stop closes when the run ends) and campaigning again, until terms terms
// were led; it returns the leaders' indexes in term order. started(i), when
// given, is called after candidate i started campaigning and before the
// next one starts (candidate 0 leads first).
func runCandidates(t *testing.T, root string, n, terms int, inTerm func(i int, first bool, stop <-chan struct{}), started func(i int)) []int {
	t.Helper()
	parts := make([]topo.LeaderParticipation, n)
	for i := range parts {
		p, err := newTestConn(t, root).NewLeaderParticipation("fair", fmt.Sprint(i))
		require.NoError(t, err)
		parts[i] = p
	}
	var mu sync.Mutex
	var order []int
	led := func() int { mu.Lock(); defer mu.Unlock(); return len(order) }
	var stopping atomic.Bool
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopAll := func() {
		stopping.Store(true)
		close(stop)
		for _, p := range parts {
			p.Stop()
		}
		wg.Wait()
	}
	defer stopAll()
	for i, p := range parts {
		wg.Go(func() {
			for first := true; ; first = false {
				if _, err := p.WaitForLeadership(); err != nil {
					if !stopping.Load() {
						t.Errorf("candidate %d: %v", i, err)
					}
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				if inTerm != nil {
					inTerm(i, first, stop)
				}
				if err := p.Resign(context.Background()); err != nil && !stopping.Load() {
					t.Errorf("candidate %d: resign: %v", i, err)
					return
				}
			}
		})
		if i == 0 && started != nil {
			require.Eventually(t, func() bool { return led() == 1 }, 30*time.Second, 5*time.Millisecond)
		}
		if started != nil {
			started(i)
		}
	}
	require.Eventually(t, func() bool { return led() >= terms }, 120*time.Second, 5*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	return append([]int(nil), order...)
}
