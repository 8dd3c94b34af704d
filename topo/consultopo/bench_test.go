package consultopo

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// The benchmarks compare topokit with the raw consul api on the same agent.
// Each iteration runs one raw operation and one topokit operation (in
// alternating order, so that drift on a shared machine hits both alike) and
// the benchmark reports the median (p50) latency of each, in ns, and their
// ratio: topokit p50 / raw p50, and each side's requests to the agent per
// iteration (rt/op for topokit, raw-rt/op for the raw api; see rtCounter).
//
// The raw side is the least the raw api needs for the same result: Update
// and Create must return the new ModifyIndex, which only a transaction
// reports (a KV PUT answers true/false), and Delete must tell an absent key
// from a deleted one, which a plain DELETE does not. The *VsKV benchmarks
// compare with the plain KV endpoints anyway, which do less.

// pairedBench runs raw and tk once per iteration and reports the p50s and
// each side's requests per iteration.
func pairedBench(b *testing.B, rt *rtSides, raw, tk func(i int)) {
	b.Helper()
	// Warm up connections, sessions and caches.
	for i := range 20 {
		raw(-1 - i)
		tk(-1 - i)
	}
	rawTimes := make([]time.Duration, 0, b.N)
	tkTimes := make([]time.Duration, 0, b.N)
	m := rt.mark()
	iters := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		iters++
		timeIt := func(f func(int), into *[]time.Duration) {
			start := time.Now()
			f(i)
			*into = append(*into, time.Since(start))
		}
		if i%2 == 0 {
			timeIt(raw, &rawTimes)
			timeIt(tk, &tkTimes)
		} else {
			timeIt(tk, &tkTimes)
			timeIt(raw, &rawTimes)
		}
	}
	b.StopTimer()
	rt.report(b, m, iters)
	rp, tp := p50(rawTimes), p50(tkTimes)
	b.ReportMetric(float64(rp.Nanoseconds()), "raw-p50-ns")
	b.ReportMetric(float64(tp.Nanoseconds()), "topokit-p50-ns")
	b.ReportMetric(float64(tp)/float64(rp), "ratio")
}

