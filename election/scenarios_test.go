package election_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/election"
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

// advBackend opens Conns on one real store (memorytopo in process).
type advBackend struct {
	name string
	// bound is how long the store keeps a cut-off Conn's session.
	bound time.Duration
	start func(t *testing.T) (open func(t *testing.T) topo.Conn, openCut func(t *testing.T) (topo.Conn, func(), func()))
}

func advBackends() []advBackend {
	return []advBackend{
		{"memory", 2 * time.Second, func(t *testing.T) (func(t *testing.T) topo.Conn, func(t *testing.T) (topo.Conn, func(), func())) {
			mf := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: 2 * time.Second})
			open := func(t *testing.T) topo.Conn {
				c, err := mf.NewConn("", "/adv")
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			}
			return open, func(t *testing.T) (topo.Conn, func(), func()) {
				c, err := mf.NewConn("", "/adv")
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c, c.Partition, c.Heal
			}
		}},
		{"etcd", 2 * time.Second, func(t *testing.T) (func(t *testing.T) topo.Conn, func(t *testing.T) (topo.Conn, func(), func())) {
			addr := etcdtest.Start(t)
			open := func(t *testing.T) topo.Conn {
				c, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{addr}}, "/adv")
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			}
			return open, func(t *testing.T) (topo.Conn, func(), func()) {
				p, err := faultproxy.New(addr)
				require.NoError(t, err)
				t.Cleanup(func() { _ = p.Close() })
				c, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{p.Addr()}, LockTTL: 2 * time.Second}, "/adv")
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c, p.Blackhole, p.Heal
			}
		}},
		{"zookeeper", 4 * time.Second, func(t *testing.T) (func(t *testing.T) topo.Conn, func(t *testing.T) (topo.Conn, func(), func())) {
			addr := zktest.Start(t)
			open := func(t *testing.T) topo.Conn {
				c, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}}, "/adv")
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			}
			return open, func(t *testing.T) (topo.Conn, func(), func()) {
				p, err := faultproxy.New(addr)
				require.NoError(t, err)
				t.Cleanup(func() { _ = p.Close() })
				c, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{p.Addr()}, SessionTimeout: 4 * time.Second}, "/adv")
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c, p.Blackhole, p.Heal
			}
		}},
		{"consul", 12 * time.Second, func(t *testing.T) (func(t *testing.T) topo.Conn, func(t *testing.T) (topo.Conn, func(), func())) {
			addr := consultest.Start(t)
			open := func(t *testing.T) topo.Conn {
				c, err := consultopo.NewConn(consultopo.Options{Address: addr, MinSessionTTL: consultest.SessionTTLMin}, "adv")
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			}
			return open, func(t *testing.T) (topo.Conn, func(), func()) {
				p, err := faultproxy.New(addr)
				require.NoError(t, err)
				t.Cleanup(func() { _ = p.Close() })
				c, err := consultopo.NewConn(consultopo.Options{Address: p.Addr(), SessionTTL: 4 * time.Second, MinSessionTTL: consultest.SessionTTLMin}, "adv")
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c, p.Blackhole, p.Heal
			}
		}},
	}
}

var advSeq atomic.Int64

func advElection(t *testing.T, ctx context.Context, conn topo.Conn, res, id string) *election.TopoElection {
	t.Helper()
	e, err := topoFactory(t, conn, id).NewTopoElection(ctx, res)
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.Close(cctx)
	})
	return e
}

