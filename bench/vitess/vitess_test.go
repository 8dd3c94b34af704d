package vitessbench

// Each benchmark has one sub-benchmark per store (memory, etcd, zk,
// consul). An iteration runs the operation once through Vitess's Conn and
// once through topokit's (alternating which goes first, so that load from
// other processes hits both alike), each under its own root on the same
// server, and reports each side's median latency (vitess-p50-µs,
// topokit-p50-µs) and their ratio (topokit/vitess), and the ratio of their
// interquartile means (topokit/vitess-iqm, see iqm). Handover benchmarks
// measure from the holder's call of Unlock to the return of the waiter's
// Lock, on another Conn.
//
//	make bench-vitess    (or: cd bench/vitess && go test -run '^$' -bench . -benchtime 100x)

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vlog "vitess.io/vitess/go/vt/log"
	vtopo "vitess.io/vitess/go/vt/topo"
	vconsul "vitess.io/vitess/go/vt/topo/consultopo"
	vetcd "vitess.io/vitess/go/vt/topo/etcd2topo"
	vmemory "vitess.io/vitess/go/vt/topo/memorytopo"
	vzk "vitess.io/vitess/go/vt/topo/zk2topo"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// The servers, started by TestMain and shared by every benchmark (each
// uses roots of its own).
var etcdAddr, zkAddr, consulAddr string

// zkServer is the ZooKeeper server behind zkAddr (its JVM's CPU time counts
// in BenchmarkContention).
var zkServer *zktest.Server

// consulAgent is the Consul agent behind consulAddr (its CPU time counts in
// BenchmarkContention).
var consulAgent *consultest.Agent

var rootSeq atomic.Int64

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Vitess logs its connections and watch events at info level, on
	// stdout, where they would break the benchmark lines: warnings and
	// errors only, on stderr.
	vlog.SwapLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	addr, stopEtcd, err := etcdtest.Launch()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopEtcd()
	etcdAddr = addr
	zs, err := zktest.Launch()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer zs.Stop()
	zkAddr = zs.Addr()
	zkServer = zs
	agent, err := consultest.NewAgent()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer agent.Stop()
	consulAddr = agent.Addr()
	consulAgent = agent
	return m.Run()
}

// side is one library's Conn behind the operations the benchmarks use.
type side struct {
	get     func(ctx context.Context, p string) error
	create  func(ctx context.Context, p string, v []byte) error
	update  func(ctx context.Context, p string, v []byte) error // compare-and-set on the last version seen
	del     func(ctx context.Context, p string) error
	listDir func(ctx context.Context, p string) (int, error)
	lock    lockFunc
	tryLock lockFunc
	// lead joins election name as id and returns once leading, with the
	// function that stops the participation.
	lead func(ctx context.Context, name, id string) (stop func(), err error)
	// watch watches file p and returns a channel of the contents of its
	// changes (its first value skipped).
	watch func(ctx context.Context, p string) (<-chan []byte, error)
}

// changesOf forwards the contents of each change of a watch's channel
// (of either library's WatchData) until it closes.
func changesOf[T any](ch <-chan T, contents func(T) []byte) <-chan []byte {
	out := make(chan []byte, 16)
	go func() {
		defer close(out)
		for d := range ch {
			out <- contents(d)
		}
	}()
	return out
}

