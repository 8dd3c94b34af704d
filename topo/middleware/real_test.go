package middleware_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/attribute"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/middleware"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// realStore is one backend on a real server (or memorytopo) for the
// middleware tests.
type realStore struct {
	impl string
	addr string
	// factory returns a configured factory for the store at the given
	// address (the test's address, or a proxy's in front of it).
	factory func() topo.Factory
	root    func(name string) string
}

func etcdStore(t *testing.T) realStore {
	return realStore{impl: etcd2topo.FactoryName, addr: etcdtest.Start(t),
		factory: func() topo.Factory { return etcd2topo.Factory{} },
		root:    func(n string) string { return "/mw/" + n }}
}

func zkStore(t *testing.T) realStore {
	return realStore{impl: zk2topo.FactoryName, addr: zktest.Start(t),
		factory: func() topo.Factory {
			return zk2topo.Factory{Options: zk2topo.Options{SessionTimeout: 10 * time.Second}}
		},
		root: func(n string) string { return "/mw/" + n }}
}

func consulStore(t *testing.T) realStore {
	return realStore{impl: consultopo.FactoryName, addr: consultest.Start(t),
		factory: func() topo.Factory { return consultopo.NewFactory(consultopo.Options{SessionTTL: 20 * time.Second}) },
		root:    func(n string) string { return "mw/" + n }}
}

func memoryStore(*testing.T) realStore {
	f := memorytopo.NewFactory()
	return realStore{impl: "memory", addr: "mem",
		factory: func() topo.Factory { return f },
		root:    func(n string) string { return "/mw/" + n }}
}

func TestMiddlewareOnEtcd(t *testing.T)      { testMiddlewareReal(t, etcdStore(t)) }
func TestMiddlewareOnZooKeeper(t *testing.T) { testMiddlewareReal(t, zkStore(t)) }
func TestMiddlewareOnConsul(t *testing.T)    { testMiddlewareReal(t, consulStore(t)) }
func TestMiddlewareOnMemory(t *testing.T)    { testMiddlewareReal(t, memoryStore(t)) }

// snapshot is what an undecorated Conn sees of a cell: every file with its
// version, and the top-level directory names (where lock and election
// entries would appear).
func snapshot(t *testing.T, ctx context.Context, c topo.Conn, dirs ...string) []string {
	t.Helper()
	kvs, err := c.List(ctx, "")
	if !topo.IsErrType(err, topo.NoNode) {
		require.NoError(t, err)
	}
	var out []string
	for _, kv := range kvs {
		out = append(out, kv.Path+"@"+kv.Version.String())
	}
	for _, d := range dirs {
		entries, err := c.ListDir(ctx, d, true)
		if topo.IsErrType(err, topo.NoNode) {
			out = append(out, d+"/: none")
			continue
		}
		require.NoError(t, err, d)
		for _, e := range entries {
			out = append(out, d+"/"+e.Name)
		}
	}
	return out
}

