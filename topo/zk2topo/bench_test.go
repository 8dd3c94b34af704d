package zk2topo

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// The benchmarks run the zk2 Conn beside the raw go-zookeeper client on the
// same server. Each iteration runs one raw operation and one zk2
// operation, alternating which goes first, so that load from other
// processes hits both alike; besides ns/op (of the pair) they report each
// side's median latency (raw-p50-µs, zk2-p50-µs), their ratio
// (zk2/raw-p50), and each side's requests per op (rt/op for zk2,
// raw-rt/op for the raw client; see rtCounter).
//
//	go test -run '^$' -bench . -benchtime 2000x ./topo/zk2topo/

// benchEnv is a benchmark's two sides, each with its request counter
// (see rtCounter), under one root.
type benchEnv struct {
	raw    *zk.Conn
	conn   *Conn
	root   string
	ctx    context.Context
	rc, tc *rtCounter
}

// countedRaw opens a raw client whose requests r counts.
func countedRaw(b *testing.B, r *rtCounter) *zk.Conn {
	b.Helper()
	raw, _, err := zk.Connect([]string{testServer}, testSessionTimeout, zk.WithLogInfo(false), zk.WithDialer(r.dial))
	require.NoError(b, err)
	b.Cleanup(raw.Close)
	return raw
}

// countedConn opens a Conn at root whose requests r counts.
func countedConn(b *testing.B, root string, r *rtCounter) *Conn {
	b.Helper()
	c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, Dialer: r.dial}, root)
	require.NoError(b, err)
	b.Cleanup(c.Close)
	return c
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	root := freshRoot(b)
	rc, tc := &rtCounter{}, &rtCounter{}
	raw := countedRaw(b, rc)
	conn := countedConn(b, root, tc)
	// A realistic context: callers normally pass one that can end.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	b.Cleanup(cancel)
	// Both sides work in a directory that keeps another file, as in a real
	// topology (a Delete does not empty its directory).
	_, err := conn.Create(ctx, "raw/sibling", []byte("s"))
	require.NoError(b, err)
	_, err = conn.Create(ctx, "zk2/sibling", []byte("s"))
	require.NoError(b, err)
	return &benchEnv{raw: raw, conn: conn, root: root, ctx: ctx, rc: rc, tc: tc}
}

// reportRT reports each side's requests per iteration since the counts
// t0 (zk2) and r0 (raw).
func (e *benchEnv) reportRT(b *testing.B, t0, r0 int64, iters int) {
	b.Helper()
	if iters == 0 {
		return
	}
	b.ReportMetric(float64(e.tc.load()-t0)/float64(iters), "rt/op")
	b.ReportMetric(float64(e.rc.load()-r0)/float64(iters), "raw-rt/op")
}

// paired runs raw and ours alternately b.N times each and reports medians
// and requests per op.
func paired(b *testing.B, e *benchEnv, raw, ours func(i int) error) {
	b.Helper()
	for i := 0; i < 50; i++ { // warm up both paths (JIT, connections)
		require.NoError(b, raw(-i-1))
		require.NoError(b, ours(-i-1))
	}
	rawLat := make([]time.Duration, 0, b.N)
	ourLat := make([]time.Duration, 0, b.N)
	t0, r0 := e.tc.load(), e.rc.load()
	b.ResetTimer()
	timed := func(op func(int) error, i int, into *[]time.Duration) {
		start := time.Now()
		if err := op(i); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(start))
	}
	for i := 0; i < b.N; i++ {
		// Alternating which side goes first, so that neither always
		// pays for the garbage (GC assists) of the other.
		if i%2 == 0 {
			timed(raw, i, &rawLat)
			timed(ours, i, &ourLat)
		} else {
			timed(ours, i, &ourLat)
			timed(raw, i, &rawLat)
		}
	}
	b.StopTimer()
	e.reportRT(b, t0, r0, b.N)
	slices.Sort(rawLat)
	slices.Sort(ourLat)
	r, o := rawLat[len(rawLat)/2], ourLat[len(ourLat)/2]
	b.ReportMetric(float64(r.Microseconds()), "raw-p50-µs")
	b.ReportMetric(float64(o.Microseconds()), "zk2-p50-µs")
	b.ReportMetric(float64(o)/float64(r), "zk2/raw-p50")
}

func BenchmarkGet(b *testing.B) {
	e := newBenchEnv(b)
	_, err := e.conn.Create(e.ctx, "zk2/f", []byte("value"))
	require.NoError(b, err)
	_, err = e.conn.Create(e.ctx, "raw/f", []byte("value"))
	require.NoError(b, err)
	rawPath := e.root + "/raw/f"
	paired(b, e, func(int) error {
		_, _, err := e.raw.Get(rawPath)
		return err
	}, func(int) error {
		_, _, err := e.conn.Get(e.ctx, "zk2/f")
		return err
	})
}

func BenchmarkUpdate(b *testing.B) {
	e := newBenchEnv(b)
	_, err := e.conn.Create(e.ctx, "zk2/f", []byte("value"))
	require.NoError(b, err)
	_, err = e.conn.Create(e.ctx, "raw/f", []byte("value"))
	require.NoError(b, err)
	rawPath := e.root + "/raw/f"
	val := []byte("new value")
	paired(b, e, func(int) error {
		_, err := e.raw.Set(rawPath, val, -1)
		return err
	}, func(int) error {
		_, err := e.conn.Update(e.ctx, "zk2/f", val, nil)
		return err
	})
}

