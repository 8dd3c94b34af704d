package consultopo

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
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
// Conn of its own, acquire in that order, even when the first waiter's
// link to the agent is the slowest (its Conn goes through a proxy that
// delays it once everyone queued): only the head of the queue tries the
// key, so no later contender can overtake it. An engine that let a
// later entry try the key too would lose the order here every time, not
// by chance.
func TestFairLockOrder(t *testing.T) {
	const n = 6
	root := testRoot(t)
	ctx := context.Background()
	conns := make([]*Conn, n)
	for i := range conns {
		conns[i] = newTestConn(t, root)
	}
	px, err := faultproxy.New(agent.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	slowOpts := testOptions()
	slowOpts.Address = px.Addr()
	conns[1], err = NewConn(slowOpts, root)
	require.NoError(t, err)
	t.Cleanup(conns[1].Close)
	_, err = conns[0].Create(ctx, "d/f", []byte("x"))
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
	px.SetDelay(300 * time.Millisecond)
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

// handoverRequests returns the Consul HTTP requests (session requests
// left out: renewals run on their own clock) that all Conns send per
// handover while n waiters, on Conns of their own, queue for one lock
// (kind "lock") or election ("election"): each acquirer releases at once
// (Unlock, Resign) and contends again (queueing at the tail), and the
// count runs from the first release to the handovers-th acquisition.
// lists are those of them that read the whole queue; kinds counts them by
// method, path shape and query (logged by the callers).
func handoverRequests(t *testing.T, kind string, n, handovers int) (requests, lists float64, kinds map[string]int64) {
	root := testRoot(t)
	var rt, lt atomic.Int64
	var mu sync.Mutex
	kinds = map[string]int64{}
	counting := atomic.Bool{}
	opts := testOptions()
	// Blocking queries then wait for their key for the whole test: a
	// re-sent query after its wait time is not a handover's.
	opts.WatchPollDuration = 10 * time.Minute
	mk := func() *Conn {
		c, err := NewConn(opts, root)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		c.transport.Proxy = func(r *http.Request) (*url.URL, error) {
			if strings.HasPrefix(r.URL.Path, "/v1/session/") {
				return nil, nil
			}
			rt.Add(1)
			if strings.HasSuffix(r.URL.Path, "/locks/queue/") && r.URL.Query().Has("recurse") {
				lt.Add(1)
			}
			if counting.Load() {
				mu.Lock()
				kinds[requestKind(r, root)]++
				mu.Unlock()
			}
			return nil, nil
		}
		return c
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder := mk()
	var key string
	var release func() error
	if kind == "lock" {
		_, err := holder.Create(ctx, "d/f", []byte("x"))
		require.NoError(t, err)
		first, err := holder.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		key = holder.dirPrefix("d") + lockName
		release = func() error { return first.Unlock(ctx) }
	} else {
		p, err := holder.NewLeaderParticipation("e", "holder")
		require.NoError(t, err)
		_, err = p.WaitForLeadership()
		require.NoError(t, err)
		key = holder.key(electionsDir + "/e")
		release = func() error { p.Stop(); return nil }
	}
	var acquired atomic.Int64
	enough := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range n {
		c := mk()
		contend := func() (func() error, error) {
			l, err := c.Lock(ctx, "d", fmt.Sprint(i))
			if err != nil {
				return nil, err
			}
			return func() error { return l.Unlock(context.Background()) }, nil
		}
		if kind != "lock" {
			p, err := c.NewLeaderParticipation("e", fmt.Sprint(i))
			require.NoError(t, err)
			context.AfterFunc(ctx, p.Stop)
			contend = func() (func() error, error) {
				if _, err := p.WaitForLeadership(); err != nil {
					return nil, err
				}
				return func() error { return p.Resign(context.Background()) }, nil
			}
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				release, err := contend()
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("waiter %d: %v", i, err)
					}
					return
				}
				if acquired.Add(1) == int64(handovers) {
					close(enough)
				}
				if err := release(); err != nil {
					t.Errorf("waiter %d: release: %v", i, err)
					return
				}
			}
		})
	}
	waitQueued(t, holder, key, n)
	start, lstart := rt.Load(), lt.Load()
	counting.Store(true)
	require.NoError(t, release())
	select {
	case <-enough:
	case <-time.After(2 * time.Minute):
		t.Fatalf("only %d of %d handovers within 2 minutes", acquired.Load(), handovers)
	}
	counting.Store(false)
	return float64(rt.Load()-start) / float64(handovers), float64(lt.Load()-lstart) / float64(handovers), kinds
}