// TestScenarios runs, on every backend's real store, scenarios the
// harness does not: Close or Resign of a waiting candidate, two Awaits of
// one Election with one abandoned, many Elections on one Conn, the Conn
// closed mid-campaign or while master, Leader and LeaderInfo once the
// leader's session ended, and Proclaim racing Resign (a value is never
// attributed to another instance's term).
func TestScenarios(t *testing.T) {
	for _, b := range advBackends() {
		t.Run(b.name, func(t *testing.T) {
			open, openCut := b.start(t)
			res := func() string { return fmt.Sprintf("r%d-%d", time.Now().UnixNano(), advSeq.Add(1)) }
			ctxT := func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				t.Cleanup(cancel)
				return ctx
			}

			t.Run("CloseWhileAwaiting", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				a := advElection(t, ctx, open(t), r, "a")
				bw := watched(open(t))
				bb := advElection(t, ctx, bw, r, "b")
				require.NoError(t, a.Await(ctx))
				got := make(chan error, 1)
				go func() { got <- bb.Await(ctx) }()
				waitCampaign(t, ctx, bw)
				require.NoError(t, bb.Close(ctx))
				err := <-got
				require.ErrorIs(t, err, topo.Interrupted, "b's Await after b's Close")
				require.NoError(t, a.Resign(ctx))
				c := advElection(t, ctx, open(t), r, "c")
				require.NoError(t, c.Await(ctx))
				id, err := c.Leader(ctx)
				require.NoError(t, err)
				require.Equal(t, "c", id)
			})

			t.Run("ResignWhileAwaiting", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				a := advElection(t, ctx, open(t), r, "a")
				bw := watched(open(t))
				bb := advElection(t, ctx, bw, r, "b")
				require.NoError(t, a.Await(ctx))
				got := make(chan error, 1)
				go func() { got <- bb.Await(ctx) }()
				waitCampaign(t, ctx, bw)
				require.NoError(t, bb.Resign(ctx))
				require.ErrorIs(t, <-got, topo.Interrupted, "b's Await after b's Resign")
				require.NoError(t, a.Resign(ctx))
				require.NoError(t, bb.Await(ctx), "b campaigns again after its Resign")
			})

			t.Run("TwoAwaitsOneCancelled", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				a := advElection(t, ctx, open(t), r, "a")
				bw := watched(open(t))
				bb := advElection(t, ctx, bw, r, "b")
				require.NoError(t, a.Await(ctx))
				cctx, cancel := context.WithCancel(ctx)
				got1, got2 := make(chan error, 1), make(chan error, 1)
				go func() { got1 <- bb.Await(cctx) }()
				go func() { got2 <- bb.Await(ctx) }()
				waitCampaign(t, ctx, bw)
				cancel()
				require.ErrorIs(t, <-got1, topo.Interrupted)
				require.NoError(t, a.Resign(ctx))
				require.NoError(t, <-got2, "the other Await goes on")
			})

			t.Run("ManyOnOneConn", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				conn := open(t)
				var inside, most atomic.Int64
				var last atomic.Int64
				var wg sync.WaitGroup
				errs := make(chan error, 20)
				for i := range 4 {
					e := advElection(t, ctx, conn, r, fmt.Sprintf("i%d", i))
					wg.Go(func() {
						for range 4 {
							if err := e.Await(ctx); err != nil {
								errs <- err
								return
							}
							n := inside.Add(1)
							for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
							}
							f, err := e.Term()
							if err != nil {
								errs <- err
								return
							}
							if tok := f.Token(); tok <= last.Load() {
								errs <- fmt.Errorf("token %d not above %d", tok, last.Load())
							} else {
								last.Store(tok)
							}
							if _, err := topo.GuardedUpdate(ctx, conn, f, r+"-data", []byte(e.InstanceID()), nil); err != nil {
								errs <- err
							}
							inside.Add(-1)
							if err := e.Resign(ctx); err != nil {
								errs <- err
								return
							}
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				require.EqualValues(t, 1, most.Load(), "masters at once")
			})

			t.Run("LeaderAfterLeaderSessionEnded", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				cutConn, cut, heal := openCut(t)
				t.Cleanup(heal)
				a := advElection(t, ctx, cutConn, r, "a")
				obs := advElection(t, ctx, open(t), r, "obs")
				require.NoError(t, a.Await(ctx))
				require.NoError(t, a.Proclaim(ctx, []byte("va")))
				mctx, err := a.WithMastership(ctx)
				require.NoError(t, err)
				octx, ocancel := context.WithTimeout(ctx, b.bound+30*time.Second)
				defer ocancel()
				leaders, err := obs.Observe(octx)
				require.NoError(t, err)
				require.Equal(t, "a", (<-leaders).ID)
				cut()
				<-mctx.Done()
				for l := range leaders {
					if l.ID == "" {
						break
					}
					require.Equal(t, "a", l.ID)
				}
				require.NoError(t, octx.Err(), "Observe never reported that nobody leads after the leader was cut off")
				ocancel()
				for range leaders {
				}
				id, err := obs.Leader(ctx)
				require.NoError(t, err)
				require.Equal(t, "", id, "Leader once the leader's session ended")
				_, err = obs.LeaderInfo(ctx)
				require.ErrorIs(t, err, topo.NoLeader, "LeaderInfo once the leader's session ended")
			})

			t.Run("ConnClosedMidCampaign", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				a := advElection(t, ctx, open(t), r, "a")
				bconn := open(t)
				bw := watched(bconn)
				bb := advElection(t, ctx, bw, r, "b")
				require.NoError(t, a.Await(ctx))
				got := make(chan error, 1)
				go func() { got <- bb.Await(ctx) }()
				waitCampaign(t, ctx, bw)
				bconn.Close()
				err := <-got
				require.ErrorIs(t, err, topo.Closed, "b's Await after b's Conn closed: %v", err)
				require.True(t, election.IsPermanent(err))
				require.ErrorIs(t, bb.Await(ctx), topo.Closed, "Await again on a closed Conn")
				require.NoError(t, a.Resign(ctx))
				id, err := a.Leader(ctx)
				require.NoError(t, err)
				require.Equal(t, "", id, "leader after a resigned and b's Conn closed")
			})

			t.Run("ConnClosedWhileMaster", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				aconn := open(t)
				a := advElection(t, ctx, aconn, r, "a")
				bb := advElection(t, ctx, open(t), r, "b")
				require.NoError(t, a.Await(ctx))
				mctx, err := a.WithMastership(ctx)
				require.NoError(t, err)
				f, err := a.Term()
				require.NoError(t, err)
				got := make(chan error, 1)
				go func() { got <- bb.Await(ctx) }()
				aconn.Close()
				<-mctx.Done()
				<-f.Done()
				require.NoError(t, <-got)
				_, err = a.Term()
				require.Error(t, err)
				err = a.Await(ctx)
				require.ErrorIs(t, err, topo.Closed, "Await after the master's Conn closed: %v", err)
			})

			t.Run("ErrorCodes", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				a := advElection(t, ctx, open(t), r, "a")
				require.ErrorIs(t, a.Proclaim(ctx, []byte("x")), topo.NotLeader, "Proclaim before Await")
				_, err := a.Term()
				require.ErrorIs(t, err, topo.NotLeader, "Term before Await")
				_, err = a.LeaderInfo(ctx)
				require.ErrorIs(t, err, topo.NoLeader, "LeaderInfo with nobody master")
				require.NoError(t, a.Resign(ctx), "Resign with nothing to resign")
				require.NoError(t, a.Await(ctx))
				require.NoError(t, a.Proclaim(ctx, []byte("x")))
				li, err := a.LeaderInfo(ctx)
				require.NoError(t, err)
				f, err := a.Term()
				require.NoError(t, err)
				require.Equal(t, topo.Leader{ID: "a", Value: []byte("x"), Token: f.Token()}, li)
				require.NoError(t, a.Close(ctx))
				require.NoError(t, a.Close(ctx), "a second Close")
				require.ErrorIs(t, a.Await(ctx), topo.Closed)
				require.ErrorIs(t, a.Resign(ctx), topo.Closed)
				require.ErrorIs(t, a.Proclaim(ctx, []byte("y")), topo.Closed)
				_, err = a.Term()
				require.ErrorIs(t, err, topo.Closed)
				mctx, err := a.WithMastership(ctx)
				require.ErrorIs(t, err, topo.Closed)
				require.Error(t, mctx.Err())
				requireDone(t, f.Done(), "the term after Close")
				id, err := a.Leader(ctx)
				require.NoError(t, err)
				require.Equal(t, "", id, "Leader after the master's Close")
			})

			t.Run("ProclaimRacesResign", func(t *testing.T) {
				ctx, r := ctxT(t), res()
				a := advElection(t, ctx, open(t), r, "a")
				bb := advElection(t, ctx, open(t), r, "b")
				obs := advElection(t, ctx, open(t), r, "obs")
				octx, ocancel := context.WithCancel(ctx)
				defer ocancel()
				ch, err := obs.Observe(octx)
				require.NoError(t, err)
				var evs []topo.Leader
				var evMu sync.Mutex
				obsDone := make(chan struct{})
				go func() {
					defer close(obsDone)
					for l := range ch {
						evMu.Lock()
						evs = append(evs, l)
						evMu.Unlock()
					}
				}()
				for round := range 5 {
					require.NoError(t, a.Await(ctx))
					bch := make(chan error, 1)
					go func() { bch <- bb.Await(ctx) }()
					var wg sync.WaitGroup
					wg.Go(func() {
						for i := 0; ; i++ {
							if err := a.Proclaim(ctx, fmt.Appendf(nil, "a-%d-%d", round, i)); err != nil {
								return
							}
						}
					})
					require.NoError(t, a.Resign(ctx))
					wg.Wait()
					require.NoError(t, <-bch)
					require.NoError(t, bb.Proclaim(ctx, fmt.Appendf(nil, "b-%d", round)))
					li, err := obs.LeaderInfo(ctx)
					require.NoError(t, err)
					require.Equal(t, "b", li.ID)
					require.Equal(t, fmt.Sprintf("b-%d", round), string(li.Value))
					require.NoError(t, bb.Resign(ctx))
				}
				ocancel()
				<-obsDone
				for _, l := range evs {
					if l.ID != "" && len(l.Value) > 0 {
						require.Equalf(t, l.ID, string(l.Value[:1]), "value %q attributed to %s (token %d)", l.Value, l.ID, l.Token)
					}
				}
			})
		})
	}
}

