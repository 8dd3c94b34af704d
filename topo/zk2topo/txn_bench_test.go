package zk2topo

import (
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// The guarded-write benchmarks run three things alternately on one server,
// so that load from other processes hits them alike: a raw go-zookeeper
// multi of the same shape as the guarded write (a check-version of the
// lock entry, a set-data), the zk2 Conn's plain Update, and
// topo.GuardedUpdate. They report each one's median latency and the
// ratios guarded/update and guarded/raw, and each one's requests per op
// (raw-rt/op, update-rt/op, guarded-rt/op; see rtCounter).
//
//	go test -run '^$' -bench Guarded -benchtime 2000x ./topo/zk2topo/

// tripled runs raw, plain and guarded alternately b.N times each.
func tripled(b *testing.B, e *benchEnv, raw, plain, guarded func() error) {
	b.Helper()
	fns := []func() error{raw, plain, guarded}
	counters := []*rtCounter{e.rc, e.tc, e.tc}
	reqs := make([]int64, len(fns))
	for range 50 { // warm up (JIT, connections)
		for _, f := range fns {
			require.NoError(b, f())
		}
	}
	lat := make([][]time.Duration, len(fns))
	b.ResetTimer()
	for range b.N {
		for k, f := range fns {
			n0 := counters[k].load()
			t0 := time.Now()
			if err := f(); err != nil {
				b.Fatal(err)
			}
			lat[k] = append(lat[k], time.Since(t0))
			reqs[k] += counters[k].load() - n0
		}
	}
	b.StopTimer()
	p50 := make([]time.Duration, len(fns))
	for k := range lat {
		slices.Sort(lat[k])
		p50[k] = lat[k][len(lat[k])/2]
	}
	b.ReportMetric(float64(p50[0].Microseconds()), "raw-multi-p50-µs")
	b.ReportMetric(float64(p50[1].Microseconds()), "update-p50-µs")
	b.ReportMetric(float64(p50[2].Microseconds()), "guarded-p50-µs")
	b.ReportMetric(float64(p50[2])/float64(p50[1]), "guarded/update-p50")
	b.ReportMetric(float64(p50[2])/float64(p50[0]), "guarded/raw-p50")
	for k, name := range []string{"raw-rt/op", "update-rt/op", "guarded-rt/op"} {
		b.ReportMetric(float64(reqs[k])/float64(b.N), name)
	}
}

// guardedEnv holds a lock on zk2/ through the Conn and a raw entry under
// raw/locks/ whose check the raw multi carries.
type guardedEnv struct {
	*benchEnv
	lock     topo.LockDescriptor
	rawEntry string
}

func newGuardedEnv(b *testing.B) *guardedEnv {
	e := newBenchEnv(b)
	for _, p := range []string{"zk2/f", "zk2/g", "raw/f"} {
		_, err := e.conn.Create(e.ctx, p, []byte("value"))
		require.NoError(b, err)
	}
	acl := zk.WorldACL(zk.PermAll)
	_, err := e.raw.Create(e.root+"/raw/locks", nil, 0, acl)
	require.NoError(b, err)
	entry, err := e.raw.Create(e.root+"/raw/locks/", []byte("holder"), zk.FlagEphemeralSequential, acl)
	require.NoError(b, err)
	l, err := e.conn.Lock(e.ctx, "zk2", "holder")
	require.NoError(b, err)
	b.Cleanup(func() { _ = l.Unlock(e.ctx) })
	return &guardedEnv{benchEnv: e, lock: l, rawEntry: entry}
}

// BenchmarkGuardedUpdateCAS is a guarded compare-and-set update
// (GuardedUpdate with a version) beside a plain compare-and-set Update
// and the raw multi [check entry, set-data at version]. Both zk2 sides
// read the file's Stat first (a multi cannot tell a file from a
// directory, see Txn): two round trips each, against the raw multi's one.
func BenchmarkGuardedUpdateCAS(b *testing.B) {
	e := newGuardedEnv(b)
	val := []byte("new value")
	rawPath := e.root + "/raw/f"
	var rawVer int32
	var plainVer, guardedVer topo.Version = topo.NumericVersion(0), topo.NumericVersion(0)
	tripled(b, e.benchEnv, func() error {
		res, err := e.raw.Multi(&zk.CheckVersionRequest{Path: e.rawEntry, Version: 0}, &zk.SetDataRequest{Path: rawPath, Data: val, Version: rawVer})
		if err == nil {
			rawVer = res[1].Stat.Version
		}
		return err
	}, func() error {
		v, err := e.conn.Update(e.ctx, "zk2/g", val, plainVer)
		if err == nil {
			plainVer = v
		}
		return err
	}, func() error {
		v, err := topo.GuardedUpdate(e.ctx, e.conn, e.lock, "zk2/f", val, guardedVer)
		if err == nil {
			guardedVer = v
		}
		return err
	})
}

// BenchmarkGuardedUpdate is an unconditional guarded update
// (GuardedUpdate with a nil version: one multi, one round trip) beside a
// plain unconditional Update and the raw multi [check entry, set-data].
func BenchmarkGuardedUpdate(b *testing.B) {
	e := newGuardedEnv(b)
	val := []byte("new value")
	rawPath := e.root + "/raw/f"
	tripled(b, e.benchEnv, func() error {
		_, err := e.raw.Multi(&zk.CheckVersionRequest{Path: e.rawEntry, Version: 0}, &zk.SetDataRequest{Path: rawPath, Data: val, Version: -1})
		return err
	}, func() error {
		_, err := e.conn.Update(e.ctx, "zk2/g", val, nil)
		return err
	}, func() error {
		_, err := topo.GuardedUpdate(e.ctx, e.conn, e.lock, "zk2/f", val, nil)
		return err
	})
}
