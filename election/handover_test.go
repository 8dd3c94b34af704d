package election_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestHandoverAndNames tries, on every backend's real store (the store read
// back with its own client), to make an Election lie about who is master:
// an observer naming a leader whose Resign or Close has returned (on the
// leader's own Conn or another); Await racing Resign or Close on one
// Election, and an Await whose ctx ends as the master hands over, leaving
// the instance master without knowing it or an entry in the store; Resign
// and Close of a waiting candidate called at once from several goroutines;
// and names and ids at and past the limits ("/svc" and "svc" are one
// election).
func TestHandoverAndNames(t *testing.T) {
	for _, b := range rawBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			startRaw(t, &b)
			res := func() string { return fmt.Sprintf("x%d-%d", time.Now().UnixNano(), advSeq.Add(1)) }
			ctxT := func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				t.Cleanup(cancel)
				return ctx
			}
			// entries is the candidates' entries in the store; nil on
			// memorytopo, which has no raw client.
			entries := func(t *testing.T, r string) []string {
				if b.entries == nil {
					return nil
				}
				return b.entries(t, r)
			}
			queued := func(t *testing.T, r string, n int) {
				if b.entries != nil {
					require.Eventually(t, func() bool { return len(b.entries(t, r)) >= n }, 20*time.Second, 5*time.Millisecond)
				}
			}
			leader := func(t *testing.T, ctx context.Context, e *election.TopoElection) string {
				t.Helper()
				id, err := e.Leader(ctx)
				require.NoError(t, err)
				return id
			}
			// firstObserved is the first event of a new Observe.
			firstObserved := func(t *testing.T, ctx context.Context, e *election.TopoElection) topo.Leader {
				t.Helper()
				octx, cancel := context.WithCancel(ctx)
				defer cancel()
				ch, err := e.Observe(octx)
				require.NoError(t, err)
				select {
				case l, ok := <-ch:
					require.True(t, ok, "Observe closed before its first event")
					cancel()
					for range ch {
					}
					return l
				case <-ctx.Done():
					t.Fatal("Observe sent nothing")
					return topo.Leader{}
				}
			}
			master := func(t *testing.T, ctx context.Context, e *election.TopoElection) bool {
				t.Helper()
				m, err := e.WithMastership(ctx)
				if err != nil {
					require.ErrorIs(t, err, topo.Closed)
					return false
				}
				return m.Err() == nil
			}

			// Once the master's Resign or Close has returned, nobody
			// names it leader: Leader and LeaderInfo on its own Conn
			// and on another, a new Observe's first event, a new
			// WatchLeader's first id.
			t.Run("NoLeaderOnceResignReturned", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				ca := b.open(t)
				a := advElection(t, ctx, ca, r, "a")
				own := advElection(t, ctx, ca, r, "own") // an observer on a's Conn
				bb := advElection(t, ctx, b.open(t), r, "b")
				o := advElection(t, ctx, b.open(t), r, "o")
				check := func(t *testing.T, what, next string) {
					t.Helper()
					for _, e := range []*election.TopoElection{a, own, o} {
						who := e.InstanceID()
						if next == "" {
							require.Equal(t, "", leader(t, ctx, e), "%s: Leader as %s sees it", what, who)
							_, err := e.LeaderInfo(ctx)
							require.ErrorIs(t, err, topo.NoLeader, "%s: LeaderInfo as %s sees it", what, who)
						} else {
							require.NotEqual(t, "a", leader(t, ctx, e), "%s: Leader as %s sees it", what, who)
							if l, err := e.LeaderInfo(ctx); err == nil {
								require.NotEqual(t, "a", l.ID, "%s: LeaderInfo as %s sees it", what, who)
							}
						}
						require.NotEqual(t, "a", firstObserved(t, ctx, e).ID, "%s: Observe as %s sees it", what, who)
					}
				}
				for round := range 6 {
					last := round == 5
					waiter := round%2 == 1
					require.NoError(t, a.Await(ctx))
					require.Equal(t, "a", leader(t, ctx, o))
					var got chan error
					if waiter {
						got = make(chan error, 1)
						go func() { got <- bb.Await(ctx) }()
						queued(t, r, 2)
					}
					what := fmt.Sprintf("round %d, after Resign returned", round)
					if last {
						what = fmt.Sprintf("round %d, after Close returned", round)
						require.NoError(t, a.Close(ctx))
					} else {
						require.NoError(t, a.Resign(ctx))
					}
					if !waiter {
						check(t, what, "")
						require.Empty(t, entries(t, r), what)
						continue
					}
					check(t, what, "b")
					require.NoError(t, <-got)
					wctx, cancel := context.WithCancel(ctx)
					ids, err := o.WatchLeader(wctx)
					require.NoError(t, err)
					require.Equal(t, "b", <-ids, "%s: WatchLeader's first id once b led", what)
					cancel()
					for range ids {
					}
					require.NoError(t, bb.Resign(ctx))
					check(t, what+" and b resigned", "")
				}
			})

			// Await and Resign (or Close) of one Election at once, from
			// two goroutines: whichever wins, once both returned the
			// instance is master exactly when the store says it leads and
			// holds its entry.
			t.Run("AwaitRacesResign", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				waiting := make(chan struct{}, 1)
				hc := &hookConn{Conn: b.open(t), onWait: func() {
					select {
					case waiting <- struct{}{}:
					default:
					}
				}}
				a := advElection(t, ctx, hc, r, "a")
				o := advElection(t, ctx, b.open(t), r, "o")
				const rounds = 12
				for round := range rounds {
					closing := round == rounds-1
					var wg sync.WaitGroup
					var aerr, rerr error
					wg.Add(2)
					go func() { defer wg.Done(); aerr = a.Await(ctx) }()
					go func() {
						defer wg.Done()
						// Resign (Close) at once, as Await's candidacy
						// starts campaigning, or once an observer
						// sees it lead.
						switch round % 3 {
						case 1:
							<-waiting
						case 2:
							wctx, wcancel := context.WithCancel(ctx)
							ids, err := o.WatchLeader(wctx)
							if err == nil {
								for id := range ids {
									if id == "a" {
										break
									}
								}
								wcancel()
								for range ids {
								}
							}
							wcancel()
						}
						if closing {
							rerr = a.Close(ctx)
						} else {
							rerr = a.Resign(ctx)
						}
					}()
					wg.Wait()
					select {
					case <-waiting:
					default:
					}
					require.NoError(t, rerr, "round %d", round)
					if aerr != nil {
						require.Truef(t, topo.IsErrType(aerr, topo.Interrupted) || closing && topo.IsErrType(aerr, topo.Closed), "round %d: Await: %v", round, aerr)
					}
					m := master(t, ctx, a)
					t.Logf("round %d: Await: %v, master: %v", round, aerr, m)
					l := leader(t, ctx, o)
					es := entries(t, r)
					if m {
						require.Equal(t, "a", l, "round %d: master, but the store names another leader", round)
						if b.entries != nil {
							require.Len(t, es, 1, "round %d: master", round)
						}
						_, err := a.Term()
						require.NoError(t, err, "round %d", round)
						require.NoError(t, a.Resign(ctx))
					} else {
						require.Equal(t, "", l, "round %d: not master (Await: %v), but the store names a leader", round, aerr)
						require.Empty(t, es, "round %d: not master (Await: %v), but an entry is left", round, aerr)
						_, err := a.Term()
						require.Error(t, err, "round %d", round)
					}
					require.Equal(t, "", leader(t, ctx, o), "round %d: after Resign", round)
				}
				require.Empty(t, entries(t, r))
			})

			// An Await whose ctx ends just as the master resigns: either
			// it returns nil and the instance leads, or it fails
			// Interrupted and then the instance is not master, nobody
			// leads and no entry is left.
			t.Run("AwaitCancelRacesHandover", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				a := advElection(t, ctx, b.open(t), r, "a")
				bb := advElection(t, ctx, b.open(t), r, "b")
				o := advElection(t, ctx, b.open(t), r, "o")
				for round := range 6 {
					require.NoError(t, a.Await(ctx))
					bctx, bcancel := context.WithCancel(ctx)
					got := make(chan error, 1)
					go func() { got <- bb.Await(bctx) }()
					queued(t, r, 2)
					resigned := make(chan error, 1)
					go func() { resigned <- a.Resign(ctx) }()
					if round%2 == 1 {
						// Cancel as the store hands b the term: when
						// an observer on another Conn sees b lead.
						wctx, wcancel := context.WithCancel(ctx)
						ids, err := o.WatchLeader(wctx)
						require.NoError(t, err)
						for id := range ids {
							if id == "b" {
								break
							}
						}
						wcancel()
						for range ids {
						}
					}
					bcancel()
					require.NoError(t, <-resigned)
					err := <-got
					t.Logf("round %d: Await: %v", round, err)
					if err == nil {
						require.True(t, master(t, ctx, bb), "round %d: Await said master", round)
						require.Equal(t, "b", leader(t, ctx, o), "round %d", round)
						require.NoError(t, bb.Resign(ctx))
					} else {
						require.ErrorIs(t, err, topo.Interrupted, "round %d", round)
						require.False(t, master(t, ctx, bb), "round %d: master after Await failed", round)
						_, terr := bb.Term()
						require.ErrorIs(t, terr, topo.NotLeader, "round %d", round)
					}
					require.Equal(t, "", leader(t, ctx, o), "round %d: a resigned and b withdrew or resigned (Await: %v)", round, err)
					require.Empty(t, entries(t, r), "round %d (Await: %v)", round, err)
				}
			})

			// A waiting candidate is resigned twice and closed, all at
			// once from three goroutines while its Await blocks: every
			// call returns, the Await fails, the candidate's entry goes,
			// and it never leads after the master resigns.
			t.Run("ResignTwiceAndCloseOfWaiter", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				a := advElection(t, ctx, b.open(t), r, "a")
				bb := advElection(t, ctx, b.open(t), r, "b")
				o := advElection(t, ctx, b.open(t), r, "o")
				require.NoError(t, a.Await(ctx))
				got := make(chan error, 1)
				go func() { got <- bb.Await(ctx) }()
				queued(t, r, 2)
				errs := make(chan error, 3)
				var wg sync.WaitGroup
				for i := range 3 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if i == 2 {
							errs <- bb.Close(ctx)
						} else if err := bb.Resign(ctx); err != nil && !topo.IsErrType(err, topo.Closed) {
							errs <- err
						}
					}()
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				err := <-got
				require.Truef(t, topo.IsErrType(err, topo.Interrupted) || topo.IsErrType(err, topo.Closed), "the waiter's Await: %v", err)
				if b.entries != nil {
					require.Len(t, entries(t, r), 1, "only the master's entry is left")
				}
				require.NoError(t, a.Resign(ctx))
				require.Equal(t, "", leader(t, ctx, o), "the closed waiter leads")
				require.Empty(t, entries(t, r))
				require.ErrorIs(t, bb.Await(ctx), topo.Closed)
			})

			// The leader's Campaign with a new value (a Proclaim while
			// leading, a new candidacy once resigned) racing its Resign:
			// once both returned, a live leadership context goes with the
			// store naming this participant leader with the new value,
			// and a done one with nobody leading and no entry left.
			t.Run("CampaignWhileLeadingRacesResign", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				p, err := b.open(t).NewLeaderParticipation(r, "p")
				require.NoError(t, err)
				defer p.Stop()
				o := advElection(t, ctx, b.open(t), r, "o")
				outcomes := map[string]int{}
				for round := range 12 {
					_, err := p.Campaign(ctx, []byte("v0"))
					require.NoError(t, err)
					var wg sync.WaitGroup
					var lctx context.Context
					var cerr, rerr error
					var seen <-chan topo.Leader
					octx, ocancel := context.WithCancel(ctx)
					if round%2 == 1 {
						// Resign once an observer sees the new value,
						// which may be before Campaign returned.
						seen, err = o.Observe(octx)
						require.NoError(t, err)
					}
					wg.Add(2)
					go func() { defer wg.Done(); lctx, cerr = p.Campaign(ctx, []byte("v1")) }()
					go func() {
						defer wg.Done()
						if seen != nil {
							for l := range seen {
								if string(l.Value) == "v1" {
									break
								}
							}
						}
						rerr = p.Resign(ctx)
					}()
					wg.Wait()
					ocancel()
					if seen != nil {
						for range seen {
						}
					}
					require.NoError(t, rerr, "round %d", round)
					l, lerr := o.LeaderInfo(ctx)
					es := entries(t, r)
					live := cerr == nil && lctx.Err() == nil
					outcomes[fmt.Sprintf("err=%v live=%v", cerr, live)]++
					if cerr != nil {
						require.Truef(t, topo.IsErrType(cerr, topo.Interrupted), "round %d: Campaign: %v", round, cerr)
					}
					if live {
						require.NoError(t, lerr, "round %d: Campaign's context is live, but nobody leads", round)
						require.Equal(t, "p", l.ID, "round %d", round)
						require.Equal(t, "v1", string(l.Value), "round %d", round)
						if b.entries != nil {
							require.Len(t, es, 1, "round %d", round)
						}
					} else {
						require.ErrorIs(t, lerr, topo.NoLeader, "round %d: Campaign: %v, its context done, but the store names %v", round, cerr, l)
						require.Empty(t, es, "round %d: Campaign: %v", round, cerr)
					}
					require.NoError(t, p.Resign(ctx))
				}
				t.Logf("outcomes: %v", outcomes)
			})

			// "/svc" and "svc" are one election; malformed and reserved
			// names and oversized ids are refused before anything is
			// written; an id at the backend's limit leads and is read
			// back whole, or is refused InvalidArgument leaving nothing.
			t.Run("NamesAndIDs", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				conn := b.open(t)
				a := advElection(t, ctx, b.open(t), "/"+r, "a")
				bb := advElection(t, ctx, b.open(t), r, "b")
				require.NoError(t, a.Await(ctx))
				require.Equal(t, "a", leader(t, ctx, bb), "\"/%s\" and %q are two elections", r, r)
				require.False(t, master(t, ctx, bb))
				got := make(chan error, 1)
				go func() { got <- bb.Await(ctx) }()
				queued(t, r, 2)
				require.True(t, master(t, ctx, a), "b's Await under the other spelling cost a its mastership")
				require.NoError(t, a.Resign(ctx))
				require.NoError(t, <-got)
				require.NoError(t, bb.Resign(ctx))

				f := topoFactory(t, conn, "x")
				for _, name := range []string{"", "/", r + "/", r + "//y", "..", r + "/../y", "./" + r, r + "/locks", r + "/Lock", "a\x00b", strings.Repeat("n", topo.MaxPathLength+1)} {
					_, err := f.NewTopoElection(ctx, name)
					require.Truef(t, topo.IsErrType(err, topo.InvalidArgument) || topo.IsErrType(err, topo.InvalidPath), "election name %q: %v", name, err)
				}
				big := topoFactory(t, conn, strings.Repeat("i", topo.MaxValueSize+1))
				_, err := big.NewTopoElection(ctx, r)
				require.ErrorIs(t, err, topo.InvalidArgument, "an id over MaxValueSize")

				id := strings.Repeat("j", 400*1024) // over Consul's limit for ids
				e := advElection(t, ctx, b.open(t), r, id)
				err = e.Await(ctx)
				if err != nil {
					require.ErrorIs(t, err, topo.InvalidArgument)
					require.Equal(t, "", leader(t, ctx, bb))
				} else {
					require.Equal(t, id, leader(t, ctx, bb), "a large id read back")
					require.NoError(t, e.Proclaim(ctx, []byte("v")))
					err := e.Proclaim(ctx, make([]byte, topo.MaxValueSize+1))
					require.ErrorIs(t, err, topo.InvalidArgument, "an oversized value")
					l, err := bb.LeaderInfo(ctx)
					require.NoError(t, err)
					require.Equal(t, "v", string(l.Value), "the refused Proclaim changed the value")
					require.NoError(t, e.Resign(ctx))
				}
				t.Logf("a %d-byte id: %v", len(id), err)
				require.Empty(t, entries(t, r))
			})
		})
	}
}