// testMiddlewareReal runs a Server decorated with metrics, tracing, a
// read-only switch and a read limit against a real store, as an operator
// wires them: every mutating call of the Conn, its locks, elections,
// semaphores and transactions is refused in read-only mode on the global
// cell, on a cell opened before and on a cell opened after the switch,
// and nothing reaches the store; reads, watches and releases work; the
// metrics carry no path label and the spans record the refusals.
func testMiddlewareReal(t *testing.T, s realStore) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	m, reg := registeredMetrics(t, middleware.MetricsOptions{})
	exp, tp := memoryTracer(t)
	var ro middleware.ReadOnly

	ts, err := topo.OpenServerContext(ctx, s.impl, s.addr, s.root("global"), topo.WithFactory(s.factory()),
		topo.WithMiddleware(m.Middleware(), middleware.Tracing(tp), ro.Middleware(), middleware.ReadLimit(4)))
	require.NoError(t, err)
	defer ts.Close()
	for _, cell := range []string{"zone1", "zone2"} {
		require.NoError(t, ts.CreateCellInfo(ctx, cell, &topodatapb.CellInfo{ServerAddress: s.addr, Root: s.root(cell)}))
	}
	rawConn := func(cell string) topo.Conn {
		c, err := s.factory().Create(cell, s.addr, s.root(cell))
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}

	g := ts.GlobalCell()
	z1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)

	// State made before the switch: a file, a held lock, a leader (through
	// WaitForLeadership), a leader with a value (through Campaign), and a
	// participant that has not campaigned yet.
	type cellState struct {
		name    string
		conn    func() topo.Conn
		v       topo.Version
		lock    topo.LockDescriptor
		leader  topo.LeaderParticipation
		valued  topo.LeaderParticipation
		idle    topo.LeaderParticipation
		resumed []byte
	}
	prepare := func(name string, c topo.Conn) *cellState {
		st := &cellState{name: name, conn: func() topo.Conn { return c }}
		st.v, err = c.Create(ctx, "d/f", []byte("before"))
		require.NoError(t, err)
		_, err = c.Create(ctx, "held/f", []byte("before"))
		require.NoError(t, err)
		st.lock, err = c.Lock(ctx, "held", "before the switch")
		require.NoError(t, err)
		st.leader, err = c.NewLeaderParticipation("e1", "leader")
		require.NoError(t, err)
		_, err = st.leader.WaitForLeadership()
		require.NoError(t, err)
		st.valued, err = c.NewLeaderParticipation("e2", "valued")
		require.NoError(t, err)
		_, err = st.valued.Campaign(ctx, []byte("v1"))
		require.NoError(t, err)
		st.resumed, err = st.valued.ResumeInfo()
		require.NoError(t, err)
		st.idle, err = c.NewLeaderParticipation("e1", "idle")
		require.NoError(t, err)
		return st
	}
	states := []*cellState{prepare(topo.GlobalCell, g), prepare("zone1", z1)}
	require.NoError(t, ts.CreateCellsAlias(ctx, "west", &topodatapb.CellsAlias{Cells: []string{"zone2"}}))
	dirs := []string{"d", "held", "x", "sem", "semw"}
	before := map[string][]string{}
	raws := map[string]topo.Conn{}
	for _, cell := range []string{topo.GlobalCell, "zone1", "zone2"} {
		raws[cell] = rawConn(cell)
		before[cell] = snapshot(t, ctx, raws[cell], dirs...)
	}

	ro.Set(true)
	z2, err := ts.ConnForCell(ctx, "zone2") // opened after the switch
	require.NoError(t, err)
	states = append(states, &cellState{name: "zone2", conn: func() topo.Conn { return z2 }})

	for _, st := range states {
		c := st.conn()
		refused := func(what string, err error) {
			t.Helper()
			require.ErrorIsf(t, err, topo.ReadOnly, "%s: %s in read-only mode", st.name, what)
		}
		_, err := c.Create(ctx, "d/g", []byte("x"))
		refused("Create", err)
		_, err = c.Update(ctx, "d/f", []byte("x"), st.v)
		refused("Update with a version", err)
		_, err = c.Update(ctx, "d/f", []byte("x"), nil)
		refused("Update", err)
		refused("Delete", c.Delete(ctx, "d/f", nil))
		_, err = c.Txn(ctx, topo.IfAbsent("d/none"), topo.CreateOp("d/t", []byte("x")))
		refused("Txn", err)
		for name, lock := range map[string]func() (topo.LockDescriptor, error){
			"Lock":        func() (topo.LockDescriptor, error) { return c.Lock(ctx, "x", "") },
			"LockWithTTL": func() (topo.LockDescriptor, error) { return c.LockWithTTL(ctx, "x", "", 30*time.Second) },
			"LockName":    func() (topo.LockDescriptor, error) { return c.LockName(ctx, "x", "") },
			"TryLock":     func() (topo.LockDescriptor, error) { return c.TryLock(ctx, "x", "") },
		} {
			ld, err := lock()
			require.Nilf(t, ld, "%s: %s", st.name, name)
			refused(name, err)
		}
		sem, err := semaphore.New(c, "sem", 2, semaphore.Options{})
		require.NoError(t, err)
		_, err = sem.TryAcquire(ctx)
		refused("semaphore TryAcquire", err)
		_, err = sem.Acquire(ctx)
		refused("semaphore Acquire", err)

		// An observer of an election works: joining it does not.
		p, err := c.NewLeaderParticipation("e1", "observer")
		require.NoErrorf(t, err, "%s: a participation that only observes writes nothing", st.name)
		_, err = p.WaitForLeadership()
		refused("WaitForLeadership", err)
		_, err = p.Campaign(ctx, []byte("x"))
		refused("Campaign", err)
		ef, err := election.NewTopoFactory(c, "observer")
		require.NoError(t, err)
		e, err := ef.NewTopoElection(ctx, "e3")
		require.NoErrorf(t, err, "%s: an election handle that only observes", st.name)
		refused("election Await", e.Await(ctx))

		if st.lock == nil {
			continue
		}
		id, err := p.GetCurrentLeaderID(ctx)
		require.NoError(t, err)
		require.Equal(t, "leader", id, "%s: the leader is read through an observer", st.name)
		l, err := p.Leader(ctx)
		require.NoError(t, err)
		require.Equal(t, "leader", l.ID)
		_, err = st.idle.WaitForLeadership()
		refused("WaitForLeadership of a participant made before the switch", err)
		refused("Proclaim", st.valued.Proclaim(ctx, []byte("v2")))
		_, err = st.valued.Campaign(ctx, []byte("v2"))
		refused("Campaign of the leader", err)
		_, err = c.ResumeLeaderParticipation(ctx, "e2", "valued", st.resumed)
		refused("ResumeLeaderParticipation", err)
		_, err = topo.GuardedUpdate(ctx, c, st.lock, "d/f", []byte("x"), nil)
		refused("GuardedUpdate", err)
		refused("GuardedDelete", topo.GuardedDelete(ctx, c, st.lock, "d/f", nil))

		// Reads and watches work.
		data, _, err := c.Get(ctx, "d/f")
		require.NoError(t, err)
		require.Equal(t, "before", string(data))
		_, err = c.ListDir(ctx, "d", false)
		require.NoError(t, err)
		_, err = c.List(ctx, "d/")
		require.NoError(t, err)
		wctx, wcancel := context.WithCancel(ctx)
		cur, ch, err := c.Watch(wctx, "d/f")
		require.NoError(t, err)
		require.Equal(t, "before", string(cur.Contents))
		wcancel()
		for range ch {
		}
	}

	// The Server's own writes of CellInfo and alias records are refused
	// too, at once (no retry loop spins on ReadOnly).
	require.ErrorIs(t, ts.CreateCellInfo(ctx, "zone3", &topodatapb.CellInfo{ServerAddress: s.addr, Root: s.root("zone3")}), topo.ReadOnly)
	require.ErrorIs(t, ts.UpdateCellInfoFields(ctx, "zone1", func(ci *topodatapb.CellInfo) error {
		ci.Root = s.root("moved")
		return nil
	}), topo.ReadOnly)
	require.ErrorIs(t, ts.DeleteCellInfo(ctx, "zone2"), topo.ReadOnly)
	require.ErrorIs(t, ts.CreateCellsAlias(ctx, "east", &topodatapb.CellsAlias{Cells: []string{"zone1"}}), topo.ReadOnly)
	require.ErrorIs(t, ts.UpdateCellsAlias(ctx, "west", func(ca *topodatapb.CellsAlias) error {
		ca.Cells = append(ca.Cells, "zone1")
		return nil
	}), topo.ReadOnly)
	require.ErrorIs(t, ts.DeleteCellsAlias(ctx, "west"), topo.ReadOnly)
	alias, err := ts.GetAliasForCell(ctx, "zone2")
	require.NoError(t, err, "alias reads work")
	require.Equal(t, "west", alias)
	cellNames, err := ts.GetCellInfoNames(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"zone1", "zone2"}, cellNames)

	// Nothing reached any store.
	for cell, want := range before {
		require.Equalf(t, want, snapshot(t, ctx, raws[cell], dirs...), "cell %s after the refused calls", cell)
	}

	// Releases work in read-only mode.
	for _, st := range states[:2] {
		require.NoError(t, st.lock.Check(ctx))
		require.NoError(t, st.lock.Unlock(ctx))
		require.NoError(t, st.valued.Resign(ctx))
		st.leader.Stop()
		st.idle.Stop()
	}
	ro.Set(false)
	_, err = z2.Create(ctx, "d/g", []byte("after"))
	require.NoError(t, err)

	// Metrics: by backend, cell, op and code; never by path.
	// zone2 refused the Create and the two semaphore contenders' info files.
	require.Equal(t, 3.0, counter(t, reg, "topo_calls_total", map[string]string{"backend": s.impl, "cell": "zone2", "op": "Create", "code": "ReadOnly"}))
	require.Equal(t, 1.0, counter(t, reg, "topo_calls_total", map[string]string{"backend": s.impl, "cell": "zone2", "op": "Create", "code": "OK"}))
	require.GreaterOrEqual(t, counter(t, reg, "topo_calls_total", map[string]string{"backend": s.impl, "cell": "zone1", "op": "LockWithTTL", "code": "ReadOnly"}), 1.0)
	require.Equal(t, 0.0, gauge(t, reg, "topo_locks_held", map[string]string{"backend": s.impl, "cell": "global"}))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	allowed := []string{"backend", "cell", "op", "code", "end", "election"}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				require.Containsf(t, allowed, lp.GetName(), "%s has a label %s", mf.GetName(), lp.GetName())
				if lp.GetName() != "election" {
					require.NotContainsf(t, []string{"d/f", "d/g", "held", "x", "sem", "d"}, lp.GetValue(),
						"%s{%s} holds a path", mf.GetName(), lp.GetName())
				}
			}
		}
	}

	// Spans: the refusals are errors with their code, on the cell and path.
	var found bool
	for _, sp := range exp.GetSpans() {
		if sp.Name == "topo.LockName" && slices.Contains(sp.Attributes, attribute.String("topo.cell", "zone2")) {
			found = true
			require.Equal(t, "Error", sp.Status.Code.String())
			require.Contains(t, sp.Attributes, attribute.String("topo.code", "ReadOnly"))
			require.Contains(t, sp.Attributes, attribute.String("topo.path", "x"))
			require.Contains(t, sp.Attributes, attribute.String("topo.backend", s.impl))
		}
	}
	require.True(t, found, "a span of zone2's refused LockName")
}

