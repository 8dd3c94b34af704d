package election_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	consulapi "github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/internal/realstores"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// rawBackend opens Conns on one real store and reads the store directly,
// with the store's own client, bypassing topokit.
type rawBackend struct {
	name string
	open func(t *testing.T) topo.Conn
	// addr and dial are the real store's realstores.Store Addr and Dial
	// (a Conn on a proxy in front of addr); "" and nil for memorytopo.
	addr string
	dial func(t *testing.T, addr string) topo.Conn
	// entries lists the keys (znodes) under the Conn root's elections/<res>
	// that live on a session or lease: the candidates' entries. nil for
	// memorytopo (no raw client).
	entries func(t *testing.T, res string) []string
	// kill ends, behind its Conn's back, the session or lease on which the
	// current leader's entry of res lives; nil where the test cannot.
	kill func(t *testing.T, res string)
	// killWaiter is kill for the first waiting candidate's entry.
	killWaiter func(t *testing.T, res string)
}

func rawBackends(t *testing.T) []rawBackend {
	mf := memorytopo.NewFactory()
	out := []rawBackend{{name: "memory", open: func(t *testing.T) topo.Conn {
		c, err := mf.NewConn("", "/adv")
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}}}
	out = append(out, rawBackend{name: "etcd"})
	out = append(out, rawBackend{name: "zookeeper"})
	out = append(out, rawBackend{name: "consul"})
	return out
}

