package memorytopo_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// BenchmarkUpdateThroughput measures compare-and-set Updates (each with the
// version the previous one returned) from 1 goroutine and from 16, each
// goroutine on a file of its own, reporting ops/s: writes serialise on the
// store, but 16 writers must not fall below one (no collapse under
// contention).
func BenchmarkUpdateThroughput(b *testing.B) {
	ctx := context.Background()
	f := memorytopo.NewFactory()
	c, err := f.NewConn("bench", "/root")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	value := []byte("a shard record of a typical size, some tens of bytes")
	newFile := func(i int64) (string, topo.Version) {
		p := fmt.Sprintf("keyspaces/ks%d/shards/0/Shard", i)
		v, err := c.Update(ctx, p, value, nil)
		if err != nil {
			b.Fatal(err)
		}
		return p, v
	}
	b.Run("goroutines=1", func(b *testing.B) {
		p, v := newFile(0)
		b.ReportAllocs()
		cpu0 := cpuTime(b)
		for b.Loop() {
			var err error
			if v, err = c.Update(ctx, p, value, v); err != nil {
				b.Fatal(err)
			}
		}
		report(b, cpu0)
	})
	b.Run("goroutines=16", func(b *testing.B) {
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((16 + procs - 1) / procs) // >= 16 goroutines
		var next atomic.Int64
		b.ReportAllocs()
		cpu0 := cpuTime(b)
		b.RunParallel(func(pb *testing.PB) {
			p, v := newFile(next.Add(1))
			for pb.Next() {
				var err error
				if v, err = c.Update(ctx, p, value, v); err != nil {
					b.Error(err)
					return
				}
			}
		})
		report(b, cpu0)
	})

	// The reference: the same writes into a map behind one sync.Mutex
	// (a version check, a copy of the value, a new version), to tell the
	// cost of contending on one mutex on this machine from the store's own.
	ref := &refStore{m: map[string]refFile{}}
	b.Run("reference=mutex/goroutines=1", func(b *testing.B) {
		cpu0 := cpuTime(b)
		v := ref.update("f", value, 0)
		for b.Loop() {
			v = ref.update("f", value, v)
		}
		report(b, cpu0)
	})
	b.Run("reference=mutex/goroutines=16", func(b *testing.B) {
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((16 + procs - 1) / procs)
		var next atomic.Int64
		cpu0 := cpuTime(b)
		b.RunParallel(func(pb *testing.PB) {
			p := fmt.Sprint("f", next.Add(1))
			v := ref.update(p, value, 0)
			for pb.Next() {
				v = ref.update(p, value, v)
			}
		})
		report(b, cpu0)
	})
}

type refFile struct {
	value   []byte
	version int64
}

// refStore is BenchmarkUpdateThroughput's reference.
type refStore struct {
	mu  sync.Mutex
	rev int64
	m   map[string]refFile
}

// update writes value at p if its version is want (0: any) and returns
// the new version, or -1 when the version differs.
func (s *refStore) update(p string, value []byte, want int64) int64 {
	v := slices.Clone(value)
	s.mu.Lock()
	defer s.mu.Unlock()
	if want != 0 && s.m[p].version != want {
		return -1
	}
	s.rev++
	s.m[p] = refFile{v, s.rev}
	return s.rev
}

// BenchmarkGetAllocs is Get of one file from one goroutine, with its
// allocations.
func BenchmarkGetAllocs(b *testing.B) {
	ctx := context.Background()
	f := memorytopo.NewFactory()
	c, err := f.NewConn("bench", "/root")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const p = "keyspaces/ks/shards/0/Shard"
	if _, err := c.Create(ctx, p, []byte("shard record")); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		if _, _, err := c.Get(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	report(b, cpu0)
}

// BenchmarkGetScattered is Get from one goroutine over 10,000 files in a
// pseudo-random order, so that most reads miss the CPU caches.
func BenchmarkGetScattered(b *testing.B) {
	ctx := context.Background()
	f := memorytopo.NewFactory()
	c, err := f.NewConn("bench", "/root")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const files = 10000
	paths := make([]string, files)
	for i := range paths {
		paths[i] = fmt.Sprintf("keyspaces/ks%d/shards/0/Shard", i)
		if _, err := c.Create(ctx, paths[i], []byte("shard record")); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	i := 0
	for b.Loop() {
		i = (i + 7919) % files // a prime stride: every file, out of order
		if _, _, err := c.Get(ctx, paths[i]); err != nil {
			b.Fatal(err)
		}
	}
	report(b, cpu0)
}

// BenchmarkGuardedUpdate compares, from one goroutine on one file, a
// plain compare-and-set Update, topo.GuardedUpdate (a transaction of
// IfHeld and a compare-and-set UpdateOp, under a held lock), and a
// transaction of the same size without a lock (IfPresent of the file and
// the UpdateOp). memorytopo has no round trip, so the ratio shows the
// transaction's own cost (its checks and the store's write lock).
func BenchmarkGuardedUpdate(b *testing.B) {
	ctx := context.Background()
	f := memorytopo.NewFactory()
	c, err := f.NewConn("bench", "/root")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	value := []byte("a shard record of a typical size, some tens of bytes")
	const p = "keyspaces/ks/shards/0/Shard"
	v, err := c.Create(ctx, p, value)
	if err != nil {
		b.Fatal(err)
	}
	ld, err := c.Lock(ctx, "keyspaces/ks", "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ld.Unlock(ctx) }()
	b.Run("op=cas-update", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if v, err = c.Update(ctx, p, value, v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("op=guarded-update", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if v, err = topo.GuardedUpdate(ctx, c, ld, p, value, v); err != nil {
				b.Fatal(err)
			}
		}
	})
	// op=paired alternates batches of CAS Updates and GuardedUpdates in
	// one loop and reports each one's median time per op and their ratio,
	// so that load from other processes hits both alike.
	b.Run("op=paired", func(b *testing.B) {
		const batch = 64
		var cas, guarded []time.Duration
		i := 0
		for b.Loop() {
			t0 := time.Now()
			if i%2 == 0 {
				for range batch {
					if v, err = c.Update(ctx, p, value, v); err != nil {
						b.Fatal(err)
					}
				}
				cas = append(cas, time.Since(t0))
			} else {
				for range batch {
					if v, err = topo.GuardedUpdate(ctx, c, ld, p, value, v); err != nil {
						b.Fatal(err)
					}
				}
				guarded = append(guarded, time.Since(t0))
			}
			i++
		}
		med := func(ds []time.Duration) float64 {
			if len(ds) == 0 {
				return 0
			}
			slices.Sort(ds)
			return float64(ds[len(ds)/2].Nanoseconds()) / batch
		}
		mc, mg := med(cas), med(guarded)
		b.ReportMetric(mc, "cas-p50-ns")
		b.ReportMetric(mg, "guarded-p50-ns")
		if mc > 0 {
			b.ReportMetric(mg/mc, "guarded/cas")
		}
	})
	b.Run("op=txn-same-shape", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			vs, err := c.Txn(ctx, topo.IfPresent(p), topo.UpdateOp(p, value, v))
			if err != nil {
				b.Fatal(err)
			}
			v = vs[1]
		}
	})
}