func p50(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchSetup returns a Conn under a fresh root and a raw api client, and
// their request counters.
func benchSetup(b *testing.B) (*Conn, *api.Client, string, *rtSides) {
	b.Helper()
	root := testRoot(b)
	rt := &rtSides{}
	return rt.conn(b, root), rt.client(b), root, rt
}

func BenchmarkGet(b *testing.B) {
	c, raw, root, rt := benchSetup(b)
	ctx := context.Background()
	mustWrite(b, c, "get/f", "some value of a typical size, like a shard record")
	kv := raw.KV()
	pairedBench(b, rt,
		func(int) {
			p, _, err := kv.Get(root+"/get/f", nil)
			if err != nil || p == nil {
				b.Fatal(err)
			}
		},
		func(int) {
			if _, _, err := c.Get(ctx, "get/f"); err != nil {
				b.Fatal(err)
			}
		})
}

func BenchmarkUpdate(b *testing.B) {
	c, raw, root, rt := benchSetup(b)
	ctx := context.Background()
	mustWrite(b, c, "upd/raw", "x")
	mustWrite(b, c, "upd/tk", "x")
	kv := raw.KV()
	pairedBench(b, rt,
		func(i int) {
			ok, resp, _, err := kv.Txn(api.KVTxnOps{{Verb: api.KVSet, Key: root + "/upd/raw", Value: []byte("value " + strconv.Itoa(i))}}, nil)
			if err != nil || !ok || resp.Results[0].ModifyIndex == 0 {
				b.Fatal(ok, err)
			}
		},
		func(i int) {
			if _, err := c.Update(ctx, "upd/tk", []byte("value "+strconv.Itoa(i)), nil); err != nil {
				b.Fatal(err)
			}
		})
}

// BenchmarkUpdateCAS compares a compare-and-set Update (a version given)
// with the raw api's transaction of one cas at the ModifyIndex, which
// answers with the new one: issue 30's "Update with version" row.
func BenchmarkUpdateCAS(b *testing.B) {
	c, raw, root, rt := benchSetup(b)
	ctx := context.Background()
	mustWrite(b, c, "upd/raw", "x")
	mustWrite(b, c, "upd/tk", "x")
	version := func(f string) topo.Version {
		_, v, err := c.Get(ctx, f)
		require.NoError(b, err)
		return v
	}
	rawIdx, tkV := uint64(version("upd/raw").(topo.NumericVersion)), version("upd/tk")
	kv := raw.KV()
	pairedBench(b, rt,
		func(i int) {
			ok, resp, _, err := kv.Txn(api.KVTxnOps{{Verb: api.KVCAS, Key: root + "/upd/raw", Value: []byte("value " + strconv.Itoa(i)), Index: rawIdx}}, nil)
			if err != nil || !ok || resp.Results[0].ModifyIndex == 0 {
				b.Fatal(ok, err)
			}
			rawIdx = resp.Results[0].ModifyIndex
		},
		func(i int) {
			v, err := c.Update(ctx, "upd/tk", []byte("value "+strconv.Itoa(i)), tkV)
			if err != nil {
				b.Fatal(err)
			}
			tkV = v
		})
}

func BenchmarkUpdateVsKV(b *testing.B) {
	c, raw, root, rt := benchSetup(b)
	ctx := context.Background()
	mustWrite(b, c, "upd/raw", "x")
	mustWrite(b, c, "upd/tk", "x")
	kv := raw.KV()
	pairedBench(b, rt,
		func(i int) {
			if _, err := kv.Put(&api.KVPair{Key: root + "/upd/raw", Value: []byte("value " + strconv.Itoa(i))}, nil); err != nil {
				b.Fatal(err)
			}
		},
		func(i int) {
			if _, err := c.Update(ctx, "upd/tk", []byte("value "+strconv.Itoa(i)), nil); err != nil {
				b.Fatal(err)
			}
		})
}

func BenchmarkCreateDelete(b *testing.B) {
	c, raw, root, rt := benchSetup(b)
	ctx := context.Background()
	kv := raw.KV()
	pairedBench(b, rt,
		func(i int) {
			key := root + "/cd/raw/" + strconv.Itoa(i)
			ok, resp, _, err := kv.Txn(api.KVTxnOps{{Verb: api.KVCAS, Key: key, Value: []byte("v")}}, nil)
			if err != nil || !ok || resp.Results[0].ModifyIndex == 0 {
				b.Fatal(ok, err)
			}
			ok, _, _, err = kv.Txn(api.KVTxnOps{{Verb: api.KVGet, Key: key}, {Verb: api.KVDelete, Key: key}}, nil)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
		},
		func(i int) {
			p := "cd/tk/" + strconv.Itoa(i)
			if _, err := c.Create(ctx, p, []byte("v")); err != nil {
				b.Fatal(err)
			}
			if err := c.Delete(ctx, p, nil); err != nil {
				b.Fatal(err)
			}
		})
}

func BenchmarkCreateDeleteVsKV(b *testing.B) {
	c, raw, root, rt := benchSetup(b)
	ctx := context.Background()
	kv := raw.KV()
	pairedBench(b, rt,
		func(i int) {
			key := root + "/cd/raw/" + strconv.Itoa(i)
			ok, _, err := kv.CAS(&api.KVPair{Key: key, Value: []byte("v")}, nil)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			if _, err := kv.Delete(key, nil); err != nil {
				b.Fatal(err)
			}
		},
		func(i int) {
			p := "cd/tk/" + strconv.Itoa(i)
			if _, err := c.Create(ctx, p, []byte("v")); err != nil {
				b.Fatal(err)
			}
			if err := c.Delete(ctx, p, nil); err != nil {
				b.Fatal(err)
			}
		})
}

// BenchmarkLockUnlock compares an uncontended Lock+Unlock with api.Lock on
// a long-lived session (created once, outside the loop).
func BenchmarkLockUnlock(b *testing.B) {
	c, raw, root, rt := benchSetup(b)
	ctx := context.Background()
	mustWrite(b, c, "lk/raw/f", "x")
	mustWrite(b, c, "lk/tk/f", "x")
	sess, _, err := raw.Session().Create(&api.SessionEntry{TTL: "15s", Behavior: api.SessionBehaviorDelete}, nil)
	require.NoError(b, err)
	stop := make(chan struct{})
	go func() { _ = raw.Session().RenewPeriodic("15s", sess, nil, stop) }()
	b.Cleanup(func() { close(stop) })
	lock, err := raw.LockOpts(&api.LockOptions{Key: root + "/lk/raw/Lock", Value: []byte("holder"), Session: sess})
	require.NoError(b, err)
	pairedBench(b, rt,
		func(int) {
			ch, err := lock.Lock(nil)
			if err != nil || ch == nil {
				b.Fatal(err)
			}
			if err := lock.Unlock(); err != nil {
				b.Fatal(err)
			}
		},
		func(int) {
			l, err := c.Lock(ctx, "lk/tk", "holder")
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		})
}

// BenchmarkGetConsistentVsDefault measures what consistent reads (the
// default, Options.Reads == ReadConsistent) cost over Consul's default
// mode: the "raw" side is a Conn with Reads: ReadDefault, the "topokit"
// side a Conn with the default options, reading the same key.
func BenchmarkGetConsistentVsDefault(b *testing.B) {
	c, _, root, rt := benchSetup(b)
	opts := testOptions()
	opts.Reads = ReadDefault
	stale, err := NewConn(opts, root)
	require.NoError(b, err)
	b.Cleanup(stale.Close)
	rt.raw.hook(stale.transport) // the "raw" side is stale
	ctx := context.Background()
	mustWrite(b, c, "f", "x")
	get := func(conn *Conn) func(int) {
		return func(int) {
			if _, _, err := conn.Get(ctx, "f"); err != nil {
				b.Fatal(err)
			}
		}
	}
	pairedBench(b, rt, get(stale), get(c))
}

func mustWrite(b *testing.B, c topo.Conn, p, v string) {
	b.Helper()
	if _, err := c.Update(context.Background(), p, []byte(v), nil); err != nil {
		b.Fatal(fmt.Errorf("writing %s: %w", p, err))
	}
}