// startRaw fills in b's functions, starting its server (realstores)
// and the store's own client.
func startRaw(t *testing.T, b *rawBackend) {
	if b.name == "memory" {
		return
	}
	st := realstores.All("/adv")[b.name](t)
	addr := st.Addr
	b.open, b.addr, b.dial = st.Open, st.Addr, st.Dial
	switch b.name {
	case "etcd":
		raw, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { _ = raw.Close() })
		b.entries = func(t *testing.T, res string) []string {
			resp, err := raw.Get(context.Background(), "/adv/elections/"+res+"/", clientv3.WithPrefix())
			require.NoError(t, err)
			var out []string
			for _, kv := range resp.Kvs {
				if kv.Lease != 0 {
					out = append(out, fmt.Sprintf("%s lease=%x", kv.Key, kv.Lease))
				}
			}
			return out
		}
		b.kill = func(t *testing.T, res string) {
			resp, err := raw.Get(context.Background(), "/adv/elections/"+res+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
			require.NoError(t, err)
			for _, kv := range resp.Kvs {
				if kv.Lease != 0 {
					_, err := raw.Revoke(context.Background(), clientv3.LeaseID(kv.Lease))
					require.NoError(t, err)
					return
				}
			}
			t.Fatal("no leader entry to kill")
		}
		b.killWaiter = func(t *testing.T, res string) {
			resp, err := raw.Get(context.Background(), "/adv/elections/"+res+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
			require.NoError(t, err)
			n := 0
			for _, kv := range resp.Kvs {
				if kv.Lease != 0 {
					if n++; n == 2 {
						_, err := raw.Revoke(context.Background(), clientv3.LeaseID(kv.Lease))
						require.NoError(t, err)
						return
					}
				}
			}
			t.Fatal("no waiting entry to kill")
		}
	case "zookeeper":
		raw, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
		require.NoError(t, err)
		t.Cleanup(raw.Close)
		var walk func(p string, out *[]string)
		walk = func(p string, out *[]string) {
			kids, st, err := raw.Children(p)
			if err == zk.ErrNoNode {
				return
			}
			require.NoError(t, err)
			if st.EphemeralOwner != 0 && !strings.Contains(p, "/values") {
				*out = append(*out, fmt.Sprintf("%s session=%x", p, st.EphemeralOwner))
			}
			for _, k := range kids {
				walk(path.Join(p, k), out)
			}
		}
		b.entries = func(t *testing.T, res string) []string {
			var out []string
			walk("/adv/elections/"+res, &out)
			return out
		}
	case "consul":
		raw, err := consulapi.NewClient(&consulapi.Config{Address: addr})
		require.NoError(t, err)
		b.entries = func(t *testing.T, res string) []string {
			pairs, _, err := raw.KV().List("adv/elections/"+res, nil)
			require.NoError(t, err)
			var out []string
			for _, p := range pairs {
				if p.Session != "" && (p.Key == "adv/elections/"+res || strings.HasPrefix(p.Key, "adv/elections/"+res+"/locks/queue/")) {
					out = append(out, fmt.Sprintf("%s session=%s", p.Key, p.Session))
				}
			}
			return out
		}
		b.kill = func(t *testing.T, res string) {
			p, _, err := raw.KV().Get("adv/elections/"+res, nil)
			require.NoError(t, err)
			require.NotNil(t, p)
			require.NotEmpty(t, p.Session)
			_, err = raw.Session().Destroy(p.Session, nil)
			require.NoError(t, err)
		}
		b.killWaiter = func(t *testing.T, res string) {
			pairs, _, err := raw.KV().List("adv/elections/"+res+"/locks/queue/", nil)
			require.NoError(t, err)
			for _, p := range pairs {
				if p.Session != "" {
					_, err = raw.Session().Destroy(p.Session, nil)
					require.NoError(t, err)
					return
				}
			}
			t.Fatal("no waiting entry to kill")
		}
	}
}

// TestRawStore runs election scenarios on each real store and checks the
// store itself with its own client: WatchLeader across terms (a re-elected
// id included), the entries an abandoned Await and Close leave (none), and
// a leader whose session or lease is ended behind its back (etcd: lease
// revoked; Consul: session destroyed).
func TestRawStore(t *testing.T) {
	for _, b := range rawBackends(t) {
		t.Run(b.name, func(t *testing.T) {
			startRaw(t, &b)
			res := func() string { return fmt.Sprintf("p%d-%d", time.Now().UnixNano(), advSeq.Add(1)) }
			ctxT := func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				t.Cleanup(cancel)
				return ctx
			}
			recv := func(t *testing.T, ctx context.Context, ch <-chan string) string {
				t.Helper()
				select {
				case id, ok := <-ch:
					require.True(t, ok, "WatchLeader closed")
					return id
				case <-ctx.Done():
					t.Fatal("no leader sent")
					return ""
				}
			}

			// WatchLeader sends every new term, the same id re-elected
			// included; when it sends the next leader, the previous
			// master's mastership context is done.
			t.Run("WatchLeaderTerms", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				a := advElection(t, ctx, b.open(t), r, "a")
				bb := advElection(t, ctx, b.open(t), r, "b")
				obs := advElection(t, ctx, b.open(t), r, "obs")
				ch, err := obs.WatchLeader(ctx)
				require.NoError(t, err)
				require.NoError(t, a.Await(ctx))
				require.Equal(t, "a", recv(t, ctx, ch))
				require.NoError(t, a.Resign(ctx))
				require.NoError(t, a.Await(ctx))
				require.Equal(t, "a", recv(t, ctx, ch), "a re-elected")
				am, err := a.WithMastership(ctx)
				require.NoError(t, err)
				f1, err := a.Term()
				require.NoError(t, err)
				got := make(chan error, 1)
				go func() { got <- bb.Await(ctx) }()
				if b.entries != nil {
					require.Eventually(t, func() bool { return len(b.entries(t, r)) >= 2 }, 20*time.Second, 10*time.Millisecond)
				}
				go func() { _ = a.Resign(ctx) }()
				require.Equal(t, "b", recv(t, ctx, ch))
				requireDone(t, am.Done(), "a's mastership when b is sent")
				require.NoError(t, <-got)
				f2, err := bb.Term()
				require.NoError(t, err)
				require.Greater(t, f2.Token(), f1.Token())
			})

			// An Await cancelled while waiting leaves no entry behind, and
			// neither does Close of the master.
			t.Run("CancelledAwaitLeavesNothing", func(t *testing.T) {
				if b.entries == nil {
					t.Skip("memorytopo: no raw client to read the store with (this check runs on the real stores)")
				}
				ctx, r := ctxT(t), res()
				a := advElection(t, ctx, b.open(t), r, "a")
				bb := advElection(t, ctx, b.open(t), r, "b")
				require.NoError(t, a.Await(ctx))
				bctx, cancel := context.WithCancel(ctx)
				got := make(chan error, 1)
				go func() { got <- bb.Await(bctx) }()
				require.Eventually(t, func() bool { return len(b.entries(t, r)) >= 2 }, 20*time.Second, 10*time.Millisecond)
				cancel()
				require.ErrorIs(t, <-got, topo.Interrupted)
				t.Logf("right after Await returned: %v", b.entries(t, r))
				require.Eventually(t, func() bool { return len(b.entries(t, r)) == 1 }, 20*time.Second, 10*time.Millisecond, "b's entry stays")
				require.NoError(t, a.Close(ctx))
				require.Empty(t, b.entries(t, r), "after the master's Close")
			})

			// An Await whose ctx ends while it waits returns only once its
			// candidacy's entry is gone from the store, as etcd's Campaign
			// and Resign do; it returned while the entry was still queued,
			// so that when the master resigned then, a third process saw
			// the instance lead (Leader, WatchLeader) after its Await had
			// said Interrupted.
			t.Run("AwaitCancelledWithdrawsFirst", func(t *testing.T) {
				if b.entries == nil {
					t.Skip("memorytopo: no raw client to read the store with (this check runs on the real stores)")
				}
				ctx, r := ctxT(t), res()
				a := advElection(t, ctx, b.open(t), r, "a")
				stopping, release := make(chan struct{}, 1), make(chan struct{})
				sc := &hookConn{Conn: b.open(t), onStop: func() { stopping <- struct{}{}; <-release }}
				var once sync.Once
				free := func() { once.Do(func() { close(release) }) }
				t.Cleanup(free)
				bb := advElection(t, ctx, sc, r, "b")
				require.NoError(t, a.Await(ctx))
				bctx, bcancel := context.WithCancel(ctx)
				got := make(chan error, 1)
				go func() { got <- bb.Await(bctx) }()
				require.Eventually(t, func() bool { return len(b.entries(t, r)) == 2 }, 20*time.Second, 10*time.Millisecond)
				bcancel()
				<-stopping
				select {
				case err := <-got:
					t.Fatalf("Await returned %v before its candidacy was withdrawn; store: %v", err, b.entries(t, r))
				default:
				}
				free()
				require.ErrorIs(t, <-got, topo.Interrupted)
				require.Len(t, b.entries(t, r), 1, "b's entry left after Await returned")
			})

			// The same, with Await's ctx ending while the request that
			// creates its entry is in flight: the entry is in the store
			// but its answer has not reached the client (a proxy delays
			// every byte of b's Conn to widen that window). Stop found no
			// candidacy yet and returned at once, and Await with it,
			// while the entry stayed queued (etcd: removed later in the
			// background; Consul: its Create went on and withdrew it after
			// Stop had returned): the CI's "b's entry left after Await
			// returned" under load.
			t.Run("AwaitCancelledDuringCreate", func(t *testing.T) {
				if b.dial == nil {
					t.Skip("memorytopo: no raw client to read the store with (this check runs on the real stores)")
				}
				ctx, r := ctxT(t), res()
				a := advElection(t, ctx, b.open(t), r, "a")
				p, err := faultproxy.New(b.addr)
				require.NoError(t, err)
				t.Cleanup(func() { _ = p.Close() })
				bb := advElection(t, ctx, b.dial(t, p.Addr()), r, "b")
				require.NoError(t, a.Await(ctx))
				p.SetDelay(200 * time.Millisecond)
				bctx, bcancel := context.WithCancel(ctx)
				got := make(chan error, 1)
				go func() { got <- bb.Await(bctx) }()
				require.Eventually(t, func() bool { return len(b.entries(t, r)) == 2 }, 20*time.Second, time.Millisecond)
				bcancel()
				require.ErrorIs(t, <-got, topo.Interrupted)
				require.Len(t, b.entries(t, r), 1, "b's entry left after Await returned")
			})

			// A Campaign whose own ctx ends, and a Resign that comes, while
			// the request that creates the candidate's entry is in flight
			// (a proxy delays every byte of b's Conn): Campaign returned
			// Interrupted and Resign nil at once, with the entry still in
			// the store (etcd: removed later in the background; ZooKeeper
			// and Consul: the Create went on, and after Resign the
			// candidacy with it), where it could lead a term its
			// participant did not know of. Both return once it is gone.
			for _, by := range []string{"ctx", "Resign"} {
				t.Run("CampaignEndedDuringCreate/"+by, func(t *testing.T) {
					if b.dial == nil {
						t.Skip("memorytopo: no raw client to read the store with (this check runs on the real stores)")
					}
					ctx, r := ctxT(t), res()
					a := advElection(t, ctx, b.open(t), r, "a")
					p, err := faultproxy.New(b.addr)
					require.NoError(t, err)
					t.Cleanup(func() { _ = p.Close() })
					lp, err := b.dial(t, p.Addr()).NewLeaderParticipation(r, "b")
					require.NoError(t, err)
					t.Cleanup(lp.Stop)
					require.NoError(t, a.Await(ctx))
					p.SetDelay(200 * time.Millisecond)
					bctx, bcancel := context.WithCancel(ctx)
					defer bcancel()
					got := make(chan error, 1)
					go func() {
						_, err := lp.Campaign(bctx, []byte("b-value"))
						got <- err
					}()
					require.Eventually(t, func() bool { return len(b.entries(t, r)) == 2 }, 20*time.Second, time.Millisecond)
					if by == "ctx" {
						bcancel()
						require.ErrorIs(t, <-got, topo.Interrupted)
						require.Len(t, b.entries(t, r), 1, "b's entry left after Campaign returned")
						return
					}
					require.NoError(t, lp.Resign(ctx))
					require.Len(t, b.entries(t, r), 1, "b's entry left after Resign returned")
					require.ErrorIs(t, <-got, topo.Interrupted)
				})
			}

			// Leader values seen by an observer (Observe, LeaderInfo)
			// while the master proclaims in a loop and then hands over:
			// every value is one its term's master proclaimed, a term's
			// values come in the order proclaimed, and tokens never go
			// back.
			t.Run("ProclaimOrderAcrossHandover", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				conn := b.open(t)
				a, err := conn.NewLeaderParticipation(r, "a")
				require.NoError(t, err)
				defer a.Stop()
				bp, err := b.open(t).NewLeaderParticipation(r, "b")
				require.NoError(t, err)
				defer bp.Stop()
				obs, err := b.open(t).NewLeaderParticipation(r, "obs")
				require.NoError(t, err)
				octx, ocancel := context.WithCancel(ctx)
				defer ocancel()
				leaders, err := obs.Observe(octx)
				require.NoError(t, err)
				_, err = a.Campaign(ctx, []byte("a-0"))
				require.NoError(t, err)
				const n = 30
				got := make(chan error, 1)
				go func() {
					_, err := bp.Campaign(ctx, []byte("b-0"))
					got <- err
				}()
				polls := make(chan []topo.Leader, 1)
				go func() {
					var ls []topo.Leader
					for octx.Err() == nil {
						l, err := obs.Leader(octx)
						if err == nil {
							ls = append(ls, l)
						}
					}
					polls <- ls
				}()
				for i := 1; i <= n; i++ {
					require.NoError(t, a.Proclaim(ctx, []byte(fmt.Sprintf("a-%d", i))))
				}
				require.NoError(t, a.Resign(ctx))
				require.NoError(t, <-got)
				for i := 1; i <= n; i++ {
					require.NoError(t, bp.Proclaim(ctx, []byte(fmt.Sprintf("b-%d", i))))
				}
				var seen []topo.Leader
				for l := range leaders {
					seen = append(seen, l)
					if string(l.Value) == fmt.Sprintf("b-%d", n) {
						break
					}
				}
				ocancel()
				for range leaders {
				}
				check := func(what string, ls []topo.Leader) {
					var tok int64
					idx := map[string]int{}
					for _, l := range ls {
						if l.ID == "" {
							continue
						}
						require.GreaterOrEqual(t, l.Token, tok, "%s: token went back: %v", what, ls)
						if l.Token > tok {
							tok = l.Token
						}
						var id string
						var i int
						_, err := fmt.Sscanf(string(l.Value), "%1s-%d", &id, &i)
						require.NoError(t, err, "%s: value %q", what, l.Value)
						require.Equal(t, l.ID, id, "%s: %s shown with a value of %s: %v", what, l.ID, id, ls)
						require.GreaterOrEqual(t, i, idx[id], "%s: an older value of %s after a newer", what, id)
						idx[id] = i
					}
				}
				check("Observe", seen)
				check("Leader", <-polls)
			})

			// Two Runners; the master's session or lease is ended behind
			// its back: its Work ends (LockLost), the other's Work runs,
			// the first campaigns again and leads once the other's Work
			// returns; both Runs end on their ctx and leave no entry.
			t.Run("RunnersAfterKill", func(t *testing.T) {
				if b.kill == nil {
					t.Skip("no way here to end this store's session behind the client (this check runs on etcd and Consul)")
				}
				ctx, r := ctxT(t), res()
				type start struct {
					id   string
					ctx  context.Context
					stop chan struct{}
				}
				starts := make(chan start, 16)
				run := func(id string) (func(), <-chan error) {
					e := advElection(t, ctx, b.open(t), r, id)
					rctx, cancel := context.WithCancel(ctx)
					done := make(chan error, 1)
					rn := &election.Runner{Election: e, InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
						Work: func(wctx context.Context) error {
							st := start{id, wctx, make(chan struct{})}
							starts <- st
							select {
							case <-wctx.Done():
							case <-st.stop:
							}
							return nil
						}}
					go func() { done <- rn.Run(rctx) }()
					return cancel, done
				}
				nextStart := func() start {
					select {
					case s := <-starts:
						return s
					case <-ctx.Done():
						t.Fatal("no Work started")
						return start{}
					}
				}
				cancelA, doneA := run("a")
				first := nextStart()
				cancelB, doneB := run("b")
				require.Eventually(t, func() bool { return len(b.entries(t, r)) >= 2 }, 20*time.Second, 10*time.Millisecond)
				b.kill(t, r)
				second := nextStart()
				require.NotEqual(t, first.id, second.id)
				<-first.ctx.Done()
				require.ErrorIs(t, context.Cause(first.ctx), topo.LockLost)
				require.Eventually(t, func() bool { return len(b.entries(t, r)) >= 2 }, 20*time.Second, 10*time.Millisecond, "the first Runner campaigns again")
				close(second.stop) // the second's Work returns: it resigns
				third := nextStart()
				require.Equal(t, first.id, third.id)
				requireDone(t, second.ctx.Done(), "the second's Work context")
				cancelA()
				cancelB()
				require.NoError(t, <-doneA)
				require.NoError(t, <-doneB)
				require.Empty(t, b.entries(t, r))
			})

			// A waiting candidate's session or lease is ended behind its
			// back, then the master resigns: the candidate never leads on
			// its dead entry; its Await returns LockLost (a transient
			// error) and when it awaits again it leads, on its Conn's new
			// session, with a greater token.
			t.Run("WaiterKilled", func(t *testing.T) {
				if b.killWaiter == nil {
					t.Skip("no way here to end only a waiter's session (this check runs on etcd and Consul)")
				}
				ctx, r := ctxT(t), res()
				a := advElection(t, ctx, b.open(t), r, "a")
				bb := advElection(t, ctx, b.open(t), r, "b")
				require.NoError(t, a.Await(ctx))
				fa, err := a.Term()
				require.NoError(t, err)
				got := make(chan error, 1)
				go func() { got <- bb.Await(ctx) }()
				require.Eventually(t, func() bool { return len(b.entries(t, r)) >= 2 }, 20*time.Second, 10*time.Millisecond)
				b.killWaiter(t, r)
				require.Eventually(t, func() bool { return len(b.entries(t, r)) == 1 }, 20*time.Second, 10*time.Millisecond)
				require.NoError(t, a.Resign(ctx))
				select {
				case err := <-got:
					require.ErrorIs(t, err, topo.LockLost)
				case <-ctx.Done():
					t.Fatal("b's Await never returned")
				}
				_, err = bb.Term()
				require.ErrorIs(t, err, topo.NotLeader)
				require.NoError(t, bb.Await(ctx))
				fb, err := bb.Term()
				require.NoError(t, err)
				require.Greater(t, fb.Token(), fa.Token())
			})

			// The leader's session or lease ended behind its back: its
			// mastership ends (LockLost), the other candidate leads with a
			// greater token, and the first leads again later on its Conn.
			t.Run("SessionKilled", func(t *testing.T) {
				if b.kill == nil {
					t.Skip("no way here to end this store's session behind the client (this check runs on etcd and Consul)")
				}
				ctx, r := ctxT(t), res()
				a := advElection(t, ctx, b.open(t), r, "a")
				bb := advElection(t, ctx, b.open(t), r, "b")
				require.NoError(t, a.Await(ctx))
				am, err := a.WithMastership(ctx)
				require.NoError(t, err)
				f1, err := a.Term()
				require.NoError(t, err)
				got := make(chan error, 1)
				go func() { got <- bb.Await(ctx) }()
				require.Eventually(t, func() bool { return len(b.entries(t, r)) >= 2 }, 20*time.Second, 10*time.Millisecond)
				b.kill(t, r)
				require.NoError(t, <-got)
				select {
				case <-am.Done():
				case <-ctx.Done():
					t.Fatal("a's mastership never ended")
				}
				require.ErrorIs(t, context.Cause(am), topo.LockLost)
				require.Error(t, f1.Check(ctx))
				f2, err := bb.Term()
				require.NoError(t, err)
				require.Greater(t, f2.Token(), f1.Token())
				_, err = a.Term()
				require.ErrorIs(t, err, topo.NotLeader)
				ga := make(chan error, 1)
				go func() { ga <- a.Await(ctx) }()
				require.Eventually(t, func() bool { return len(b.entries(t, r)) >= 2 }, 20*time.Second, 10*time.Millisecond)
				require.NoError(t, bb.Resign(ctx))
				require.NoError(t, <-ga)
				f3, err := a.Term()
				require.NoError(t, err)
				require.Greater(t, f3.Token(), f2.Token())
				require.NoError(t, a.Close(ctx))
				require.NoError(t, bb.Close(ctx))
				require.Eventually(t, func() bool { return len(b.entries(t, r)) == 0 }, 20*time.Second, 10*time.Millisecond, "entries left")
			})
		})
	}
}

