package test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// reservedPaths break the reserved-name rule of topo/reserved.go.
var reservedPaths = []string{
	"locks", "d/locks", "d/locks/x", "d/locks/x/y", "a/b/locks/c",
	"Lock", "d/Lock", "d/Lock/x",
	"elections", "elections/e", "elections/e/f", "elections/e/locks/x",
}

// unreservedPaths look like reserved ones but are not.
var unreservedPaths = []string{
	"d/locksmith", "d/Locks", "d/lock", "d/lockx", "d/xlocks", "d/LOCK",
	"a/elections", "a/elections/e", "electionsx/e", "myelections",
}

// requireReserved fails t unless err is the reserved-name InvalidPath.
func requireReserved(t *testing.T, err error, what string) {
	t.Helper()
	requireCode(t, err, topo.InvalidPath, what)
	require.Containsf(t, err.Error(), "reserved", "%s: the error %q does not name the reserved-name rule", what, err)
}

// testReservedNames: writes, deletes, locks and election names at reserved
// paths are InvalidPath, name the rule, and write nothing, also while real
// locks and elections exist; reads of those paths are not refused; paths
// that only look reserved work.
func testReservedNames(s *store) {
	t, ctx, c, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()

	v := mustCreate(t, ctx, c, "d/f", "x")
	l := mustLock(t, ctx, c, "d", "holder")
	p := participate(t, c, "e", "leader")
	_, err := p.WaitForLeadership()
	require.NoError(t, err)
	before := takeSnapshot(t, ctx, c2)

	for _, rp := range reservedPaths {
		for _, pp := range []string{rp, "/" + rp} {
			_, err := c2.Create(ctx, pp, []byte("x"))
			requireReserved(t, err, fmt.Sprintf("Create(%q)", pp))
			_, err = c2.Update(ctx, pp, []byte("x"), nil)
			requireReserved(t, err, fmt.Sprintf("Update(%q)", pp))
			_, err = c2.Update(ctx, pp, []byte("x"), v)
			requireReserved(t, err, fmt.Sprintf("Update(%q) with a version", pp))
			requireReserved(t, c2.Delete(ctx, pp, nil), fmt.Sprintf("Delete(%q)", pp))
			requireReserved(t, c2.Delete(ctx, pp, v), fmt.Sprintf("Delete(%q) with a version", pp))
			_, err = c2.Lock(shortCtx(t, promptWait), pp, "x")
			requireReserved(t, err, fmt.Sprintf("Lock(%q)", pp))
			_, err = c2.TryLock(shortCtx(t, promptWait), pp, "x")
			requireReserved(t, err, fmt.Sprintf("TryLock(%q)", pp))
			_, err = c2.LockWithTTL(shortCtx(t, promptWait), pp, "x", time.Minute)
			requireReserved(t, err, fmt.Sprintf("LockWithTTL(%q)", pp))
			_, err = c2.LockName(shortCtx(t, promptWait), pp, "x")
			requireReserved(t, err, fmt.Sprintf("LockName(%q)", pp))
		}
		// Reads are not refused.
		_, _, err = c2.Get(ctx, rp)
		require.Falsef(t, topo.IsErrType(err, topo.InvalidPath), "Get(%q) refused a reserved path: %v", rp, err)
	}
	for _, name := range []string{"locks", "svc/locks", "svc/locks/x", "Lock", "svc/Lock", "a/Lock/b"} {
		_, err := c2.NewLeaderParticipation(name, "id")
		requireReserved(t, err, fmt.Sprintf("NewLeaderParticipation(%q)", name))
	}
	requireSameSnapshot(t, ctx, c2, before, "refused writes at reserved paths")
	require.NoError(t, l.Check(ctx), "the lock after refused writes at reserved paths")
	_, err = c2.TryLock(shortCtx(t, promptWait), "d", "other")
	requireCode(t, err, topo.NodeExists, "TryLock(d) after refused writes at reserved paths")
	leader, err := p.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "leader", leader, "the election after refused writes at reserved paths")
	_, err = c2.ListDir(ctx, "elections", false)
	require.NoError(t, err, "ListDir(elections) is a read and is not refused")
	_, err = c2.List(ctx, "d/lo")
	requireCode(t, err, topo.NoNode, "List of a prefix that only lock entries match")

	for _, up := range unreservedPaths {
		uv := mustCreate(t, ctx, c2, up, "u")
		mustUpdate(t, ctx, c2, up, "u2", uv)
		requireFile(t, ctx, c2, up, "u2", nil)
	}
	for _, name := range []string{"svc/locksmith", "Locks", "lock"} {
		participate(t, c2, name, "id")
	}
	// a/elections holds the file a/elections/e: a directory whose name
	// only looks reserved.
	lu, err := c2.TryLock(shortCtx(t, promptWait), "a/elections", "x")
	require.NoError(t, err, "TryLock of a directory that only looks reserved")
	require.NoError(t, lu.Unlock(ctx))
	for _, up := range unreservedPaths {
		require.NoError(t, c2.Delete(ctx, up, nil))
	}
	requireSameSnapshot(t, ctx, c2, before, "writes at unreserved paths, then their deletion")
}