// campaignConn is a Conn that reports each campaign on it: a send on
// campaigning when WaitForLeadership is called (the Election's candidacy
// exists then).
type campaignConn struct {
	*hookConn
	campaigning chan string
}

// watched wraps conn so that each campaign on it is reported.
func watched(conn topo.Conn) *campaignConn {
	c := &campaignConn{campaigning: make(chan string, 16)}
	c.hookConn = &hookConn{Conn: conn, onWait: func() { c.campaigning <- "campaign" }}
	return c
}

// waitCampaign waits until a campaign on c has started.
func waitCampaign(t *testing.T, ctx context.Context, c *campaignConn) {
	t.Helper()
	select {
	case <-c.campaigning:
	case <-ctx.Done():
		t.Fatal("no campaign started")
	}
}

func requireDone(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	default:
		t.Fatalf("%s: not done", what)
	}
}

// TestObserveAcrossCompactionOnEtcd: an Observe that runs while the
// leader changes and etcd compacts its history (physically) keeps
// reporting each new leader, and its tokens never go back.
func TestObserveAcrossCompactionOnEtcd(t *testing.T) {
	addr := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func() *etcd2topo.Conn {
		c, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{addr}}, "/adv-compact")
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	r := fmt.Sprintf("r%d", time.Now().UnixNano())
	oc := open()
	obs := advElection(t, ctx, oc, r, "obs")
	leaders, err := obs.Observe(ctx)
	require.NoError(t, err)
	require.Equal(t, "", (<-leaders).ID)
	a := advElection(t, ctx, open(), r, "a")
	bb := advElection(t, ctx, open(), r, "b")
	var last int64
	next := func(id string) {
		t.Helper()
		for l := range leaders {
			if l.ID != "" {
				require.GreaterOrEqual(t, l.Token, last, "tokens go back: %+v", l)
				last = l.Token
			}
			if l.ID == id {
				return
			}
		}
		t.Fatalf("Observe closed before %s led", id)
	}
	for round := range 4 {
		e, id := a, "a"
		if round%2 == 1 {
			e, id = bb, "b"
		}
		require.NoError(t, e.Await(ctx))
		require.NoError(t, e.Proclaim(ctx, []byte(id)))
		// Churn and compact while the observer waits.
		for i := range 20 {
			_, err := oc.Client().Put(ctx, fmt.Sprintf("/adv-compact/churn/%d", i), "x")
			require.NoError(t, err)
		}
		resp, err := oc.Client().Get(ctx, "/adv-compact/churn/0")
		require.NoError(t, err)
		_, err = oc.Client().Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical())
		require.NoError(t, err)
		next(id)
		require.NoError(t, e.Resign(ctx))
	}
}