// TestServerRestart: the store restarts (keeping its data) under a master,
// a waiting candidate and an observer: the observer's WatchLeader and
// Observe keep going; the next master leads only once the first's
// mastership has ended, with a greater token; the observer sees it.
func TestServerRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (open func(t *testing.T) topo.Conn, restart func())
	}{
		{"etcd", func(t *testing.T) (func(t *testing.T) topo.Conn, func()) {
			c := etcdtest.StartCluster(t, 1)
			open := func(t *testing.T) topo.Conn {
				conn, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{c.Addr(0)}}, "/adv")
				require.NoError(t, err)
				t.Cleanup(conn.Close)
				return conn
			}
			return open, func() { c.StopMember(0); c.RestartMember(0) }
		}},
		{"consul", func(t *testing.T) (func(t *testing.T) topo.Conn, func()) {
			a := consultest.StartAgentWithOptions(t, consultest.AgentOptions{Persistent: true})
			open := func(t *testing.T) topo.Conn {
				conn, err := consultopo.NewConn(consultopo.Options{Address: a.Addr(), MinSessionTTL: consultest.SessionTTLMin}, "adv")
				require.NoError(t, err)
				t.Cleanup(conn.Close)
				return conn
			}
			return open, func() { a.Restart(t) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open, restart := tc.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r := fmt.Sprintf("restart%d", time.Now().UnixNano())
			a := advElection(t, ctx, open(t), r, "a")
			bb := advElection(t, ctx, open(t), r, "b")
			obs := advElection(t, ctx, open(t), r, "obs")
			ids, err := obs.WatchLeader(ctx)
			require.NoError(t, err)
			leaders, err := obs.Observe(ctx)
			require.NoError(t, err)
			var seen []topo.Leader
			var mu sync.Mutex
			sawB := make(chan struct{})
			go func() {
				for l := range leaders {
					mu.Lock()
					seen = append(seen, l)
					mu.Unlock()
					if l.ID == "b" && sawB != nil {
						close(sawB)
						sawB = nil
					}
				}
			}()
			sawBCh := sawB
			require.NoError(t, a.Await(ctx))
			am, err := a.WithMastership(ctx)
			require.NoError(t, err)
			fa, err := a.Term()
			require.NoError(t, err)
			var aEndedFirst bool
			got := make(chan error, 1)
			go func() {
				err := bb.Await(ctx)
				for err != nil && !election.IsPermanent(err) && ctx.Err() == nil {
					err = bb.Await(ctx) // the store restarted as it campaigned
				}
				aEndedFirst = am.Err() != nil
				got <- err
			}()
			next := func() string {
				select {
				case id, ok := <-ids:
					require.True(t, ok)
					return id
				case <-ctx.Done():
					t.Fatal("no leader sent")
					return ""
				}
			}
			require.Equal(t, "a", next())
			restart()
			t.Logf("after the restart: a's mastership %v", context.Cause(am))
			_ = a.Resign(ctx)
			require.NoError(t, <-got)
			require.True(t, aEndedFirst, "b became master while a's mastership was live")
			fb, err := bb.Term()
			require.NoError(t, err)
			require.Greater(t, fb.Token(), fa.Token())
			for id := next(); id != "b"; id = next() {
				require.Equal(t, "a", id, "only a or b lead")
			}
			select {
			case <-sawBCh:
			case <-ctx.Done():
				mu.Lock()
				t.Fatalf("Observe never sent b: %v", seen)
			}
			mu.Lock()
			defer mu.Unlock()
			var last int64
			for _, l := range seen {
				if l.ID == "" {
					continue
				}
				require.GreaterOrEqual(t, l.Token, last, "Observe went back: %v", seen)
				last = l.Token
			}
			t.Logf("observed: %v", seen)
		})
	}
}