// requestKind names a request by its method, its path under root with
// the session ids and random suffixes of queue entries left out, and
// whether it blocks (index) or reads a tree (recurse, keys).
func requestKind(r *http.Request, root string) string {
	p := strings.TrimPrefix(r.URL.Path, "/v1/kv/"+root)
	if i := strings.Index(p, "/queue/"); i >= 0 && len(p) > i+len("/queue/") {
		p = p[:i] + "/queue/<entry>"
	}
	if i := strings.Index(p, "/locks/"); i >= 0 && !strings.Contains(p, "/queue") && !strings.HasSuffix(p, "/tail") {
		p = p[:i] + "/locks/<value>"
	}
	q := r.URL.Query()
	for _, f := range []string{"index", "recurse", "keys"} {
		if q.Has(f) {
			p += " " + f
		}
	}
	return r.Method + " " + p
}

// TestHandoverRequestsConstant: the requests a handover costs do not grow
// with the number of waiters: only the releaser, the new holder and the
// next waiter send any (before the queue, every waiter's blocking query on
// the lock key returned at each release, and each waiter tried the
// acquire), a bounded number whatever n is. And nobody reads the whole
// queue in a handover once others queue: an acquirer queueing again learns
// its predecessor from the tail key, and the next waiter learns that it
// heads the queue from one read of the lock key. With 2 waiters an
// acquirer often finds itself alone in the queue (it then reads it, and
// takes the key without queueing next time): the mix of requests differs
// from run to run, so each count is held to the protocol's bound rather
// than to the count with 2.
func TestHandoverRequestsConstant(t *testing.T) {
	// maxPerHandover: the release (1); the new holder's acquire and the
	// blocking query it returns from (2); the next waiter's blocking query
	// and its read of the key (2); the acquirer's enqueue and its blocking
	// query on its predecessor (2); slack for an acquire sent on the
	// assumption that the key is free and refused (2), and a blocking
	// query answered early (1).
	handoverConstant(t, "lock", 10)
}

// TestElectionHandoverRequestsConstant: the same for an election whose
// leader resigns at once and campaigns again: a term handover costs a
// bounded number of requests whatever the number of candidates, and
// nobody reads the whole queue.
func TestElectionHandoverRequestsConstant(t *testing.T) {
	// maxPerTerm: as a lock's handover, plus the new leader's watch of
	// its key (1).
	handoverConstant(t, "election", 11)
}

// handoverConstant runs handoverRequests of kind with 2, 20 and 200
// waiters and holds each to max requests per handover, and 200's to at
// most 20's and a half plus one.
func handoverConstant(t *testing.T, kind string, most float64) {
	const handovers = 20
	per := map[int]float64{}
	for _, n := range []int{2, 20, 200} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var lists float64
			var kinds map[string]int64
			per[n], lists, kinds = handoverRequests(t, kind, n, handovers)
			t.Logf("%s, %d waiters: %.1f requests per handover, %.2f of them reading the whole queue", kind, n, per[n], lists)
			for k, v := range kinds {
				t.Logf("  %6.2f %s", float64(v)/handovers, k)
			}
			require.LessOrEqualf(t, per[n], most, "with %d waiters a handover cost %.1f requests", n, per[n])
			maxLists := 0.1
			if n == 2 {
				maxLists = 1.5
			}
			require.LessOrEqualf(t, lists, maxLists, "with %d waiters a handover read the whole queue %.2f times", n, lists)
		})
	}
	require.LessOrEqualf(t, per[200], per[20]+1.5, "requests per handover with 200 waiters (%.1f) must not grow beyond those with 20 (%.1f)", per[200], per[20])
}

// TestQueueWaiterMovesOn: a waiter whose predecessor in the queue gives up
// (its ctx ends) or loses its session moves up, and acquires when the
// holder releases; the queue leaves no entry behind.
func TestQueueWaiterMovesOn(t *testing.T) {
	root := testRoot(t)
	ctx := context.Background()
	holder, quitter, lost, last := newTestConn(t, root), newTestConn(t, root), newShortTTLConn(t, root), newTestConn(t, root)
	_, err := holder.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := holder.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	key := holder.dirPrefix("d") + lockName

	qctx, qcancel := context.WithCancel(ctx)
	quitErr := make(chan error, 1)
	go func() {
		_, err := quitter.Lock(qctx, "d", "quitter")
		quitErr <- err
	}()
	waitQueued(t, holder, key, 1)
	lostErr := make(chan error, 1)
	go func() {
		_, err := lost.Lock(ctx, "d", "lost")
		lostErr <- err
	}()
	waitQueued(t, holder, key, 2)
	got := make(chan topo.LockDescriptor, 1)
	go func() {
		l, err := last.Lock(ctx, "d", "last")
		if err != nil {
			t.Errorf("last: %v", err)
		}
		got <- l
	}()
	waitQueued(t, holder, key, 3)

	qcancel()
	require.True(t, topo.IsErrType(<-quitErr, topo.Interrupted))
	expireSession(t, lost)
	require.True(t, topo.IsErrType(<-lostErr, topo.LockLost))
	waitQueued(t, holder, key, 1)

	require.NoError(t, l.Unlock(ctx))
	ll := <-got
	require.NotNil(t, ll)
	require.NoError(t, ll.Check(ctx))
	waitQueued(t, holder, key, 0)
	require.NoError(t, ll.Unlock(ctx))
}

