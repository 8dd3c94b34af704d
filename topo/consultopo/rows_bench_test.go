package consultopo

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"
)

// More rows beside the raw api (see bench_test.go for the pairing). Reads
// on the raw side are consistent, as the Conn's are by default.

// BenchmarkTryLockUnlock compares an uncontended TryLock+Unlock with
// api.Lock (LockTryOnce) on a long-lived session.
func BenchmarkTryLockUnlock(b *testing.B) {
	c, raw, root, rt := benchSetup(b)
	ctx := context.Background()
	mustWrite(b, c, "lk/tk/f", "x")
	sess, _, err := raw.Session().Create(&api.SessionEntry{TTL: "15s", Behavior: api.SessionBehaviorDelete}, nil)
	require.NoError(b, err)
	stop := make(chan struct{})
	go func() { _ = raw.Session().RenewPeriodic("15s", sess, nil, stop) }()
	b.Cleanup(func() { close(stop) })
	lock, err := raw.LockOpts(&api.LockOptions{Key: root + "/lk/raw/Lock", Value: []byte("holder"), Session: sess, LockTryOnce: true})
	require.NoError(b, err)
	pairedBench(b, rt,
		func(int) {
			ch, err := lock.Lock(nil)
			if err != nil || ch == nil {
				b.Fatal("raw try-lock", err)
			}
			if err := lock.Unlock(); err != nil {
				b.Fatal(err)
			}
		},
		func(int) {
			l, err := c.TryLock(ctx, "lk/tk", "holder")
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		})
}

// BenchmarkLockWithTTLUnlock compares LockWithTTL (a TTL other than the
// Conn's, so the lock gets a session of its own) + Unlock with the raw
// equivalent: create a session, acquire, release, destroy the session.
func BenchmarkLockWithTTLUnlock(b *testing.B) {
	c, raw, root, rt := benchSetup(b)
	ctx := context.Background()
	mustWrite(b, c, "lk/tk/f", "x")
	kv, sessions := raw.KV(), raw.Session()
	key := root + "/lk/raw/Lock"
	pairedBench(b, rt,
		func(int) {
			sess, _, err := sessions.Create(&api.SessionEntry{TTL: "20s", Behavior: api.SessionBehaviorDelete}, nil)
			if err != nil {
				b.Fatal(err)
			}
			ok, _, err := kv.Acquire(&api.KVPair{Key: key, Value: []byte("holder"), Flags: api.LockFlagValue, Session: sess}, nil)
			if err != nil || !ok {
				b.Fatal("raw acquire", ok, err)
			}
			if _, err := kv.Delete(key, nil); err != nil {
				b.Fatal(err)
			}
			if _, err := sessions.Destroy(sess, nil); err != nil {
				b.Fatal(err)
			}
		},
		func(int) {
			l, err := c.LockWithTTL(ctx, "lk/tk", "holder", 20*time.Second)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		})
}

// fill writes n keys <root>/<dir>/<i> through raw transactions (at most 64
// operations each, Consul's limit).
func fill(b *testing.B, raw *api.Client, root, dir string, n int) {
	b.Helper()
	var ops api.KVTxnOps
	flush := func() {
		ok, resp, _, err := raw.KV().Txn(ops, nil)
		require.NoError(b, err)
		require.True(b, ok, "%v", resp)
		ops = ops[:0]
	}
	for i := range n {
		ops = append(ops, &api.KVTxnOp{Verb: api.KVSet, Key: fmt.Sprintf("%s/%s/%04d", root, dir, i), Value: []byte("value " + strconv.Itoa(i))})
		if len(ops) == 64 {
			flush()
		}
	}
	if len(ops) > 0 {
		flush()
	}
}

// BenchmarkList1000 compares List of a 1,000-file prefix with a consistent
// raw KV list.
func BenchmarkList1000(b *testing.B) {
	c, raw, root, rt := benchSetup(b)
	ctx := context.Background()
	fill(b, raw, root, "l", 1000)
	kv := raw.KV()
	pairedBench(b, rt,
		func(int) {
			pairs, _, err := kv.List(root+"/l/", &api.QueryOptions{RequireConsistent: true})
			if err != nil || len(pairs) != 1000 {
				b.Fatal(len(pairs), err)
			}
		},
		func(int) {
			kvs, err := c.List(ctx, "l/")
			if err != nil || len(kvs) != 1000 {
				b.Fatal(len(kvs), err)
			}
		})
}

// BenchmarkListDir1000 compares ListDir (names only) of a 1,000-entry
// directory with a consistent raw keys listing with "/" as separator.
func BenchmarkListDir1000(b *testing.B) {
	c, raw, root, rt := benchSetup(b)
	ctx := context.Background()
	fill(b, raw, root, "d", 1000)
	kv := raw.KV()
	pairedBench(b, rt,
		func(int) {
			keys, _, err := kv.Keys(root+"/d/", "/", &api.QueryOptions{RequireConsistent: true})
			if err != nil || len(keys) != 1000 {
				b.Fatal(len(keys), err)
			}
		},
		func(int) {
			entries, err := c.ListDir(ctx, "d", false)
			if err != nil || len(entries) != 1000 {
				b.Fatal(len(entries), err)
			}
		})
}

// BenchmarkWatchRecursiveFirstEvent: a WatchRecursive is open on a prefix,
// another client writes a file under it; measured from the write's return
// to the event. Beside it, a raw blocking list of the prefix at the index
// of the previous read.
func BenchmarkWatchRecursiveFirstEvent(b *testing.B) {
	c, raw, root, rt := benchSetup(b)
	writer := rawClient(b).KV()
	ctx := context.Background()
	mustWrite(b, c, "w/f", "x")
	_, err := writer.Put(&api.KVPair{Key: root + "/raww/f", Value: []byte("x")}, nil)
	require.NoError(b, err)
	kv := raw.KV()
	var rawT, tkT []time.Duration
	i := 0
	m := rt.mark()
	for b.Loop() {
		i++
		val := []byte(strconv.Itoa(i))

		_, meta, err := kv.List(root+"/raww/", &api.QueryOptions{RequireConsistent: true})
		require.NoError(b, err)
		got := make(chan time.Time, 1)
		go func() {
			for {
				pairs, m, err := kv.List(root+"/raww/", &api.QueryOptions{RequireConsistent: true, WaitIndex: meta.LastIndex, WaitTime: 10 * time.Second})
				if err != nil {
					panic(err)
				}
				if m.LastIndex != meta.LastIndex && len(pairs) == 1 && string(pairs[0].Value) == string(val) {
					got <- time.Now()
					return
				}
				meta = m
			}
		}()
		time.Sleep(handoverDelays[i%len(handoverDelays)])
		_, err = writer.Put(&api.KVPair{Key: root + "/raww/f", Value: val}, nil)
		require.NoError(b, err)
		t0 := time.Now()
		rawT = append(rawT, (<-got).Sub(t0))

		wctx, cancel := context.WithCancel(ctx)
		_, changes, err := c.WatchRecursive(wctx, "w/")
		require.NoError(b, err)
		time.Sleep(handoverDelays[i%len(handoverDelays)])
		_, err = writer.Put(&api.KVPair{Key: root + "/w/f", Value: val}, nil)
		require.NoError(b, err)
		t0 = time.Now()
		for ev := range changes {
			if ev.Err == nil && string(ev.Contents) == string(val) {
				tkT = append(tkT, time.Since(t0))
				break
			}
		}
		cancel()
		for range changes {
		}
	}
	rt.report(b, m, i)
	reportHandover(b, rawT, tkT)
}