// recordConn is a Conn that keeps the participations it created.
type recordConn struct {
	topo.Conn
	mu  sync.Mutex
	lps []topo.LeaderParticipation
}

func (c *recordConn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	lp, err := c.Conn.NewLeaderParticipation(name, id)
	if err == nil {
		c.mu.Lock()
		c.lps = append(c.lps, lp)
		c.mu.Unlock()
	}
	return lp, err
}

// TestZooKeeperSessionExpired: the master's ZooKeeper session is expired by
// the server (zktest.ExpireSession with the session's id and password): its
// mastership ends with LockLost, the waiting candidate leads with a greater
// token, and the first leads again on its Conn's new session.
func TestZooKeeperSessionExpired(t *testing.T) {
	addr := zktest.Start(t)
	open := func(t *testing.T) topo.Conn {
		// A short session timeout: after the take-over, a's client may
		// wait for its read timeout (2/3 of it) before it reconnects and
		// learns of the expiry, and a's next candidacy waits with it.
		c, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}, SessionTimeout: 4 * time.Second}, "/adv")
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := fmt.Sprintf("exp%d", time.Now().UnixNano())
	rc := &recordConn{Conn: open(t)}
	a := advElection(t, ctx, rc, r, "a")
	bb := advElection(t, ctx, open(t), r, "b")
	obs := advElection(t, ctx, open(t), r, "obs")
	ids, err := obs.WatchLeader(ctx)
	require.NoError(t, err)
	next := func() string {
		select {
		case id, ok := <-ids:
			require.True(t, ok)
			return id
		case <-ctx.Done():
			t.Fatal("no leader sent")
			return ""
		}
	}
	require.NoError(t, a.Await(ctx))
	require.Equal(t, "a", next())
	am, err := a.WithMastership(ctx)
	require.NoError(t, err)
	fa, err := a.Term()
	require.NoError(t, err)
	got := make(chan error, 1)
	var aEndedFirst bool
	go func() {
		err := bb.Await(ctx)
		aEndedFirst = am.Err() != nil
		got <- err
	}()
	rc.mu.Lock()
	lp := rc.lps[len(rc.lps)-1]
	rc.mu.Unlock()
	info, err := lp.ResumeInfo()
	require.NoError(t, err)
	var ri struct {
		Session  int64  `json:"session"`
		Password []byte `json:"password"`
	}
	require.NoError(t, json.Unmarshal(info, &ri))
	t0 := time.Now()
	// The server may drop the take-over's connection unanswered (EOF):
	// try again until the session is gone.
	require.Eventually(t, func() bool {
		err := zktest.ExpireSession(addr, ri.Session, ri.Password)
		return err == nil || strings.Contains(err.Error(), "already expired")
	}, 20*time.Second, 50*time.Millisecond)
	t.Logf("expired after %v", time.Since(t0))
	require.NoError(t, <-got)
	t.Logf("b leads after %v", time.Since(t0))
	// The server told a's client at once here (the expiry is the server's
	// own act, not a cut link), so a learns of it too; b may lead before
	// a's callback ran: what must hold is the fence.
	select {
	case <-am.Done():
	case <-ctx.Done():
		t.Fatal("a's mastership never ended")
	}
	t.Logf("a's mastership had ended when b's Await returned: %v", aEndedFirst)
	require.ErrorIs(t, context.Cause(am), topo.LockLost)
	require.Error(t, fa.Check(ctx))
	fb, err := bb.Term()
	require.NoError(t, err)
	require.Greater(t, fb.Token(), fa.Token())
	require.Equal(t, "b", next())
	ga := make(chan error, 1)
	go func() { ga <- a.Await(ctx) }()
	require.NoError(t, bb.Resign(ctx))
	require.NoError(t, <-ga)
	t.Logf("a leads again after %v", time.Since(t0))
	fa2, err := a.Term()
	require.NoError(t, err)
	require.Greater(t, fa2.Token(), fb.Token())
	require.Equal(t, "a", next())
}
