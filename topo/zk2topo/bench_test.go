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
// same server. Each iteration runs one raw operation and one zk2 operation,
// alternating, so that load from other processes hits both alike; besides
// ns/op (of the pair) they report each side's median latency (raw-p50-µs,
// zk2-p50-µs) and their ratio (zk2/raw-p50).
//
//	go test -run '^$' -bench . -benchtime 2000x ./topo/zk2topo/

type benchEnv struct {
	raw  *zk.Conn
	conn *Conn
	root string
	ctx  context.Context
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	root := freshRoot(b)
	raw, _, err := zk.Connect([]string{testServer}, testSessionTimeout, zk.WithLogInfo(false))
	require.NoError(b, err)
	b.Cleanup(raw.Close)
	conn := openConn(b, []string{testServer}, root)
	// A realistic context: callers normally pass one that can end.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	b.Cleanup(cancel)
	// Both sides work in a directory that keeps another file, as in a real
	// topology (a Delete does not empty its directory).
	_, err = conn.Create(ctx, "raw/sibling", []byte("s"))
	require.NoError(b, err)
	_, err = conn.Create(ctx, "zk2/sibling", []byte("s"))
	require.NoError(b, err)
	return &benchEnv{raw: raw, conn: conn, root: root, ctx: ctx}
}

// paired runs raw and ours alternately b.N times each and reports medians.
func paired(b *testing.B, raw, ours func(i int) error) {
	b.Helper()
	for i := 0; i < 50; i++ { // warm up both paths (JIT, connections)
		require.NoError(b, raw(-i-1))
		require.NoError(b, ours(-i-1))
	}
	rawLat := make([]time.Duration, 0, b.N)
	ourLat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := raw(i); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := ours(i); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		rawLat = append(rawLat, t1.Sub(t0))
		ourLat = append(ourLat, t2.Sub(t1))
	}
	b.StopTimer()
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
	paired(b, func(int) error {
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
	paired(b, func(int) error {
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
	paired(b, func(i int) error {
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
	paired(b, func(int) error {
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
// every Get is preceded by a pipelined sync.
func BenchmarkGetLinearizable(b *testing.B) {
	e := newBenchEnv(b)
	lin, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, LinearizableReads: true}, e.root)
	require.NoError(b, err)
	b.Cleanup(lin.Close)
	_, err = e.conn.Create(e.ctx, "zk2/f", []byte("value"))
	require.NoError(b, err)
	_, err = e.conn.Create(e.ctx, "raw/f", []byte("value"))
	require.NoError(b, err)
	rawPath := e.root + "/raw/f"
	paired(b, func(int) error {
		_, _, err := e.raw.Get(rawPath)
		return err
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
	paired(b, func(int) error {
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