func vitessSide(c vtopo.Conn) *side {
	vers := map[string]vtopo.Version{}
	return &side{
		get: func(ctx context.Context, p string) error { _, _, err := c.Get(ctx, p); return err },
		create: func(ctx context.Context, p string, v []byte) error {
			ver, err := c.Create(ctx, p, v)
			vers[p] = ver
			return err
		},
		update: func(ctx context.Context, p string, v []byte) error {
			ver, err := c.Update(ctx, p, v, vers[p])
			vers[p] = ver
			return err
		},
		del: func(ctx context.Context, p string) error { return c.Delete(ctx, p, nil) },
		listDir: func(ctx context.Context, p string) (int, error) {
			e, err := c.ListDir(ctx, p, false)
			return len(e), err
		},
		lock: func(ctx context.Context, dir, contents string) (func(context.Context) error, error) {
			ld, err := c.Lock(ctx, dir, contents)
			if err != nil {
				return nil, err
			}
			return ld.Unlock, nil
		},
		tryLock: func(ctx context.Context, dir, contents string) (func(context.Context) error, error) {
			ld, err := c.TryLock(ctx, dir, contents)
			if err != nil {
				return nil, err
			}
			return ld.Unlock, nil
		},
		lead: func(ctx context.Context, name, id string) (func(), error) {
			p, err := c.NewLeaderParticipation(name, id)
			if err != nil {
				return nil, err
			}
			// Vitess's Stop must be called once: a second one panics.
			// On zk, a WaitForLeadership that failed (also when Stop
			// interrupted it with an error of its own) leaves Stop
			// blocked for good: it is not called then (the entry goes
			// with the session when the Conn closes).
			stopOnce := sync.OnceFunc(p.Stop)
			unwatch := context.AfterFunc(ctx, stopOnce)
			defer unwatch()
			if _, err := p.WaitForLeadership(); err != nil {
				return nil, err
			}
			return stopOnce, nil
		},
		watch: func(ctx context.Context, p string) (<-chan []byte, error) {
			_, ch, err := c.Watch(ctx, p)
			if err != nil {
				return nil, err
			}
			return changesOf(ch, func(d *vtopo.WatchData) []byte { return d.Contents }), nil
		},
	}
}

func topokitSide(c topo.Conn) *side {
	vers := map[string]topo.Version{}
	return &side{
		get: func(ctx context.Context, p string) error { _, _, err := c.Get(ctx, p); return err },
		create: func(ctx context.Context, p string, v []byte) error {
			ver, err := c.Create(ctx, p, v)
			vers[p] = ver
			return err
		},
		update: func(ctx context.Context, p string, v []byte) error {
			ver, err := c.Update(ctx, p, v, vers[p])
			vers[p] = ver
			return err
		},
		del: func(ctx context.Context, p string) error { return c.Delete(ctx, p, nil) },
		listDir: func(ctx context.Context, p string) (int, error) {
			e, err := c.ListDir(ctx, p, false)
			return len(e), err
		},
		lock: func(ctx context.Context, dir, contents string) (func(context.Context) error, error) {
			ld, err := c.Lock(ctx, dir, contents)
			if err != nil {
				return nil, err
			}
			return ld.Unlock, nil
		},
		tryLock: func(ctx context.Context, dir, contents string) (func(context.Context) error, error) {
			ld, err := c.TryLock(ctx, dir, contents)
			if err != nil {
				return nil, err
			}
			return ld.Unlock, nil
		},
		lead: func(ctx context.Context, name, id string) (func(), error) {
			p, err := c.NewLeaderParticipation(name, id)
			if err != nil {
				return nil, err
			}
			// Vitess's Stop must be called once: a second one panics.
			stopOnce := sync.OnceFunc(p.Stop)
			unwatch := context.AfterFunc(ctx, stopOnce)
			defer unwatch()
			if _, err := p.WaitForLeadership(); err != nil {
				stopOnce()
				return nil, err
			}
			return stopOnce, nil
		},
		watch: func(ctx context.Context, p string) (<-chan []byte, error) {
			_, ch, err := c.Watch(ctx, p)
			if err != nil {
				return nil, err
			}
			return changesOf(ch, func(d *topo.WatchData) []byte { return d.Contents }), nil
		},
	}
}