func TestReadLimitOnEtcd(t *testing.T)      { testReadLimitReal(t, etcdStore(t)) }
func TestReadLimitOnZooKeeper(t *testing.T) { testReadLimitReal(t, zkStore(t)) }
func TestReadLimitOnConsul(t *testing.T)    { testReadLimitReal(t, consulStore(t)) }

// testReadLimitReal holds the only read slot of a cell with a read stuck
// in a partition (a proxy blackholing the store), and checks that the
// next reads wait for the slot honouring their contexts, never reaching
// the store, while writes are not limited by it.
func testReadLimitReal(t *testing.T, s realStore) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	p, err := faultproxy.New(s.addr)
	require.NoError(t, err)
	defer func() { _ = p.Close() }()
	var reached atomic.Int64
	entered := make(chan struct{}, 16)
	probe := middleware.Middleware(func(topo.ConnInfo) middleware.Hooks {
		return middleware.Hooks{Around: func(ctx context.Context, c middleware.Call, next func(context.Context) error) error {
			if c.Op.IsRead() {
				reached.Add(1)
				entered <- struct{}{}
			}
			return next(ctx)
		}}
	})
	ts, err := topo.OpenServerContext(ctx, s.impl, p.Addr(), s.root("global"), topo.WithFactory(s.factory()),
		topo.WithMiddleware(middleware.ReadLimit(1), probe))
	require.NoError(t, err)
	defer ts.Close()
	c := ts.GlobalCell()
	_, err = c.Create(ctx, "f", []byte("1"))
	require.NoError(t, err)
	reached.Store(0)

	p.Blackhole()
	stuckCtx, unstick := context.WithCancel(ctx)
	stuck := make(chan error, 1)
	go func() {
		_, _, err := c.Get(stuckCtx, "f")
		stuck <- err
	}()
	<-entered // the stuck read holds the slot

	short, scancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer scancel()
	_, _, err = c.Get(short, "f")
	require.ErrorIs(t, err, topo.Timeout, "a read waiting for a slot past its deadline")
	cctx, ccancel := context.WithCancel(ctx)
	ccancel()
	_, err = c.ListDir(cctx, "", false)
	require.ErrorIs(t, err, topo.Interrupted, "a read waiting for a slot with a cancelled context")
	require.Equal(t, int64(1), reached.Load(), "only the stuck read reached the store")

	unstick()
	require.Error(t, <-stuck)
	p.Heal()
	data, _, err := c.Get(ctx, "f")
	require.NoError(t, err, "the slot is free again")
	require.Equal(t, "1", string(data))
}

