package zk2topo

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// Issue 30's ZooKeeper rows against the raw client sending the same
// requests as zk2topo, pipelined the same way (each request written once
// the one before it is, on one session, so that the server runs them in
// that order: a read sent behind a write sees it). The plain benchmarks
// (BenchmarkLockUnlock, BenchmarkCreateDelete) compare with the raw
// client's bare create and delete, which is no lock and no clean-up; these
// tell what of their zk2/raw-p50 is the requests' own cost on the server
// (a read ordered after a write is answered after that write, and costs
// its own processing there) and what is zk2topo's.

// rawPipelined runs reqs on the raw client of e, each in a goroutine
// started once the frame of the one before it was written (its request
// counted by e.rc), and returns the first error.
func rawPipelined(e *benchEnv, reqs ...func() error) error {
	errs := make(chan error, len(reqs))
	for _, req := range reqs {
		n := e.rc.load()
		go func() { errs <- req() }()
		for e.rc.load() == n {
			runtime.Gosched()
		}
	}
	var first error
	for range reqs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// BenchmarkLockUnlockPipelinedRaw: an uncontended Lock+Unlock beside the
// raw client's create of the entry with the queue's children read (with
// a watch) pipelined behind it, then the entry's delete with the
// directory's Stat pipelined behind it: zk2topo's four requests.
func BenchmarkLockUnlockPipelinedRaw(b *testing.B) {
	e := newBenchEnv(b)
	acl := zk.WorldACL(zk.PermAll)
	dir := e.root + "/raw"
	locks := dir + "/locks"
	_, err := e.raw.Create(locks, nil, 0, acl)
	require.NoError(b, err)
	paired(b, e, func(int) error {
		var node string
		var names []string
		if err := rawPipelined(e, func() (err error) {
			node, err = e.raw.Create(locks+"/", []byte("holder"), zk.FlagEphemeralSequential, acl)
			return err
		}, func() (err error) {
			names, _, _, err = e.raw.ChildrenW(locks)
			return err
		}); err != nil {
			return err
		}
		if slices.Min(names) != node[len(locks)+1:] {
			return fmt.Errorf("raw lock: %s is not first in %v", node, names)
		}
		return rawPipelined(e, func() error { return e.raw.Delete(node, -1) }, func() error {
			_, _, err := e.raw.Exists(dir)
			return err
		})
	}, func(int) error {
		l, err := e.conn.Lock(e.ctx, "zk2", "holder")
		if err != nil {
			return err
		}
		return l.Unlock(e.ctx)
	})
}

// BenchmarkCreateDeletePipelinedRaw: Create+Delete in a directory that
// keeps another file, beside the raw client's create, then its delete
// with the Stats of the parent's "locks" child and of the parent
// pipelined behind it: zk2topo's four requests.
func BenchmarkCreateDeletePipelinedRaw(b *testing.B) {
	e := newBenchEnv(b)
	acl := zk.WorldACL(zk.PermAll)
	val := []byte("value")
	dir := e.root + "/raw"
	paired(b, e, func(i int) error {
		p := fmt.Sprintf("%s/f%d", dir, i)
		if _, err := e.raw.Create(p, val, 0, acl); err != nil {
			return err
		}
		return rawPipelined(e, func() error { return e.raw.Delete(p, -1) }, func() error {
			_, _, err := e.raw.Exists(dir + "/locks")
			return err
		}, func() error {
			_, _, err := e.raw.Exists(dir)
			return err
		})
	}, func(i int) error {
		p := fmt.Sprintf("zk2/f%d", i)
		if _, err := e.conn.Create(e.ctx, p, val); err != nil {
			return err
		}
		return e.conn.Delete(e.ctx, p, nil)
	})
}

// BenchmarkCASUpdateSequentialRaw: a compare-and-set Update beside the raw
// client's exists and then its versioned set (the set depends on the
// exists' answer: it is sent only for a file at that version).
func BenchmarkCASUpdateSequentialRaw(b *testing.B) {
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
		ok, st, err := e.raw.Exists(rawPath)
		if err != nil {
			return err
		}
		if !ok || !isFile(st) || st.Version != rawVer {
			return fmt.Errorf("raw CAS: %s is no file at version %d", rawPath, rawVer)
		}
		st, err = e.raw.Set(rawPath, val, rawVer)
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