// testNestedElections: elections "svc" and "svc/a" are independent,
// whichever starts first: each has its own leader, GetCurrentLeaderID and
// WaitForNewLeader report only their own election's candidates.
func testNestedElections(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c1, c2, c3 := s.conn(), s.conn(), s.conn()

	for _, order := range [][2]string{{"svc/a", "svc"}, {"svc", "svc/a"}} {
		first, second := order[0], order[1]
		pf := participate(t, c1, first, "lead-"+first)
		_, err := pf.WaitForLeadership()
		require.NoErrorf(t, err, "WaitForLeadership in %q", first)
		ps := participate(t, c2, second, "lead-"+second)
		got := leadAsync(ps)
		r, _ := recv(t, got, fmt.Sprintf("the first candidate of %q while %q has a leader", second, first))
		require.NoErrorf(t, r.err, "WaitForLeadership in %q", second)

		obsF := participate(t, c3, first, "observer")
		obsS := participate(t, c3, second, "observer")
		requireLeader(t, ctx, obsF, "lead-"+first, "the leader of "+first)
		requireLeader(t, ctx, obsS, "lead-"+second, "the leader of "+second)

		wctx, cancel := context.WithCancel(ctx)
		chF := mustWaitForNewLeader(t, wctx, obsF)
		requireNextLeader(t, chF, "lead-"+first, "WaitForNewLeader of "+first)

		// A handover in the other election is not seen here.
		ps.Stop()
		requireLeader(t, ctx, obsS, "", "after the leader of "+second+" stopped")
		ps2 := participate(t, c2, second, "next-"+second)
		_, err = ps2.WaitForLeadership()
		require.NoError(t, err)
		requireLeader(t, ctx, obsS, "next-"+second, "the new leader of "+second)
		requireOnlyLeader(t, chF, "lead-"+first, "WaitForNewLeader of "+first+" after a handover in "+second)
		requireLeader(t, ctx, obsF, "lead-"+first, "the leader of "+first+" after a handover in "+second)

		// The end of the first election's leadership leaves the other's.
		pf.Stop()
		requireLeader(t, ctx, obsF, "", "after the leader of "+first+" stopped")
		requireLeader(t, ctx, obsS, "next-"+second, "the leader of "+second+" after "+first+" ended")
		ps2.Stop()
		requireLeader(t, ctx, obsS, "", "after every leader of "+second+" stopped")
		obsF.Stop()
		obsS.Stop()
		cancel()
		requireClosedEventually(t, chF, "WaitForNewLeader after cancel")
	}
}

// testFileAndDirectory: a path can be a file and a directory at once; the
// library never rewrites a file because of what happens below it, and a
// compare-and-set on a path that is only a directory is NoNode and changes
// nothing.
func testFileAndDirectory(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	a, b := s.conn(), s.conn()

	// The ZooKeeper sequence of issue 10, item 3.
	mustCreate(t, ctx, a, "p/f1", "1")
	mustCreate(t, ctx, a, "p/f2", "2")
	require.NoError(t, a.Delete(ctx, "p/f1", nil))
	require.NoError(t, b.Delete(ctx, "p/f2", nil))
	mustCreate(t, ctx, b, "p", "file p")
	vp := mustUpdate(t, ctx, b, "p", "file p, updated", nil)
	mustCreate(t, ctx, b, "p/g1", "g1")
	require.NoError(t, a.Delete(ctx, "p/g1", nil))
	requireFile(t, ctx, b, "p", "file p, updated", vp)
	requireFile(t, ctx, a, "p", "file p, updated", vp)

	// Both at once: deleting children or the file leaves the other.
	mustCreate(t, ctx, a, "p/c", "child")
	requireFile(t, ctx, b, "p", "file p, updated", vp)
	entries, err := b.ListDir(ctx, "p", false)
	require.NoError(t, err)
	requireSortedNames(t, entries, []string{"c"}, "ListDir of a path that is a file and a directory")
	require.NoError(t, a.Delete(ctx, "p/c", nil))
	requireFile(t, ctx, b, "p", "file p, updated", vp)
	mustCreate(t, ctx, a, "p/c", "child")
	require.NoError(t, b.Delete(ctx, "p", vp))
	requireNoFile(t, ctx, a, "p")
	requireFile(t, ctx, a, "p/c", "child", nil)

	// A compare-and-set on a path that is only a directory.
	vq := mustCreate(t, ctx, a, "q/c", "child")
	before := takeSnapshot(t, ctx, b)
	for _, ver := range []topo.Version{vq, vp} {
		_, err = b.Update(ctx, "q", []byte("x"), ver)
		requireCode(t, err, topo.NoNode, "compare-and-set Update of a path that is only a directory")
		requireCode(t, b.Delete(ctx, "q", ver), topo.NoNode, "versioned Delete of a path that is only a directory")
	}
	requireCode(t, b.Delete(ctx, "q", nil), topo.NoNode, "Delete of a path that is only a directory")
	requireSameSnapshot(t, ctx, b, before, "refused writes of a directory")
	requireNoFile(t, ctx, b, "q")
	requireFile(t, ctx, b, "q/c", "child", vq)
	kvs, err := b.List(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, []string{"q/c"}, kvPaths(kvs))
}

