package zk2topo

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"
)

// More rows beside the raw client (see bench_test.go for the pairing).

// rawTryLock is the least a correct uncontended try-lock and unlock need
// with the raw client: create the sequential ephemeral entry, read the
// children to see that it is the first, delete it.
func rawTryLock(raw *zk.Conn, locks string) error {
	acl := zk.WorldACL(zk.PermAll)
	p, err := raw.Create(locks+"/", []byte("holder"), zk.FlagEphemeralSequential, acl)
	if err != nil {
		return err
	}
	names, _, err := raw.Children(locks)
	if err != nil {
		return err
	}
	if slices.Min(names) != p[len(locks)+1:] {
		return fmt.Errorf("raw try-lock: %s is not first in %v", p, names)
	}
	return raw.Delete(p, -1)
}

// BenchmarkTryLockUnlock: an uncontended TryLock+Unlock, beside rawTryLock.
func BenchmarkTryLockUnlock(b *testing.B) {
	e := newBenchEnv(b)
	locks := e.root + "/raw/locks"
	_, err := e.raw.Create(locks, nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(b, err)
	paired(b, e, func(int) error { return rawTryLock(e.raw, locks) }, func(int) error {
		l, err := e.conn.TryLock(e.ctx, "zk2", "holder")
		if err != nil {
			return err
		}
		return l.Unlock(e.ctx)
	})
}

// BenchmarkLockWithTTLUnlock: an uncontended LockWithTTL+Unlock (on
// ZooKeeper a session-bound lock like Lock), beside rawTryLock.
func BenchmarkLockWithTTLUnlock(b *testing.B) {
	e := newBenchEnv(b)
	locks := e.root + "/raw/locks"
	_, err := e.raw.Create(locks, nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(b, err)
	paired(b, e, func(int) error { return rawTryLock(e.raw, locks) }, func(int) error {
		l, err := e.conn.LockWithTTL(e.ctx, "zk2", "holder", 20*time.Second)
		if err != nil {
			return err
		}
		return l.Unlock(e.ctx)
	})
}

// BenchmarkList lists 1,000 files (paths, values, versions) beside the raw
// client's Children of their directory and a concurrent Get of each.
func BenchmarkList(b *testing.B) {
	e := newBenchEnv(b)
	acl := zk.WorldACL(zk.PermAll)
	for _, d := range []string{"/raw/d", "/zk2/d"} {
		_, err := e.raw.Create(e.root+d, nil, 0, acl)
		require.NoError(b, err)
		for i := range listDirEntries {
			_, err := e.raw.Create(fmt.Sprintf("%s%s/f%04d", e.root, d, i), []byte("some value"), 0, acl)
			require.NoError(b, err)
		}
	}
	dir := e.root + "/raw/d"
	paired(b, e, func(int) error {
		names, _, err := e.raw.Children(dir)
		if err != nil {
			return err
		}
		errs := make([]error, len(names))
		var wg sync.WaitGroup
		for i, n := range names {
			wg.Go(func() { _, _, errs[i] = e.raw.Get(dir + "/" + n) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}, func(int) error {
		kvs, err := e.conn.List(e.ctx, "zk2/d/")
		if err == nil && len(kvs) != listDirEntries {
			err = fmt.Errorf("List: %d files", len(kvs))
		}
		return err
	})
}

// BenchmarkWatchRecursiveFirstEvent: a WatchRecursive is opened on a
// directory of 10 files, then another client updates one of them;
// measured from the update's return to the event. Beside it, the raw
// client's watches on the same shape: a children watch on the directory
// and a data watch on each file, then the wait for the updated file's
// event and the read of its new contents (which sets its watch again).
// Requests per op count the watching side only.
func BenchmarkWatchRecursiveFirstEvent(b *testing.B) {
	e := newBenchEnv(b)
	writer, _, err := zk.Connect([]string{testServer}, testSessionTimeout, zk.WithLogInfo(false))
	require.NoError(b, err)
	b.Cleanup(writer.Close)
	acl := zk.WorldACL(zk.PermAll)
	for _, d := range []string{"/raw/d", "/zk2/d"} {
		_, err := e.raw.Create(e.root+d, nil, 0, acl)
		require.NoError(b, err)
		for i := range 10 {
			_, err := e.raw.Create(fmt.Sprintf("%s%s/f%d", e.root, d, i), []byte("x"), 0, acl)
			require.NoError(b, err)
		}
	}
	dir := e.root + "/raw/d"
	var rawT, tkT []time.Duration
	t0, r0 := e.tc.load(), e.rc.load()
	for i := 0; b.Loop(); i++ {
		val := []byte(strconv.Itoa(i))

		names, _, _, err := e.raw.ChildrenW(dir)
		require.NoError(b, err)
		evs := make([]<-chan zk.Event, len(names))
		errs := make([]error, len(names))
		var wg sync.WaitGroup
		for j, n := range names {
			wg.Go(func() { _, _, evs[j], errs[j] = e.raw.GetW(dir + "/" + n) })
		}
		wg.Wait()
		var f3 <-chan zk.Event
		for j, n := range names {
			require.NoError(b, errs[j])
			if n == "f3" {
				f3 = evs[j]
			}
		}
		_, err = writer.Set(dir+"/f3", val, -1)
		require.NoError(b, err)
		start := time.Now()
		ev := <-f3
		require.Equal(b, zk.EventNodeDataChanged, ev.Type)
		// The new contents, as the watch reports them, and the watch
		// set again.
		got, _, _, err := e.raw.GetW(dir + "/f3")
		require.NoError(b, err)
		rawT = append(rawT, time.Since(start))
		require.Equal(b, val, got)

		wctx, cancel := ctxWithCancel(e)
		initial, changes, err := e.conn.WatchRecursive(wctx, "zk2/d/")
		require.NoError(b, err)
		require.Len(b, initial, 10)
		_, err = writer.Set(e.root+"/zk2/d/f3", val, -1)
		require.NoError(b, err)
		start = time.Now()
		wd := <-changes
		tkT = append(tkT, time.Since(start))
		if wd.Err != nil || string(wd.Contents) != string(val) {
			b.Fatalf("unexpected first event %+v", wd)
		}
		cancel()
		for range changes {
		}
	}
	e.reportRT(b, t0, r0, len(tkT))
	slices.Sort(rawT)
	slices.Sort(tkT)
	r, o := rawT[len(rawT)/2], tkT[len(tkT)/2]
	b.ReportMetric(float64(r.Nanoseconds())/1e3, "raw-p50-µs")
	b.ReportMetric(float64(o.Nanoseconds())/1e3, "zk2-p50-µs")
	b.ReportMetric(float64(o)/float64(r), "zk2/raw-p50")
}

func ctxWithCancel(e *benchEnv) (context.Context, context.CancelFunc) {
	return context.WithCancel(e.ctx)
}
