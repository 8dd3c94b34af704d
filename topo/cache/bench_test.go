package cache_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// benchStore returns an opener of Conns on a fresh root of a store the
// benchmarks run on: "memory" (memorytopo), "etcd" (a real member), "zk"
// (a real server, Conns with LinearizableReads, which Consistent mode
// needs there) or "consul" (a real dev agent).
func benchStore(b *testing.B, name string) func() topo.Conn {
	switch name {
	case "etcd":
		return etcdOpen(b, etcdtest.Start(b), newRoot())
	case "zk":
		return zkOpen(b, zktest.Start(b), newRoot(), true)
	case "consul":
		return consulOpen(b, consultest.Start(b), newRoot())
	}
	_, open := memoryStore(&testing.T{})
	return open
}

// BenchmarkGet compares a Get through a Cache, in Cached and Consistent
// mode, with a Get on the raw Conn, of one file of a 100-file subtree, on
// every backend.
func BenchmarkGet(b *testing.B) {
	for _, name := range []string{"memory", "etcd", "zk", "consul"} {
		open := benchStore(b, name)
		ctx := context.Background()
		raw := open()
		for i := range 100 {
			_, err := raw.Update(ctx, fmt.Sprintf("b/f%03d", i), []byte("some value of a record"), nil)
			require.NoError(b, err)
		}
		c, err := cache.New(open(), "b/", cache.Options{})
		require.NoError(b, err)
		for _, m := range []struct {
			name string
			get  func() error
		}{
			{"raw", func() error { _, _, err := raw.Get(ctx, "b/f042"); return err }},
			{"cached", func() error { _, _, err := c.Get(ctx, "b/f042"); return err }},
			{"consistent", func() error { _, _, err := c.Get(cache.WithMode(ctx, cache.Consistent), "b/f042"); return err }},
		} {
			b.Run(name+"/"+m.name, func(b *testing.B) {
				for b.Loop() {
					if err := m.get(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		cctx := cache.WithMode(ctx, cache.Consistent)
		b.Run(name+"/consistent-over-raw", func(b *testing.B) {
			benchRatio(b, func() error { _, _, err := raw.Get(ctx, "b/f042"); return err },
				func() error { _, _, err := c.Get(cctx, "b/f042"); return err })
		})
		c.Close()
		raw.Close()
	}
}

// benchRatio runs raw and consistent alternately, so that both meet the
// same load, and reports their time ratio (consistent/raw).
func benchRatio(b *testing.B, raw, consistent func() error) {
	var rawT, consT time.Duration
	for b.Loop() {
		start := time.Now()
		if err := raw(); err != nil {
			b.Fatal(err)
		}
		mid := time.Now()
		if err := consistent(); err != nil {
			b.Fatal(err)
		}
		rawT, consT = rawT+mid.Sub(start), consT+time.Since(mid)
	}
	b.ReportMetric(float64(consT)/float64(rawT), "consistent/raw")
}

// BenchmarkList compares a List of a 1,000-file subtree through a Cache
// in Consistent mode (read through the store on every backend, see
// docs/cache.md) with a List on the raw Conn, on memorytopo and etcd.
func BenchmarkList(b *testing.B) {
	for _, name := range []string{"memory", "etcd"} {
		open := benchStore(b, name)
		ctx := context.Background()
		raw := open()
		for i := range 1000 {
			_, err := raw.Update(ctx, fmt.Sprintf("l/f%04d", i), []byte("some value of a record"), nil)
			require.NoError(b, err)
		}
		c, err := cache.New(open(), "l/", cache.Options{})
		require.NoError(b, err)
		cctx := cache.WithMode(ctx, cache.Consistent)
		b.Run(name+"/consistent-over-raw", func(b *testing.B) {
			benchRatio(b, func() error { _, err := raw.List(ctx, "l/"); return err },
				func() error { _, err := c.List(cctx, "l/"); return err })
		})
		c.Close()
		raw.Close()
	}
}

// BenchmarkWatchers compares 1,000 local watchers of one Cache with 1,000
// store watches on one Conn: each op is one change delivered to all of
// them; heap-bytes/watcher is the memory the watchers took.
func BenchmarkWatchers(b *testing.B) {
	const n = 1000
	for _, name := range []string{"memory", "etcd"} {
		open := benchStore(b, name)
		for _, kind := range []string{"local", "store"} {
			b.Run(name+"/"+kind, func(b *testing.B) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				w := open()
				defer w.Close()
				_, err := w.Update(ctx, "w/f", []byte("0"), nil)
				require.NoError(b, err)
				var conn topo.Conn = open()
				if kind == "local" {
					conn, err = cache.New(conn, "w/", cache.Options{})
					require.NoError(b, err)
				}
				defer conn.Close()
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				chans := make([]<-chan *topo.WatchData, n)
				for i := range chans {
					_, chans[i], err = conn.Watch(ctx, "w/f")
					require.NoError(b, err)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				i := 0
				for b.Loop() {
					i++
					v := fmt.Append(nil, i)
					_, err := w.Update(ctx, "w/f", v, nil)
					require.NoError(b, err)
					for _, ch := range chans {
						for wd := range ch {
							if wd.Err != nil {
								b.Fatal(wd.Err)
							}
							if string(wd.Contents) == string(v) {
								break
							}
						}
					}
				}
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "heap-bytes/watcher")
			})
		}
	}
}

// BenchmarkResync measures filling a Cache of 10,000 files (one
// WatchRecursive and its initial list), the work of a relist.
func BenchmarkResync(b *testing.B) {
	const files = 10_000
	for _, name := range []string{"memory", "etcd"} {
		open := benchStore(b, name)
		ctx := context.Background()
		raw := open()
		for i := 0; i < files; i += 100 {
			ops := make([]topo.TxnOp, 100)
			for j := range ops {
				ops[j] = topo.UpdateOp(fmt.Sprintf("r/f%05d", i+j), []byte("some value of a record"), nil)
			}
			_, err := raw.Txn(ctx, ops...)
			require.NoError(b, err)
		}
		conn := open()
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				c, err := cache.New(conn, "r/", cache.Options{ProbeInterval: -1, LeaveConnOpen: true})
				require.NoError(b, err)
				require.Equal(b, files, c.State().Files)
				c.Close()
			}
		})
		conn.Close()
		raw.Close()
	}
}