// testConcurrentVersionedDelete: racers Delete (with the version read) and
// compare-and-set Update one file, round after round: exactly one racer
// wins each round; losers get BadVersion (or NoNode once it is deleted);
// when an Update won the file holds its value, when a Delete won it is gone.
func testConcurrentVersionedDelete(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	const racers, rounds = 6, 24
	conns := s.conns(racers)
	for r := range rounds {
		ver := mustCreate(t, ctx, conns[0], "vd/f", "start")
		start := make(chan struct{})
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				<-start
				// The roles alternate between rounds: the scheduler tends
				// to run the last racer readied first.
				if (i+r)%2 == 0 {
					errs[i] = conns[i].Delete(ctx, "vd/f", ver)
				} else {
					_, errs[i] = conns[i].Update(ctx, "vd/f", []byte(fmt.Sprintf("r%dw%d", r, i)), ver)
				}
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equalf(t, -1, winner, "round %d: racers %d and %d both won on the same version", r, winner, i)
				winner = i
				continue
			}
			requireOneOf(t, err, fmt.Sprintf("round %d: losing racer %d", r, i), topo.BadVersion, topo.NoNode)
		}
		require.NotEqualf(t, -1, winner, "round %d: no racer won", r)
		if (winner+r)%2 == 0 {
			requireNoFile(t, ctx, conns[0], "vd/f")
			continue
		}
		requireFile(t, ctx, conns[0], "vd/f", fmt.Sprintf("r%dw%d", r, winner), nil)
		require.NoError(t, conns[0].Delete(ctx, "vd/f", nil))
	}
}

// testWatchRecursiveRecreate: a file deleted and re-created under a watched
// prefix (alone, or with its whole directory) is reported again, with its
// new value and version.
func testWatchRecursiveRecreate(s *store) {
	t, ctx, c, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()

	mustCreate(t, ctx, c, "r/a", "a1")
	mustCreate(t, ctx, c, "r/x/y/b", "b1")
	_, ch := mustWatchRecursive(t, ctx, c, "r/", "WatchRecursive(r/)")

	for i := range 3 {
		require.NoError(t, c2.Delete(ctx, "r/a", nil))
		waitRecursive(t, ch, "r/", "delete of r/a", func(wd *topo.WatchDataRecursive) bool {
			return wd.Path == "r/a" && topo.IsErrType(wd.Err, topo.NoNode)
		})
		val := fmt.Sprintf("a-again-%d", i)
		v := mustCreate(t, ctx, c2, "r/a", val)
		wd := waitRecursive(t, ch, "r/", "re-created r/a", func(wd *topo.WatchDataRecursive) bool {
			return wd.Path == "r/a" && wd.Err == nil && string(wd.Contents) == val
		})
		require.Equal(t, v.String(), wd.Version.String(), "version of the re-created file's event")
	}

	// The whole directory goes and comes back.
	require.NoError(t, c2.Delete(ctx, "r/x/y/b", nil))
	waitRecursive(t, ch, "r/", "delete of r/x/y/b", func(wd *topo.WatchDataRecursive) bool {
		return wd.Path == "r/x/y/b" && topo.IsErrType(wd.Err, topo.NoNode)
	})
	v := mustCreate(t, ctx, c2, "r/x/y/b", "b2")
	wd := waitRecursive(t, ch, "r/", "re-created r/x/y/b", func(wd *topo.WatchDataRecursive) bool {
		return wd.Path == "r/x/y/b" && wd.Err == nil && string(wd.Contents) == "b2"
	})
	require.Equal(t, v.String(), wd.Version.String())
	vu := mustUpdate(t, ctx, c2, "r/x/y/b", "b3", v)
	wd = waitRecursive(t, ch, "r/", "update of the re-created r/x/y/b", func(wd *topo.WatchDataRecursive) bool {
		return wd.Path == "r/x/y/b" && wd.Err == nil && string(wd.Contents) == "b3"
	})
	require.Equal(t, vu.String(), wd.Version.String())
}