// store opens Conns of both libraries on one store.
type store struct {
	name string
	// open returns n Conns of Vitess and n of topokit, each library's
	// under one fresh root of its own, closed at the end of b.
	open func(b *testing.B, n int) (vt, tk []*side)
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

func stores() []store {
	return []store{
		{"memory", func(b *testing.B, n int) (vt, tk []*side) {
			_, vf := vmemory.NewServerAndFactory(context.Background(), "zone1")
			tf := memorytopo.NewFactory()
			for range n {
				v, err := vf.Create("zone1", "", "")
				must(b, err)
				b.Cleanup(v.Close)
				t, err := tf.Create("zone1", "", "/zone1")
				must(b, err)
				b.Cleanup(t.Close)
				vt, tk = append(vt, vitessSide(v)), append(tk, topokitSide(t))
			}
			return vt, tk
		}},
		{"etcd", func(b *testing.B, n int) (vt, tk []*side) {
			seq := rootSeq.Add(1)
			for range n {
				v, err := vetcd.NewServer(etcdAddr, fmt.Sprintf("/vtb%d-vitess", seq))
				must(b, err)
				b.Cleanup(v.Close)
				t, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{etcdAddr}}, fmt.Sprintf("/vtb%d-topokit", seq))
				must(b, err)
				b.Cleanup(t.Close)
				vt, tk = append(vt, vitessSide(v)), append(tk, topokitSide(t))
			}
			return vt, tk
		}},
		{"zk", func(b *testing.B, n int) (vt, tk []*side) {
			seq := rootSeq.Add(1)
			for range n {
				v := vzk.NewServer(zkAddr, fmt.Sprintf("/vtb%d-vitess", seq))
				b.Cleanup(v.Close)
				t, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{zkAddr}}, fmt.Sprintf("/vtb%d-topokit", seq))
				must(b, err)
				b.Cleanup(t.Close)
				vt, tk = append(vt, vitessSide(v)), append(tk, topokitSide(t))
			}
			return vt, tk
		}},
		{"consul", func(b *testing.B, n int) (vt, tk []*side) {
			seq := rootSeq.Add(1)
			for range n {
				v, err := vconsul.NewServer("zone1", consulAddr, fmt.Sprintf("vtb%d-vitess", seq))
				must(b, err)
				b.Cleanup(v.Close)
				t, err := consultopo.NewConn(consultopo.Options{Address: consulAddr}, fmt.Sprintf("vtb%d-topokit", seq))
				must(b, err)
				b.Cleanup(t.Close)
				vt, tk = append(vt, vitessSide(v)), append(tk, topokitSide(t))
			}
			return vt, tk
		}},
	}
}

func p50(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// iqm is the mean of the middle half of ds (their interquartile mean):
// robust to outliers like the median, but not limited to the clock's
// steps (a p50 of the sub-microsecond rows moves in steps of 10 ns,
// about 0.03 of their ratio).
func iqm(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	s = s[len(s)/4 : len(s)-len(s)/4]
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return float64(sum) / float64(len(s))
}

func report(b *testing.B, vt, tk []time.Duration) {
	b.Helper()
	v, t := p50(vt), p50(tk)
	b.ReportMetric(float64(v.Nanoseconds())/1e3, "vitess-p50-µs")
	b.ReportMetric(float64(t.Nanoseconds())/1e3, "topokit-p50-µs")
	if v > 0 {
		b.ReportMetric(float64(t)/float64(v), "topokit/vitess")
	}
	if len(vt) >= 4 && len(tk) >= 4 {
		b.ReportMetric(iqm(tk)/iqm(vt), "topokit/vitess-iqm")
	}
}

// paired runs op on both sides once per iteration, alternating which goes
// first, after a warm-up, and reports the p50s.
func paired(b *testing.B, vt, tk *side, op func(s *side, i int) error) {
	b.Helper()
	for i := range 10 {
		must(b, op(vt, -1-i))
		must(b, op(tk, -1-i))
	}
	var vts, tks []time.Duration
	timed := func(s *side, i int, into *[]time.Duration) {
		t0 := time.Now()
		err := op(s, i)
		*into = append(*into, time.Since(t0))
		must(b, err)
	}
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			timed(vt, i, &vts)
			timed(tk, i, &tks)
		} else {
			timed(tk, i, &tks)
			timed(vt, i, &vts)
		}
		i++
	}
	report(b, vts, tks)
}

// each runs f as one sub-benchmark per store.
func each(b *testing.B, f func(b *testing.B, s store)) {
	for _, s := range stores() {
		b.Run(s.name, func(b *testing.B) { f(b, s) })
	}
}