// TestObserverAtPartition: the master is cut off from the store while a
// candidate waits and an observer on a third Conn follows Observe and
// WatchLeader. When the observer first sees the next master, the cut-off
// master's mastership context and term are already over (the observer
// sees the store's handover before the new master's own Await returns);
// after the partition heals and the old master resigns, the observer
// never shows it as leader again.
func TestObserverAtPartition(t *testing.T) {
	for _, b := range advBackends() {
		t.Run(b.name, func(t *testing.T) {
			open, openCut := b.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*b.bound+time.Minute)
			defer cancel()
			r := fmt.Sprintf("cut%d-%d", time.Now().UnixNano(), advSeq.Add(1))
			cutConn, cut, heal := openCut(t)
			t.Cleanup(heal)
			a := advElection(t, ctx, cutConn, r, "a")
			bb := advElection(t, ctx, open(t), r, "b")
			o := advElection(t, ctx, open(t), r, "o")
			require.NoError(t, a.Await(ctx))
			am, err := a.WithMastership(ctx)
			require.NoError(t, err)
			fa, err := a.Term()
			require.NoError(t, err)
			require.NoError(t, a.Proclaim(ctx, []byte("a-value")))
			octx, ocancel := context.WithCancel(ctx)
			defer ocancel()
			leaders, err := o.Observe(octx)
			require.NoError(t, err)
			ids, err := o.WatchLeader(octx)
			require.NoError(t, err)
			got := make(chan error, 1)
			go func() { got <- bb.Await(ctx) }()
			cut()
			var seen []topo.Leader
			for l := range leaders {
				seen = append(seen, l)
				if l.ID == "a" {
					require.Equal(t, fa.Token(), l.Token, "a shown with another term's token: %v", seen)
				}
				if l.ID == "b" {
					requireDone(t, am.Done(), "a's mastership when the observer saw b lead")
					requireDone(t, fa.Done(), "a's term when the observer saw b lead")
					require.Greater(t, l.Token, fa.Token())
					break
				}
			}
			for id := range ids {
				if id == "b" {
					break
				}
				require.Equal(t, "a", id)
			}
			require.NoError(t, <-got)
			heal()
			rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
			_ = a.Resign(rctx) // may report the loss
			rcancel()
			late, err := a.WithMastership(ctx)
			require.NoError(t, err)
			require.Error(t, late.Err(), "the cut-off master is master again after the partition healed")
			require.NoError(t, bb.Proclaim(ctx, []byte("end")))
			for l := range leaders {
				seen = append(seen, l)
				require.NotEqual(t, "a", l.ID, "the cut-off master shown again after b: %v", seen)
				if string(l.Value) == "end" {
					break
				}
			}
			t.Logf("observed: %v", seen)
		})
	}
}