// testLargeValueCAS: two connections write values close to
// topo.MaxValueSize to one file, one unconditionally and one with Update
// then a compare-and-set chained on the version it returned. Every write
// must return the version of that write: no two writes return the same
// version, a chained compare-and-set succeeds only when nobody wrote in
// between (then the file holds its value), and a Get returns each value
// with the version its write returned.
func testLargeValueCAS(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	const rounds = 16
	cw, cc, reader := s.conn(), s.conn(), s.conn()
	big := func(tag string) []byte {
		b := bytes.Repeat([]byte{'v'}, topo.MaxValueSize-64)
		copy(b, tag)
		return b
	}
	mustCreate(t, ctx, cw, "big/f", "start")

	var mu sync.Mutex
	versions := map[string]string{} // version -> tag of the write that returned it
	record := func(tag string, v topo.Version) error {
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := versions[v.String()]; ok {
			return fmt.Errorf("writes %q and %q both returned version %s", prev, tag, v)
		}
		versions[v.String()] = tag
		return nil
	}
	errs := make(chan error, 2)
	start := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		<-start
		for i := range 2 * rounds {
			runtime.Gosched()
			tag := fmt.Sprintf("w%d;", i)
			v, err := cw.Update(ctx, "big/f", big(tag), nil)
			if unknownOutcome(err) {
				continue
			}
			if err == nil {
				err = record(tag, v)
			}
			if err != nil {
				errs <- fmt.Errorf("writer: %w", err)
				return
			}
		}
	})
	wg.Go(func() {
		<-start
		for i := range rounds {
			runtime.Gosched()
			tag := fmt.Sprintf("c%d;", i)
			v, err := cc.Update(ctx, "big/f", big(tag), nil)
			if unknownOutcome(err) {
				continue // no version to chain on
			}
			if err == nil {
				err = record(tag, v)
			}
			if err != nil {
				errs <- fmt.Errorf("chained writer: %w", err)
				return
			}
			tag2 := fmt.Sprintf("c%d-cas;", i)
			v2, err := cc.Update(ctx, "big/f", big(tag2), v)
			switch {
			case err == nil:
				if err := record(tag2, v2); err != nil {
					errs <- err
					return
				}
			case topo.IsErrType(err, topo.BadVersion), unknownOutcome(err):
			default:
				errs <- fmt.Errorf("chained compare-and-set: %w", err)
				return
			}
		}
	})
	close(start)
	// Reads while the writers run: each value comes with its own version.
	readErr := func() error {
		for range 2 * rounds {
			data, v, err := reader.Get(ctx, "big/f")
			if err != nil {
				return fmt.Errorf("Get: %w", err)
			}
			tag, _, ok := strings.Cut(string(data[:min(len(data), 16)]), ";")
			if !ok {
				continue // "start"
			}
			tag += ";"
			mu.Lock()
			got, known := versions[v.String()]
			mu.Unlock()
			if known && got != tag {
				return fmt.Errorf("Get returned the value of write %q with the version of write %q", tag, got)
			}
		}
		return nil
	}()
	requireNoWorkerErrs(t, &wg, errs)
	require.NoError(t, readErr)
	mu.Lock()
	acked := len(versions)
	mu.Unlock()
	require.GreaterOrEqual(t, acked, rounds, "large writes that returned a version (the others returned Unavailable)")

	// A final chained compare-and-set, uncontended, must succeed.
	data, v, err := reader.Get(ctx, "big/f")
	require.NoError(t, err)
	tag, _, _ := strings.Cut(string(data[:16]), ";")
	mu.Lock()
	got, known := versions[v.String()]
	mu.Unlock()
	require.Truef(t, known, "the final Get returned version %s, which no write returned", v)
	require.Equal(t, tag+";", got, "the final Get returned a value with another write's version")
	nv := mustUpdate(t, ctx, cc, "big/f", "small", v)
	requireFile(t, ctx, reader, "big/f", "small", nv)
}

// requireOnlyLeader fails t if ch delivers, within shortWait, an id other
// than want (repeats of want are allowed) or closes.
func requireOnlyLeader(t *testing.T, ch <-chan string, want, what string) {
	t.Helper()
	timeout := time.After(shortWait)
	for {
		select {
		case id, ok := <-ch:
			require.Truef(t, ok, "%s: channel closed", what)
			require.Equalf(t, want, id, "%s: a leader of another election was reported", what)
		case <-timeout:
			return
		}
	}
}

// unknownOutcome reports whether err is Unavailable: the write may or may
// not have been applied, and the backend could not tell which version it
// got (Consul, for a value too large for a transaction that another writer
// overwrote before its version could be read back). Such a write returns
// no version, so it can neither collide with another write's version nor
// be chained on.
func unknownOutcome(err error) bool { return topo.IsErrType(err, topo.Unavailable) }