func BenchmarkGet(b *testing.B) {
	each(b, func(b *testing.B, s store) {
		vt, tk := s.open(b, 1)
		ctx := context.Background()
		for _, c := range []*side{vt[0], tk[0]} {
			must(b, c.create(ctx, "keyspaces/ks/Keyspace", []byte("a value of a typical size, like a keyspace record")))
		}
		paired(b, vt[0], tk[0], func(c *side, _ int) error { return c.get(ctx, "keyspaces/ks/Keyspace") })
	})
}

// BenchmarkGet10000: Get of one file of a store holding 10,000 files
// (memory only: a store whose cost per Get grows with its size shows
// here).
func BenchmarkGet10000(b *testing.B) {
	const files = 10000
	s := stores()[0]
	vt, tk := s.open(b, 1)
	ctx := context.Background()
	for _, c := range []*side{vt[0], tk[0]} {
		for i := range files {
			must(b, c.create(ctx, fmt.Sprintf("keyspaces/ks%d/shards/%d/Shard", i/100, i%100), []byte("a shard record")))
		}
	}
	i := 0
	paired(b, vt[0], tk[0], func(c *side, _ int) error {
		i++
		return c.get(ctx, fmt.Sprintf("keyspaces/ks%d/shards/%d/Shard", i%100, (i/2)%100))
	})
}

func BenchmarkUpdateCAS(b *testing.B) {
	each(b, func(b *testing.B, s store) {
		vt, tk := s.open(b, 1)
		ctx := context.Background()
		for _, c := range []*side{vt[0], tk[0]} {
			must(b, c.create(ctx, "d/f", []byte("x")))
		}
		paired(b, vt[0], tk[0], func(c *side, i int) error {
			return c.update(ctx, "d/f", fmt.Appendf(nil, "value %d", i))
		})
	})
}

func BenchmarkCreateDelete(b *testing.B) {
	each(b, func(b *testing.B, s store) {
		vt, tk := s.open(b, 1)
		ctx := context.Background()
		// The directory keeps another file, as in a real topology.
		for _, c := range []*side{vt[0], tk[0]} {
			must(b, c.create(ctx, "d/sibling", []byte("x")))
		}
		paired(b, vt[0], tk[0], func(c *side, i int) error {
			p := fmt.Sprintf("d/f%d", i)
			if err := c.create(ctx, p, []byte("v")); err != nil {
				return err
			}
			return c.del(ctx, p)
		})
	})
}

// listDirEntries is the size of the directory BenchmarkListDir lists.
const listDirEntries = 1000

func BenchmarkListDir1000(b *testing.B) {
	each(b, func(b *testing.B, s store) {
		vt, tk := s.open(b, 1)
		ctx := context.Background()
		for _, c := range []*side{vt[0], tk[0]} {
			for i := range listDirEntries {
				must(b, c.create(ctx, fmt.Sprintf("d/f%04d", i), []byte("v")))
			}
		}
		paired(b, vt[0], tk[0], func(c *side, _ int) error {
			n, err := c.listDir(ctx, "d")
			if err == nil && n != listDirEntries {
				err = fmt.Errorf("ListDir: %d entries", n)
			}
			return err
		})
	})
}

func BenchmarkLockUnlock(b *testing.B) {
	each(b, func(b *testing.B, s store) {
		lockUnlock(b, s, func(c *side) lockFunc { return c.lock })
	})
}

// lockFunc is side.lock or side.tryLock.
type lockFunc = func(ctx context.Context, dir, contents string) (unlock func(context.Context) error, err error)

// lockUnlock runs, paired, an uncontended lock taken by the method pick
// chooses of each side, and its Unlock.
func lockUnlock(b *testing.B, s store, pick func(*side) lockFunc) {
	vt, tk := s.open(b, 1)
	ctx := context.Background()
	for _, c := range []*side{vt[0], tk[0]} {
		must(b, c.create(ctx, "d/f", []byte("x")))
	}
	paired(b, vt[0], tk[0], func(c *side, _ int) error {
		unlock, err := pick(c)(ctx, "d", "holder")
		if err != nil {
			return err
		}
		return unlock(ctx)
	})
}

