package memorytopo_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestLeadCallsConcurrent: many goroutines call WaitForLeadership,
// Campaign (some giving up), GetCurrentLeaderID and Term on one
// participant at once, which serialise on a flag and a channel made only
// when one waits. The participant never has two candidacies, the one
// term it gets is returned to every caller, never while the previous
// leader's term is still live, and Stop ends every call with Interrupted
// (no goroutine left).
func TestLeadCallsConcurrent(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	a, b := newConn(t, f), newConn(t, f)
	q, err := b.NewLeaderParticipation("el", "q")
	require.NoError(t, err)
	qctx, err := q.WaitForLeadership()
	require.NoError(t, err)
	p, err := a.NewLeaderParticipation("el", "p")
	require.NoError(t, err)

	var (
		mu      sync.Mutex
		terms   = map[context.Context]int{}
		tooMany atomic.Bool
		wg      sync.WaitGroup
		stopped = make(chan struct{})
		stop    sync.Once
	)
	// On a failure too, the callers end before the leak check.
	t.Cleanup(func() {
		stop.Do(func() { close(stopped) })
		wg.Wait()
	})
	lead := func(lctx context.Context, err error) bool {
		if err != nil {
			return false
		}
		if qctx.Err() == nil {
			t.Errorf("p leads while q's term is live")
		}
		mu.Lock()
		terms[lctx]++
		mu.Unlock()
		return true
	}
	for i := range 8 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stopped:
					return
				default:
				}
				var err error
				switch (i + n) % 4 {
				case 0:
					var lctx context.Context
					lctx, err = p.WaitForLeadership()
					lead(lctx, err)
				case 1:
					cctx, cancel := context.WithCancel(ctx)
					if n%3 == 0 {
						cancel() // gives up at once, or while it waits
					}
					go cancel()
					var lctx context.Context
					lctx, err = p.Campaign(cctx, []byte(fmt.Sprint(i, n)))
					lead(lctx, err)
				case 2:
					_, err = p.GetCurrentLeaderID(ctx)
				case 3:
					_, err = p.Term()
					if err != nil && !topo.IsErrType(err, topo.NotLeader) {
						t.Errorf("Term: %v", err)
					}
					err = nil
				}
				if err != nil && !topo.IsErrType(err, topo.Interrupted) {
					t.Errorf("call %d: %v", (i+n)%4, err)
				}
				if memorytopo.ElectionEntries(a, "el") > 2 {
					tooMany.Store(true)
				}
			}
		})
	}
	// Let the callers churn behind q, then hand over.
	require.Eventually(t, func() bool { return memorytopo.ElectionEntries(a, "el") == 2 }, waitLimit, poll)
	require.NoError(t, q.Resign(ctx))
	// p leads once one of its callers returned the term (a Campaign
	// that gives up as it is granted withdraws it: another call takes
	// it again).
	var tm topo.Fence
	require.Eventually(t, func() bool {
		tm, err = p.Term()
		return err == nil
	}, waitLimit, poll)
	id, err := q.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "p", id)
	p.Stop()
	requireClosed(t, tm.Done(), "p's term after Stop")
	stop.Do(func() { close(stopped) })
	wg.Wait()
	require.False(t, tooMany.Load(), "p had two candidacies at once")
	mu.Lock()
	defer mu.Unlock()
	require.LessOrEqual(t, len(terms), 1, "p's callers got different terms: %v", terms)
	for _, n := range terms {
		t.Logf("%d calls returned p's term", n)
	}
	_, err = p.WaitForLeadership()
	requireCode(t, err, topo.Interrupted)
	_, err = p.Campaign(ctx, nil)
	requireCode(t, err, topo.Interrupted)
	require.Equal(t, 0, memorytopo.ElectionEntries(a, "el"))
}

// TestLeadWaitersStopAndClose: calls queued behind a running
// WaitForLeadership (waiting on the serialising channel) end with
// Interrupted on Stop, and with Closed on the Conn's Close.
func TestLeadWaitersStopAndClose(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	for _, closeConn := range []bool{false, true} {
		h, a := newConn(t, f), newConn(t, f)
		hp, err := h.NewLeaderParticipation("el", "h")
		require.NoError(t, err)
		_, err = hp.WaitForLeadership()
		require.NoError(t, err)
		p, err := a.NewLeaderParticipation("el", "p")
		require.NoError(t, err)
		errs := make(chan error, 10)
		for i := range 10 {
			go func() {
				var err error
				if i%2 == 0 {
					_, err = p.WaitForLeadership()
				} else {
					_, err = p.Campaign(ctx, nil)
				}
				errs <- err
			}()
		}
		require.Eventually(t, func() bool { return memorytopo.ElectionEntries(h, "el") == 2 }, waitLimit, poll)
		want := topo.Interrupted
		if closeConn {
			a.Close()
			want = topo.Closed
		} else {
			p.Stop()
		}
		for range 10 {
			requireCode(t, <-errs, want)
		}
		require.Equal(t, 1, memorytopo.ElectionEntries(h, "el"))
		id, err := hp.GetCurrentLeaderID(ctx)
		require.NoError(t, err)
		require.Equal(t, "h", id)
		hp.Stop()
		h.Close()
		a.Close()
	}
}

