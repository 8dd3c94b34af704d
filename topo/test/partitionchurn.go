package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// The size of a churn run: contenders, and cuts before it ends.
const (
	churnContenders = 3
	churnCuts       = 8
)

// churnClaim is one granted claim as the checker sees it.
type churnClaim struct {
	who   string
	token int64
	done  <-chan struct{}
}

// churnLog is what the contenders report to the checker.
type churnLog struct {
	t  *testing.T
	mu sync.Mutex
	// granted are the claims granted so far, in the order their grants
	// were seen.
	granted []churnClaim
	// maxToken is the greatest token granted so far.
	maxToken int64
}

// grant records c, granted now, and checks it against every claim granted
// before: of two granted claims the older (smaller token) must have ended
// (its Done closed) by the time the newer was granted, which is before
// now; no two claims share a token.
func (l *churnLog) grant(c churnClaim) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, o := range l.granted {
		older := o
		if c.token < o.token {
			older = c
		}
		switch {
		case o.token == c.token:
			l.t.Errorf("two claims with token %d: %s and %s", c.token, o.who, c.who)
		case !isDone(older.done):
			l.t.Errorf("%s (token %d) and %s (token %d) both granted, and the older one's Done is still open",
				o.who, o.token, c.who, c.token)
		}
	}
	l.granted = append(l.granted, c)
	l.maxToken = max(l.maxToken, c.token)
}

// newest returns the greatest token granted so far.
func (l *churnLog) newest() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.maxToken
}

// count returns the number of grants so far.
func (l *churnLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.granted)
}

// isDone reports whether ch is closed.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// RequireExclusionUnderChurn runs, as subtests Lock and Election, each on
// a fresh store of newStore, churnContenders contenders for one lock (or
// one election), each on a Conn of opts.Partition, while the fault cuts
// one of them off at a time, for between no time and 1.5 times
// opts.SessionBound, churnCuts times, so that the cuts land on every step
// of Lock, Unlock, WaitForLeadership, Stop and the guarded writes. Each
// contender that is granted a claim checks, against every claim granted
// before, that the older of the two has already ended (its Done is
// closed: a lock never has two holders, a term never two leaders, the
// loss is seen before anyone else is granted) and that no two claims
// share a token; then it writes its token to a guarded file up to
// churnWrites times (a compare-and-set UpdateOp after IfHeld of its
// claim): a guarded write that succeeds must have been sent before any
// newer claim was granted, and must find the file's last token no greater
// than its own. newStore and opts are Run's.
//
// A run takes one to four minutes on a real server, too long for make
// test: the backends' tests that call it are built only with the build
// tag churn (make test-churn).
func RequireExclusionUnderChurn(t *testing.T, newStore func(t *testing.T) (open func() topo.Conn), opts Options) {
	t.Helper()
	require.NotNil(t, opts.Partition, "the churn scenario needs Options.Partition")
	t.Run("Lock", func(t *testing.T) { churn(t, newStore(t), opts, false) })
	t.Run("Election", func(t *testing.T) { churn(t, newStore(t), opts, true) })
}

// churn is one run of RequireExclusionUnderChurn on the store of open:
// lockers of one directory (Lock, Unlock), or with elections candidates
// of one election (WaitForLeadership, Term, Stop).
func churn(t *testing.T, open func() topo.Conn, opts Options, elections bool) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c0 := open()
	t.Cleanup(c0.Close)
	const dir, guarded = "churn", "churn/owner"
	_, err := c0.Create(ctx, guarded, []byte("0"))
	require.NoError(t, err)

	log := &churnLog{t: t}
	parts := make([]Partitioned, churnContenders)
	for i := range parts {
		parts[i] = opts.Partition(t)
		t.Cleanup(parts[i].Conn.Close)
		t.Cleanup(parts[i].Heal)
	}
	bound := opts.SessionBound
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			who := fmt.Sprintf("contender %d", i)
			for n := 0; ctx.Err() == nil; n++ {
				name := fmt.Sprintf("%s claim %d", who, n)
				if elections {
					churnLead(ctx, log, p.Conn, dir, name, guarded, bound)
				} else {
					churnLock(ctx, log, p.Conn, dir, name, guarded, bound, n%2 == 1)
				}
			}
		})
	}
	// The fault: one contender cut off at a time.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for range churnCuts {
		if t.Failed() {
			break
		}
		p := parts[rng.IntN(len(parts))]
		p.Cut()
		churnPause(ctx, time.Duration(rng.Int64N(int64(bound*3/2))))
		p.Heal()
		churnPause(ctx, time.Duration(rng.Int64N(int64(bound/2))))
	}
	cancel()
	wg.Wait()
	t.Logf("%d claims granted over %d cuts", log.count(), churnCuts)
	require.Positive(t, log.count(), "no claim was granted")
}