func BenchmarkCreateDelete(b *testing.B) {
	e := newBenchEnv(b)
	acl := zk.WorldACL(zk.PermAll)
	val := []byte("value")
	paired(b, e, func(i int) error {
		p := fmt.Sprintf("%s/raw/f%d", e.root, i)
		if _, err := e.raw.Create(p, val, 0, acl); err != nil {
			return err
		}
		return e.raw.Delete(p, -1)
	}, func(i int) error {
		p := fmt.Sprintf("zk2/f%d", i)
		if _, err := e.conn.Create(e.ctx, p, val); err != nil {
			return err
		}
		return e.conn.Delete(e.ctx, p, nil)
	})
}

func BenchmarkLockUnlock(b *testing.B) {
	e := newBenchEnv(b)
	acl := zk.WorldACL(zk.PermAll)
	_, err := e.raw.Create(e.root+"/raw/locks", nil, 0, acl)
	require.NoError(b, err)
	locks := e.root + "/raw/locks/"
	val := []byte("holder")
	paired(b, e, func(int) error {
		p, err := e.raw.Create(locks, val, zk.FlagEphemeralSequential, acl)
		if err != nil {
			return err
		}
		return e.raw.Delete(p, -1)
	}, func(int) error {
		l, err := e.conn.Lock(e.ctx, "zk2", "holder")
		if err != nil {
			return err
		}
		return l.Unlock(e.ctx)
	})
}

// BenchmarkGetLinearizable is BenchmarkGet with Options.LinearizableReads:
// every Get is preceded by a pipelined read barrier (a multi whose only op
// is a check of "/", see zkSession.barrierThen), beside a raw plain Get.
// Its zk2/raw-p50 is what a linearizable read costs over ZooKeeper's
// default read; rt/op is 2 (the barrier and the read). The barrier is a
// transaction, so on a server with forceSync (the default; the test
// servers run without it) it also costs a quorum's log fsync.
func BenchmarkGetLinearizable(b *testing.B) {
	e := newBenchEnv(b)
	lr := &rtCounter{}
	lin, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, LinearizableReads: true, Dialer: lr.dial}, e.root)
	require.NoError(b, err)
	b.Cleanup(lin.Close)
	e.tc = lr // the zk2 side is lin
	_, err = e.conn.Create(e.ctx, "zk2/f", []byte("value"))
	require.NoError(b, err)
	_, err = e.conn.Create(e.ctx, "raw/f", []byte("value"))
	require.NoError(b, err)
	rawPath := e.root + "/raw/f"
	paired(b, e, func(int) error {
		_, _, err := e.raw.Get(rawPath)
		return err
	}, func(int) error {
		_, _, err := lin.Get(e.ctx, "zk2/f")
		return err
	})
}

// BenchmarkLinearizableRead is a Get with Options.LinearizableReads (a
// pipelined check-only multi, then the read) beside the raw client's
// sync-then-get (the sync pipelined too, as zk2topo did before: it is
// linearizable only on followers, see zkSession.barrierThen). Its
// zk2/raw-p50 is what the barrier costs per read over a sync.
func BenchmarkLinearizableRead(b *testing.B) {
	e := newBenchEnv(b)
	lr := &rtCounter{}
	lin, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, LinearizableReads: true, Dialer: lr.dial}, e.root)
	require.NoError(b, err)
	b.Cleanup(lin.Close)
	e.tc = lr
	_, err = e.conn.Create(e.ctx, "zk2/f", []byte("value"))
	require.NoError(b, err)
	_, err = e.conn.Create(e.ctx, "raw/f", []byte("value"))
	require.NoError(b, err)
	rawPath := e.root + "/raw/f"
	paired(b, e, func(int) error {
		res := make(chan error, 1)
		go func() {
			_, err := e.raw.Sync("/")
			res <- err
		}()
		_, _, gerr := e.raw.Get(rawPath)
		if serr := <-res; serr != nil {
			return serr
		}
		return gerr
	}, func(int) error {
		_, _, err := lin.Get(e.ctx, "zk2/f")
		return err
	})
}

// BenchmarkCASUpdate is a compare-and-set Update (a Stat read, then the
// write at that version) beside a raw versioned Set.
func BenchmarkCASUpdate(b *testing.B) {
	e := newBenchEnv(b)
	_, err := e.conn.Create(e.ctx, "zk2/f", []byte("value"))
	require.NoError(b, err)
	_, err = e.conn.Create(e.ctx, "raw/f", []byte("value"))
	require.NoError(b, err)
	rawPath := e.root + "/raw/f"
	val := []byte("new value")
	var rawVer int32
	var ver topo.Version = topo.NumericVersion(0)
	paired(b, e, func(int) error {
		st, err := e.raw.Set(rawPath, val, rawVer)
		if err == nil {
			rawVer = st.Version
		}
		return err
	}, func(int) error {
		v, err := e.conn.Update(e.ctx, "zk2/f", val, ver)
		if err == nil {
			ver = v
		}
		return err
	})
}