// TestRunnerAcrossPartition: a Runner whose Conn is cut off ends its
// term (Work's context is cancelled) before another Runner's Work starts,
// and after the partition heals it becomes master again once the other
// stops; the two Works never overlap.
func TestRunnerAcrossPartition(t *testing.T) {
	for _, b := range advBackends() {
		t.Run(b.name, func(t *testing.T) {
			open, openCut := b.start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r := fmt.Sprintf("r%d", time.Now().UnixNano())
			cutConn, cut, heal := openCut(t)
			t.Cleanup(heal)
			var mu sync.Mutex
			var overlaps []string
			current := map[string]context.Context{}
			started := map[string]chan struct{}{"a": make(chan struct{}, 8), "b": make(chan struct{}, 8)}
			work := func(id string) func(context.Context) error {
				return func(wctx context.Context) error {
					mu.Lock()
					for other, octx := range current {
						if other != id && octx.Err() == nil {
							overlaps = append(overlaps, fmt.Sprintf("%s's Work started while %s's term was live", id, other))
						}
					}
					current[id] = wctx
					mu.Unlock()
					started[id] <- struct{}{}
					<-wctx.Done()
					return nil
				}
			}
			run := func(conn topo.Conn, id string) (stop func()) {
				e := advElection(t, ctx, conn, r, id)
				rctx, rcancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() {
					done <- (&election.Runner{Election: e, Work: work(id), InitialBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}).Run(rctx)
				}()
				return func() {
					rcancel()
					require.NoError(t, <-done)
				}
			}
			stopA := run(cutConn, "a")
			defer stopA()
			<-started["a"]
			stopB := run(open(t), "b")
			cut()
			select {
			case <-started["b"]:
			case <-ctx.Done():
				t.Fatal("b never became master after a was cut off")
			}
			heal()
			stopB()
			select {
			case <-started["a"]:
			case <-ctx.Done():
				t.Fatal("a never became master again after the partition healed and b stopped")
			}
			mu.Lock()
			defer mu.Unlock()
			require.Empty(t, overlaps)
		})
	}
}