// BenchmarkTryLockUnlock: an uncontended TryLock and its Unlock (memory
// only).
func BenchmarkTryLockUnlock(b *testing.B) {
	lockUnlock(b, stores()[0], func(c *side) lockFunc { return c.tryLock })
}

// handoverDelays are how long the waiter waits before the holder
// releases, cycled through.
var handoverDelays = []time.Duration{2 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond}

// handover runs one handover from holder to waiter and returns how long
// after the holder's Unlock was called the waiter's Lock returned (from
// the call, not its return: a waiter may see the release before the
// holder sees the store's answer).
func handover(b *testing.B, holder, waiter *side, delay time.Duration) time.Duration {
	b.Helper()
	ctx := context.Background()
	unlock, err := holder.lock(ctx, "d", "holder")
	must(b, err)
	type res struct {
		at     time.Time
		unlock func(context.Context) error
		err    error
	}
	got := make(chan res, 1)
	go func() {
		u, err := waiter.lock(ctx, "d", "waiter")
		got <- res{time.Now(), u, err}
	}()
	time.Sleep(delay)
	t0 := time.Now()
	must(b, unlock(ctx))
	r := <-got
	must(b, r.err)
	must(b, r.unlock(ctx))
	return r.at.Sub(t0)
}

func BenchmarkLockHandover(b *testing.B) {
	each(b, func(b *testing.B, s store) {
		vt, tk := s.open(b, 2)
		ctx := context.Background()
		for _, c := range []*side{vt[0], tk[0]} {
			must(b, c.create(ctx, "d/f", []byte("x")))
		}
		var vts, tks []time.Duration
		i := 0
		for b.Loop() {
			d := handoverDelays[i%len(handoverDelays)]
			if i%2 == 0 {
				vts = append(vts, handover(b, vt[0], vt[1], d))
				tks = append(tks, handover(b, tk[0], tk[1], d))
			} else {
				tks = append(tks, handover(b, tk[0], tk[1], d))
				vts = append(vts, handover(b, vt[0], vt[1], d))
			}
			i++
		}
		report(b, vts, tks)
	})
}

// BenchmarkElection is an uncontended election: one participant joins,
// leads and stops, per iteration (memory only: it is the unit-test store).
func BenchmarkElection(b *testing.B) {
	s := stores()[0]
	vt, tk := s.open(b, 1)
	ctx := context.Background()
	i := 0
	paired(b, vt[0], tk[0], func(c *side, _ int) error {
		i++
		stop, err := c.lead(ctx, "e", fmt.Sprintf("c%d", i))
		if err != nil {
			return err
		}
		stop()
		return nil
	})
}

// BenchmarkWatchFanout: one change of a file reaching 1,000 watchers of
// it, per iteration, from the Update call until the last watcher has it
// (memory only).
func BenchmarkWatchFanout(b *testing.B) {
	const watchers = 1000
	s := stores()[0]
	vt, tk := s.open(b, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type fan struct {
		side *side
		got  sync.WaitGroup
		want atomic.Pointer[string]
	}
	start := func(c *side) *fan {
		f := &fan{side: c}
		must(b, c.create(ctx, "w", []byte("0")))
		for range watchers {
			ch, err := c.watch(ctx, "w")
			must(b, err)
			go func() {
				for v := range ch {
					if w := f.want.Load(); w != nil && string(v) == *w {
						f.got.Done()
					}
				}
			}()
		}
		return f
	}
	fans := []*fan{start(vt[0]), start(tk[0])}
	n := 0
	paired(b, vt[0], tk[0], func(c *side, _ int) error {
		f := fans[0]
		if c == tk[0] {
			f = fans[1]
		}
		n++
		v := strconv.Itoa(n)
		f.got.Add(watchers)
		f.want.Store(&v)
		if err := c.update(ctx, "w", []byte(v)); err != nil {
			return err
		}
		f.got.Wait()
		return nil
	})
}
