package memorytopo_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/topokit/topokit/topo/memorytopo"
)

// BenchmarkGet measures Get of distinct files from 1 goroutine and from 16
// goroutines, reporting ops/s so that the two can be compared in one run:
// reads do not serialise, so 16 goroutines reach at least the throughput of
// one (about GOMAXPROCS times it, when the CPUs are free).
//
// The reference/ sub-benchmarks run the same access pattern against a map
// behind one sync.Mutex (how a store serialising reads behaves) so that the
// ratio can be judged on a busy machine: with the Linux scheduler's
// autogroups, a process's extra threads may get no extra CPU while other
// sessions keep the CPUs busy, which lowers every 16-goroutine figure.
func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	f := memorytopo.NewFactory()
	c, err := f.NewConn("bench", "/root")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const files = 64
	paths := make([]string, files)
	for i := range paths {
		paths[i] = fmt.Sprintf("keyspaces/ks%d/shards/0/Shard", i)
		if _, err := c.Create(ctx, paths[i], []byte("shard record")); err != nil {
			b.Fatal(err)
		}
	}

	benchmarkParallel(b, paths, func(p string) error {
		_, _, err := c.Get(ctx, p)
		return err
	})

	ref := &mutexStore{m: map[string][]byte{}}
	for _, p := range paths {
		ref.m[p] = []byte("shard record")
	}
	b.Run("reference=mutex", func(b *testing.B) {
		benchmarkParallel(b, paths, func(p string) error {
			if ref.get(p) == nil {
				return fmt.Errorf("%s missing", p)
			}
			return nil
		})
	})
}

// mutexStore is the reference: a map read under one mutex.
type mutexStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *mutexStore) get(p string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.m[p])
}

// cpuTime returns the CPU time (user and system) the process used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report adds ops/s (wall clock) and cpu-ns/op (process CPU time, which
// stays flat when reads do not contend even if the machine is too busy to
// give the process more CPUs).
func report(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

func benchmarkParallel(b *testing.B, paths []string, get func(p string) error) {
	b.Run("goroutines=1", func(b *testing.B) {
		cpu0 := cpuTime(b)
		for b.Loop() {
			if err := get(paths[0]); err != nil {
				b.Fatal(err)
			}
		}
		report(b, cpu0)
	})
	b.Run("goroutines=16", func(b *testing.B) {
		cpu0 := cpuTime(b)
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((16 + procs - 1) / procs) // >= 16 goroutines
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			p := paths[next.Add(1)%int64(len(paths))] // one file per goroutine
			for pb.Next() {
				if err := get(p); err != nil {
					b.Error(err)
					return
				}
			}
		})
		report(b, cpu0)
	})
}