// On etcd, a lock whose lease is revoked behind the holder's back stops
// being counted as held once the backend closes its Done, without the
// holder calling Check or Unlock.
func TestMetricsLockLostOnEtcd(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	addr := etcdtest.Start(t)
	m, reg := registeredMetrics(t, middleware.MetricsOptions{})
	ts, err := topo.OpenServerContext(ctx, etcd2topo.FactoryName, addr, "/lost", topo.WithMiddleware(m.Middleware()))
	require.NoError(t, err)
	defer ts.Close()
	c := ts.GlobalCell()
	_, err = c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "revoked")
	require.NoError(t, err)
	// An Unlock that did not release it (its ctx was cancelled) does not
	// end it for the metrics: its loss later does.
	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	require.ErrorIs(t, l.Unlock(cancelled), topo.Interrupted)
	labels := map[string]string{"backend": etcd2topo.FactoryName, "cell": topo.GlobalCell}
	require.Equal(t, 1.0, gauge(t, reg, "topo_locks_held", labels))

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer cli.Close()
	resp, err := cli.Get(ctx, "/lost/d/locks/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "the lock's entry")
	_, err = cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	require.NoError(t, err)

	<-l.Done()
	// The hook lowers the gauge, then observes the hold time.
	require.Eventually(t, func() bool {
		v := find(t, reg, "topo_lock_hold_seconds", map[string]string{"end": "LockLost"})
		return len(v) == 1 && v[0] == 1
	}, 10*time.Second, 5*time.Millisecond, "the end of a lock lost with its lease is not reported")
	require.Equal(t, 0.0, gauge(t, reg, "topo_locks_held", labels), "a lock lost with its lease is still counted as held")
	require.Equal(t, uint64(1), histCount(t, reg, "topo_lock_hold_seconds", map[string]string{"end": "LockLost"}))
}