// TestQueueLayout: the queue beside a lock lives under <dir>/locks/queue/;
// List leaves its keys out, a full ListDir shows the locks directory as
// Ephemeral, and a directory left with nothing but a held lock and its
// queue counts as empty for Lock (NoNode).
func TestQueueLayout(t *testing.T) {
	root := testRoot(t)
	ctx := context.Background()
	c1, c2, c3 := newTestConn(t, root), newTestConn(t, root), newTestConn(t, root)
	_, err := c1.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := c1.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	key := c1.dirPrefix("d") + lockName
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	waitErr := make(chan error, 1)
	go func() {
		_, err := c2.Lock(wctx, "d", "waiter")
		waitErr <- err
	}()
	waitQueued(t, c1, key, 1)
	keys, _, err := c1.kv.Keys(c1.dirPrefix("d")+"locks/queue/", "", nil)
	require.NoError(t, err)
	require.Len(t, keys, 1)
	entry, _, err := c1.kv.Get(keys[0], nil)
	require.NoError(t, err)
	require.NotEmpty(t, entry.Session, "a queue entry is held by its contender's session")

	kvs, err := c1.List(ctx, "d")
	require.NoError(t, err)
	require.Len(t, kvs, 1)
	require.Equal(t, "d/f", kvs[0].Path)
	entries, err := c1.ListDir(ctx, "d", true)
	require.NoError(t, err)
	for _, e := range entries {
		require.Truef(t, e.Name == "f" || e.Ephemeral, "entry %+v of a locked directory with a waiter", e)
	}

	require.NoError(t, c1.Delete(ctx, "d/f", nil))
	_, err = c3.Lock(ctx, "d", "third")
	require.Truef(t, topo.IsErrType(err, topo.NoNode), "a directory with only a lock and its queue is empty: %v", err)
	wcancel()
	require.Error(t, <-waitErr)
	require.NoError(t, l.Unlock(ctx))
}

// TestQueueLockNameOnSharedSession: a LockName waiter (whose lock has a
// 24 h session of its own) queues on its Conn's shared session, so that
// its entry lapses within twice the Conn's SessionTTL if its process dies.
func TestQueueLockNameOnSharedSession(t *testing.T) {
	root := testRoot(t)
	ctx := context.Background()
	c1, c2 := newTestConn(t, root), newTestConn(t, root)
	l, err := c1.LockName(ctx, "named", "holder")
	require.NoError(t, err)
	key := c1.dirPrefix("named") + lockName
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	waitErr := make(chan error, 1)
	go func() {
		_, err := c2.LockName(wctx, "named", "waiter")
		waitErr <- err
	}()
	waitQueued(t, c1, key, 1)
	keys, _, err := c1.kv.Keys(queuePrefixOf(key), "", nil)
	require.NoError(t, err)
	entry, _, err := c1.kv.Get(keys[0], nil)
	require.NoError(t, err)
	c2.mu.Lock()
	shared := c2.shared
	c2.mu.Unlock()
	require.NotNil(t, shared)
	require.Equal(t, shared.id, entry.Session, "the entry lives on the waiter Conn's shared session")
	info, _, err := c1.client.Session().Info(entry.Session, nil)
	require.NoError(t, err)
	require.Equal(t, c2.opts.SessionTTL.String(), info.TTL)
	wcancel()
	require.Error(t, <-waitErr)
	waitQueued(t, c1, key, 0)
	require.NoError(t, l.Unlock(ctx))
}

