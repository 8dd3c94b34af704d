package memorytopo_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/topokit/topokit/topo/memorytopo"
)

// BenchmarkGet measures Get of distinct files from 1 goroutine and from 16
// goroutines, reporting ops/s so that the two can be compared in one run:
// reads do not serialise, so 16 goroutines reach at least the throughput of
// one (about GOMAXPROCS times it, when the CPUs are free).
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

	b.Run("goroutines=1", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := c.Get(ctx, paths[0]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
	b.Run("goroutines=16", func(b *testing.B) {
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((16 + procs - 1) / procs) // >= 16 goroutines
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			p := paths[next.Add(1)%files] // one file per goroutine
			for pb.Next() {
				if _, _, err := c.Get(ctx, p); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
}