// heldConn is a Conn whose leadership contexts run the callbacks
// registered on them (context.AfterFunc) only once release is closed, so
// that a test sees the moment between a term's end and those callbacks.
type heldConn struct {
	topo.Conn
	release chan struct{}
	lctx    chan context.Context
}

func (c *heldConn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	lp, err := c.Conn.NewLeaderParticipation(name, id)
	if err != nil {
		return nil, err
	}
	return &heldLP{LeaderParticipation: lp, c: c}, nil
}

type heldLP struct {
	topo.LeaderParticipation
	c *heldConn
}

func (p *heldLP) WaitForLeadership() (context.Context, error) {
	ctx, err := p.LeaderParticipation.WaitForLeadership()
	if err != nil {
		return ctx, err
	}
	h := &heldCtx{Context: ctx, done: make(chan struct{}), release: p.c.release}
	context.AfterFunc(ctx, func() { close(h.done) })
	p.c.lctx <- h
	return h, nil
}

// heldCtx is a leadership context whose Done channel is its own (so that
// the context package schedules callbacks through AfterFunc below) and
// whose callbacks wait for release.
type heldCtx struct {
	context.Context
	done    chan struct{}
	release <-chan struct{}
}

func (h *heldCtx) Done() <-chan struct{} { return h.done }

func (h *heldCtx) Err() error {
	select {
	case <-h.done:
		return h.Context.Err()
	default:
		return nil
	}
}

func (h *heldCtx) AfterFunc(f func()) func() bool {
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		select {
		case <-h.done:
		case <-stop:
			return
		}
		select {
		case <-h.release:
			f()
		case <-stop:
		}
	}()
	return func() bool {
		stopped := false
		once.Do(func() { close(stop); stopped = true })
		return stopped
	}
}

// TestMastershipAfterTermEnded: once the leadership context of a term is
// done, WithMastership hands out only done contexts and Await does not
// report mastership, even before the callbacks registered on that context
// have run (they are held back here). Before, both answered from state
// those callbacks update, and for that moment an instance whose term had
// ended could act as master beside the next one.
func TestMastershipAfterTermEnded(t *testing.T) {
	for _, b := range advBackends()[:2] {
		t.Run(b.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, openCut := b.start(t)
			conn, cut, heal := openCut(t)
			hc := &heldConn{Conn: conn, release: make(chan struct{}), lctx: make(chan context.Context, 4)}
			defer close(hc.release)
			e := advElection(t, ctx, hc, "held-"+strconv.FormatInt(advSeq.Add(1), 10), "a")
			require.NoError(t, e.Await(ctx))
			lctx := <-hc.lctx
			mctx, err := e.WithMastership(ctx)
			require.NoError(t, err)
			require.NoError(t, mctx.Err())

			cut() // the session lapses: the term ends
			defer heal()
			select {
			case <-lctx.Done():
			case <-ctx.Done():
				t.Fatal("the term did not end")
			}
			late, err := e.WithMastership(ctx)
			require.NoError(t, err)
			require.Error(t, late.Err(), "a mastership context handed out after the term ended")
			require.Error(t, mctx.Err(), "the term's mastership context")
			actx, acancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer acancel()
			require.Error(t, e.Await(actx), "Await reported mastership of an ended term")
		})
	}
}