// TestZooKeeperWaiterAndObserverSessionsExpired: the server expires the
// ZooKeeper sessions of a waiting candidate and of an observer
// (zktest.ExpireSession). The waiter's Await fails LockLost and it never
// leads on its dead entry; the observer's Observe and WatchLeader go on
// over its Conn's new session and report the next terms.
func TestZooKeeperWaiterAndObserverSessionsExpired(t *testing.T) {
	addr := zktest.Start(t)
	open := func(t *testing.T) topo.Conn {
		c, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}, SessionTimeout: 4 * time.Second}, "/adv")
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := fmt.Sprintf("wexp%d", time.Now().UnixNano())
	// expire ends the session of lp's Conn; lp must have an entry.
	expire := func(lp topo.LeaderParticipation) {
		var info []byte
		require.Eventually(t, func() bool {
			var err error
			info, err = lp.ResumeInfo()
			return err == nil
		}, 20*time.Second, 5*time.Millisecond)
		var ri struct {
			Session  int64  `json:"session"`
			Password []byte `json:"password"`
		}
		require.NoError(t, json.Unmarshal(info, &ri))
		require.Eventually(t, func() bool {
			err := zktest.ExpireSession(addr, ri.Session, ri.Password)
			return err == nil || strings.Contains(err.Error(), "already expired")
		}, 20*time.Second, 50*time.Millisecond)
	}
	a := advElection(t, ctx, open(t), r, "a")
	wc := &recordConn{Conn: open(t)}
	w := advElection(t, ctx, wc, r, "w")
	oc := open(t)
	o := advElection(t, ctx, oc, r, "o")
	side, err := oc.NewLeaderParticipation(r+"-side", "o")
	require.NoError(t, err)
	defer side.Stop()
	_, err = side.WaitForLeadership()
	require.NoError(t, err)

	leaders, err := o.Observe(ctx)
	require.NoError(t, err)
	ids, err := o.WatchLeader(ctx)
	require.NoError(t, err)
	nextLeader := func(want string) []topo.Leader {
		t.Helper()
		var seen []topo.Leader
		for {
			select {
			case l, ok := <-leaders:
				require.True(t, ok, "Observe closed: %v", seen)
				seen = append(seen, l)
				if l.ID == want {
					return seen
				}
			case <-ctx.Done():
				t.Fatalf("Observe never sent %q: %v", want, seen)
			}
		}
	}
	nextID := func() string {
		t.Helper()
		select {
		case id, ok := <-ids:
			require.True(t, ok, "WatchLeader closed")
			return id
		case <-ctx.Done():
			t.Fatal("WatchLeader sent nothing")
			return ""
		}
	}

	require.NoError(t, a.Await(ctx))
	nextLeader("a")
	require.Equal(t, "a", nextID())
	got := make(chan error, 1)
	go func() { got <- w.Await(ctx) }()
	require.Eventually(t, func() bool {
		wc.mu.Lock()
		defer wc.mu.Unlock()
		return len(wc.lps) == 2 // the observer's, then the candidacy's
	}, 20*time.Second, 5*time.Millisecond)
	wc.mu.Lock()
	wlp := wc.lps[1]
	wc.mu.Unlock()
	expire(wlp)
	expire(side)
	require.ErrorIs(t, <-got, topo.LockLost, "the waiter's Await once its session expired")

	require.NoError(t, a.Resign(ctx))
	seen := nextLeader("")
	for _, l := range seen {
		require.NotEqual(t, "w", l.ID, "the expired waiter led: %v", seen)
	}
	require.Equal(t, "", firstLeader(t, ctx, o), "after a resigned")
	require.NoError(t, w.Await(ctx))
	nextLeader("w")
	require.Equal(t, "w", nextID())
	require.NoError(t, w.Resign(ctx))
	require.NoError(t, a.Await(ctx))
	nextLeader("a")
	require.Equal(t, "a", nextID(), "a's new term after the observer's session expired")
}

func firstLeader(t *testing.T, ctx context.Context, e *election.TopoElection) string {
	t.Helper()
	id, err := e.Leader(ctx)
	require.NoError(t, err)
	return id
}