// A read cache (topo/cache) over a decorated Conn keeps the backend's
// revision barrier: a Consistent Get is answered from memory (a Hit), with
// the store revision the barrier read, as over the undecorated Conn;
// without it every Consistent Get read through (a Miss). ZooKeeper has
// no barrier: the decorated Conn reads through as the raw one does.
func TestCacheBarrierThroughMiddlewareOnEtcd(t *testing.T) {
	testCacheBarrierThroughMiddleware(t, etcdStore(t), true)
}
func TestCacheBarrierThroughMiddlewareOnMemory(t *testing.T) {
	testCacheBarrierThroughMiddleware(t, memoryStore(t), true)
}
func TestCacheBarrierThroughMiddlewareOnZooKeeper(t *testing.T) {
	testCacheBarrierThroughMiddleware(t, zkStore(t), false)
}

func testCacheBarrierThroughMiddleware(t *testing.T, st realStore, barrier bool) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	m, _ := registeredMetrics(t, middleware.MetricsOptions{})
	var watchEnds atomic.Int32
	ends := middleware.Middleware(func(topo.ConnInfo) middleware.Hooks {
		return middleware.Hooks{OnWatchEnd: func(middleware.Call, error) { watchEnds.Add(1) }}
	})
	ts, err := topo.OpenServerContext(ctx, st.impl, st.addr, st.root("cachebarrier"), topo.WithFactory(st.factory()),
		topo.WithMiddleware(m.Middleware(), ends))
	require.NoError(t, err)
	defer ts.Close()
	conn := ts.GlobalCell()
	_, err = conn.Create(ctx, "c/f", []byte("v1"))
	require.NoError(t, err)

	var mu sync.Mutex
	var outcomes []cache.Outcome
	c, err := cache.New(conn, "c/", cache.Options{LeaveConnOpen: true, Hooks: cache.Hooks{OnRead: func(_ string, o cache.Outcome) {
		mu.Lock()
		outcomes = append(outcomes, o)
		mu.Unlock()
	}}})
	require.NoError(t, err)
	_, err = conn.Update(ctx, "c/f", []byte("v2"), nil)
	require.NoError(t, err)
	b, _, info, err := c.GetWithInfo(cache.WithMode(ctx, cache.Consistent), "c/f")
	require.NoError(t, err)
	require.Equal(t, "v2", string(b), "a Consistent Get reflects the write before it")
	mu.Lock()
	got := slices.Clone(outcomes)
	mu.Unlock()
	if barrier {
		require.Equal(t, []cache.Outcome{cache.Hit}, got, "a Consistent Get over a decorated %s Conn reads through: the revision barrier was lost", st.impl)
		if st.impl == etcd2topo.FactoryName {
			require.NotZero(t, info.Revision, "the barrier's revision")
		}
	} else {
		require.Equal(t, []cache.Outcome{cache.Miss}, got, "without a barrier a Consistent Get reads through")
	}
	c.Close()
	require.Eventually(t, func() bool { return watchEnds.Load() == 1 }, 10*time.Second, time.Millisecond,
		"the cache's store watch ends through the decorators")
}