// TestWaitForNewLeaderEveryTerm: leadership passes through many
// participants, each leading one term; a watcher's WaitForNewLeader
// sends each new leader, in order (nobody leading may come between).
func TestWaitForNewLeaderEveryTerm(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	w, c := newConn(t, f), newConn(t, f)
	wp, err := w.NewLeaderParticipation("el", "watcher")
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := wp.WaitForNewLeader(wctx)
	require.NoError(t, err)
	var prev topo.LeaderParticipation
	for term := range 40 {
		id := fmt.Sprint("p", term)
		p, err := c.NewLeaderParticipation("el", id)
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			_, err := p.WaitForLeadership()
			got <- err
		}()
		if prev != nil {
			require.Eventually(t, func() bool { return memorytopo.ElectionEntries(c, "el") == 2 }, waitLimit, poll)
			prev.Stop()
		}
		require.NoError(t, <-got)
		for {
			v, ok := <-ch
			require.True(t, ok, "WaitForNewLeader's channel closed")
			if v == id {
				break
			}
			require.True(t, v == "" || prev != nil && v == fmt.Sprint("p", term-1), "term %d: got %q", term, v)
		}
		prev = p
	}
	prev.Stop()
	cancel()
	for range ch {
	}
}

// TestResumeEndsOriginalWait: a candidate waiting behind the leader is
// resumed by another Conn (which adopts its lease): the original's wait
// ends with LockLost without touching the entry, the resumed candidacy
// keeps its place and leads once the leader stops, and the original
// Conn's Close (its engine closing) ends nothing of it.
func TestResumeEndsOriginalWait(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	l, a, b := newConn(t, f), newConn(t, f), newConn(t, f)
	lp, err := l.NewLeaderParticipation("el", "leader")
	require.NoError(t, err)
	_, err = lp.WaitForLeadership()
	require.NoError(t, err)
	ap, err := a.NewLeaderParticipation("el", "cand")
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		_, err := ap.WaitForLeadership()
		got <- err
	}()
	// The entry is in the store before the participation records its
	// claim: ResumeInfo says NoNode until then (1 run in 300 did).
	var info []byte
	require.Eventually(t, func() bool {
		var err error
		info, err = ap.ResumeInfo()
		return memorytopo.ElectionEntries(l, "el") == 2 && err == nil
	}, waitLimit, poll)
	bp, err := b.ResumeLeaderParticipation(ctx, "el", "cand", info)
	require.NoError(t, err)
	requireCode(t, <-got, topo.LockLost)
	require.Equal(t, 2, memorytopo.ElectionEntries(l, "el"), "the original's wait removed the resumed entry")
	a.Close()
	require.Equal(t, 2, memorytopo.ElectionEntries(l, "el"), "the original's Close removed the resumed entry")
	lead := make(chan error, 1)
	go func() {
		_, err := bp.WaitForLeadership()
		lead <- err
	}()
	lp.Stop()
	require.NoError(t, <-lead)
	id, err := lp.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "cand", id)
	bp.Stop()
	require.Equal(t, 0, memorytopo.ElectionEntries(l, "el"))
}

// TestLeadWaitersWakeInTurn: calls of one participant queued behind its
// running WaitForLeadership (on the serialising flag) are each woken in
// turn once it returns: all return the same term, with no Stop to end
// them.
func TestLeadWaitersWakeInTurn(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	a, b := newConn(t, f), newConn(t, f)
	q, err := b.NewLeaderParticipation("el", "q")
	require.NoError(t, err)
	_, err = q.WaitForLeadership()
	require.NoError(t, err)
	p, err := a.NewLeaderParticipation("el", "p")
	require.NoError(t, err)
	const n = 6
	got := make(chan leadResult, n)
	for i := range n {
		go func() {
			var r leadResult
			if i%2 == 0 {
				r.ctx, r.err = p.WaitForLeadership()
			} else {
				r.ctx, r.err = p.Campaign(ctx, nil)
			}
			got <- r
		}()
	}
	require.Eventually(t, func() bool { return memorytopo.ElectionEntries(a, "el") == 2 }, waitLimit, poll)
	require.NoError(t, q.Resign(ctx))
	var lctx context.Context
	for range n {
		r := <-got
		require.NoError(t, r.err)
		if lctx == nil {
			lctx = r.ctx
		}
		require.Equal(t, lctx, r.ctx, "two terms")
	}
	require.NoError(t, lctx.Err())
	p.Stop()
	require.Error(t, lctx.Err())
}

type leadResult struct {
	ctx context.Context
	err error
}