// TestFairLockOrderSameConn: lockers that are goroutines of one Conn (one
// session) queue like those of different Conns and acquire in the order
// they queued.
func TestFairLockOrderSameConn(t *testing.T) {
	const n = 5
	root := testRoot(t)
	ctx := context.Background()
	holder, shared := newTestConn(t, root), newTestConn(t, root)
	_, err := holder.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	first, err := holder.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	key := holder.dirPrefix("d") + lockName
	got := make(chan int, n)
	locks := make(chan topo.LockDescriptor, n)
	for i := range n {
		go func() {
			l, err := shared.Lock(ctx, "d", fmt.Sprint(i))
			if err != nil {
				t.Errorf("locker %d: %v", i, err)
				got <- -1
				return
			}
			got <- i
			locks <- l
		}()
		waitQueued(t, holder, key, i+1)
	}
	require.NoError(t, first.Unlock(ctx))
	for want := range n {
		require.Equal(t, want, <-got, "lockers of one Conn must acquire in the order they queued")
		require.NoError(t, (<-locks).Unlock(ctx))
	}
}

// TestQueueTail: the tail key <dir>/locks/tail names the entry queued
// last and is held by its session; a queue left empty, by the last
// entry's acquire or by its giving up, leaves no key under <dir>/locks/.
func TestQueueTail(t *testing.T) {
	root := testRoot(t)
	ctx := context.Background()
	holder, waiter := newTestConn(t, root), newTestConn(t, root)
	_, err := holder.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	key := holder.dirPrefix("d") + lockName
	locks := holder.dirPrefix("d") + "locks/"
	for _, giveUp := range []bool{false, true} {
		l, err := holder.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		wctx, wcancel := context.WithCancel(ctx)
		got := make(chan error, 1)
		go func() {
			l2, err := waiter.Lock(wctx, "d", "waiter")
			if err == nil {
				err = l2.Unlock(ctx)
			}
			got <- err
		}()
		waitQueued(t, holder, key, 1)
		keys, _, err := holder.kv.Keys(queuePrefixOf(key), "", nil)
		require.NoError(t, err)
		require.Len(t, keys, 1)
		tail, _, err := holder.kv.Get(locks+tailName, nil)
		require.NoError(t, err)
		require.NotNil(t, tail)
		require.Equal(t, keys[0], string(tail.Value), "the tail names the entry queued last")
		entry, _, err := holder.kv.Get(keys[0], nil)
		require.NoError(t, err)
		require.Equal(t, entry.Session, tail.Session, "the tail is held by the entry's session")
		require.Equal(t, entry.CreateIndex, tail.ModifyIndex)
		if giveUp {
			wcancel()
			require.Error(t, <-got)
			require.NoError(t, l.Unlock(ctx))
		} else {
			require.NoError(t, l.Unlock(ctx))
			require.NoError(t, <-got)
		}
		wcancel()
		left, _, err := holder.kv.Keys(locks, "", nil)
		require.NoError(t, err)
		require.Emptyf(t, left, "keys left under %s (gave up: %v)", locks, giveUp)
	}
}

// TestLeaderReadsNoQueue: reading the leader (GetCurrentLeaderID, and
// Observe's reads and watch) never lists the election's prefix, where the
// candidates queue: its cost does not grow with their number.
func TestLeaderReadsNoQueue(t *testing.T) {
	const n = 20
	root := testRoot(t)
	ctx := t.Context()
	c0 := newTestConn(t, root)
	key := c0.key(electionsDir + "/reads")
	leader, err := c0.NewLeaderParticipation("reads", "leader")
	require.NoError(t, err)
	_, err = leader.WaitForLeadership()
	require.NoError(t, err)
	defer leader.Stop()
	for i := range n {
		p, err := newTestConn(t, root).NewLeaderParticipation("reads", fmt.Sprint(i))
		require.NoError(t, err)
		go func() { _, _ = p.WaitForLeadership() }()
		defer p.Stop()
	}
	waitQueued(t, c0, key, n)

	var lists atomic.Int64
	reader, err := NewConn(testOptions(), root)
	require.NoError(t, err)
	defer reader.Close()
	reader.transport.Proxy = func(r *http.Request) (*url.URL, error) {
		if strings.Contains(r.URL.Path, "/elections/reads") && r.URL.Query().Has("recurse") {
			lists.Add(1)
		}
		return nil, nil
	}
	id, err := reader.NewLeaderParticipation("reads", "reader")
	require.NoError(t, err)
	got, err := id.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "leader", got)
	octx, cancel := context.WithCancel(ctx)
	ch, err := id.Observe(octx)
	require.NoError(t, err)
	first := <-ch
	require.Equal(t, "leader", first.ID)
	cancel()
	require.Zero(t, lists.Load(), "reads of the leader listed the election's prefix")
}