// A claim taken through a decorated Conn guards a transaction made through
// the decorated Conn and through the raw one alike (IfHeld finds the
// backend's own descriptor behind the decorator), a claim taken through the
// raw Conn guards one made through the decorated Conn, and once released
// both refuse with the same *topo.TxnError (Index 0, LockLost).
func TestIfHeldThroughMiddlewareOnEtcd(t *testing.T) { testIfHeldThroughMiddleware(t, etcdStore(t)) }
func TestIfHeldThroughMiddlewareOnZooKeeper(t *testing.T) {
	testIfHeldThroughMiddleware(t, zkStore(t))
}
func TestIfHeldThroughMiddlewareOnConsul(t *testing.T) {
	testIfHeldThroughMiddleware(t, consulStore(t))
}

func testIfHeldThroughMiddleware(t *testing.T, st realStore) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	m, _ := registeredMetrics(t, middleware.MetricsOptions{})
	raw, err := st.factory().Create(topo.GlobalCell, st.addr, st.root("ifheld"))
	require.NoError(t, err)
	defer raw.Close()
	dec := topo.Decorate(topo.ConnInfo{Implementation: st.impl, Cell: topo.GlobalCell}, raw,
		m.Middleware(), middleware.Logging(slog.New(slog.DiscardHandler)))
	_, err = dec.Create(ctx, "d/f", []byte("v0"))
	require.NoError(t, err)

	lockedDec, err := dec.Lock(ctx, "d", "through the decorator")
	require.NoError(t, err)
	for name, c := range map[string]topo.Conn{"decorated": dec, "raw": raw} {
		_, err = c.Txn(ctx, topo.IfHeld(lockedDec), topo.UpdateOp("d/f", []byte(name), nil))
		require.NoErrorf(t, err, "IfHeld(a decorated lock) through the %s Conn", name)
		_, err = topo.GuardedUpdate(ctx, c, lockedDec, "d/f", []byte(name), nil)
		require.NoErrorf(t, err, "GuardedUpdate(a decorated lock) through the %s Conn", name)
	}
	require.NoError(t, lockedDec.Unlock(ctx))
	for name, c := range map[string]topo.Conn{"decorated": dec, "raw": raw} {
		_, err = c.Txn(ctx, topo.IfHeld(lockedDec), topo.UpdateOp("d/f", []byte("late"), nil))
		var te *topo.TxnError
		require.Truef(t, errors.As(err, &te), "%s: %v", name, err)
		require.Equal(t, 0, te.Index)
		require.ErrorIsf(t, err, topo.LockLost, "%s", name)
		_, err = topo.GuardedUpdate(ctx, c, lockedDec, "d/f", []byte("late"), nil)
		require.ErrorIsf(t, err, topo.LockLost, "%s: GuardedUpdate", name)
	}

	lockedRaw, err := raw.Lock(ctx, "d", "through the raw Conn")
	require.NoError(t, err)
	_, err = dec.Txn(ctx, topo.IfHeld(lockedRaw), topo.UpdateOp("d/f", []byte("raw lock"), nil))
	require.NoError(t, err)
	require.NoError(t, lockedRaw.Unlock(ctx))
	_, err = dec.Txn(ctx, topo.IfHeld(lockedRaw), topo.UpdateOp("d/f", []byte("late"), nil))
	require.ErrorIs(t, err, topo.LockLost)
	b, _, err := raw.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "raw lock", string(b), "no refused write landed")
}