// churnWrites is how many guarded writes a holder makes at most.
const churnWrites = 8

// churnPause waits d or until ctx ends: the length of a cut, not a wait
// for something to happen.
func churnPause(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// churnLock is one Lock (LockName when byName), the guarded writes and
// Unlock of contender who.
func churnLock(ctx context.Context, log *churnLog, conn topo.Conn, dir, who, guarded string, bound time.Duration, byName bool) {
	lctx, cancel := context.WithTimeout(ctx, 3*bound)
	defer cancel()
	lock := conn.Lock
	if byName {
		lock = conn.LockName
	}
	ld, err := lock(lctx, dir, who)
	if err != nil {
		return
	}
	churnHold(ctx, log, conn, who, guarded, ld)
	uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer ucancel()
	_ = ld.Unlock(uctx)
}

// churnLead is one candidacy: WaitForLeadership, the guarded writes with
// its Term, and Stop.
func churnLead(ctx context.Context, log *churnLog, conn topo.Conn, dir, who, guarded string, bound time.Duration) {
	p, err := conn.NewLeaderParticipation(dir, who)
	if err != nil {
		return
	}
	defer p.Stop()
	got := make(chan error, 1)
	go func() {
		_, err := p.WaitForLeadership()
		got <- err
	}()
	tm := time.NewTimer(3 * bound)
	defer tm.Stop()
	select {
	case err := <-got:
		if err != nil {
			return
		}
	case <-tm.C:
		return
	case <-ctx.Done():
		return
	}
	f, err := p.Term()
	if err != nil {
		return
	}
	churnHold(ctx, log, conn, who, guarded, f)
}

// churnHold records the grant of f and makes its guarded writes: up to
// churnWrites, while they succeed.
func churnHold(ctx context.Context, log *churnLog, conn topo.Conn, who, guarded string, f topo.Fence) {
	tok := f.Token()
	log.grant(churnClaim{who: who, token: tok, done: f.Done()})
	for range churnWrites {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		data, ver, err := conn.Get(wctx, guarded)
		if err != nil {
			cancel()
			return
		}
		last, perr := strconv.ParseInt(string(data), 10, 64)
		newest := log.newest()
		_, err = conn.Txn(wctx, topo.IfHeld(f), topo.UpdateOp(guarded, []byte(strconv.FormatInt(tok, 10)), ver))
		cancel()
		var te *topo.TxnError
		switch {
		case err == nil && perr != nil:
			log.t.Errorf("%s: the guarded file held %q", who, data)
		case err == nil && newest > tok:
			log.t.Errorf("%s (token %d): a guarded write sent after a claim with token %d was granted succeeded", who, tok, newest)
		case err == nil && last > tok:
			log.t.Errorf("%s (token %d): a guarded write succeeded over the write of a newer claim (token %d)", who, tok, last)
		case err != nil && errors.As(err, &te) && te.Index == 0 && !topo.IsErrType(err, topo.LockLost):
			log.t.Errorf("%s: IfHeld failed with %v, want LockLost", who, err)
		}
		if err != nil {
			return
		}
	}
}
