package test_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/test"
)

// The suite checks itself: each mutant below wraps memorytopo (which passes
// the suite) with one deliberate contract violation, of the kind a real
// backend gets wrong, and the WHOLE suite runs against it and must fail.
// Each mutant runs in a child process (this test binary, re-run with
// mutantEnv set, -test.failfast so that it stops at the first failure)
// because a failing subtest cannot be contained in-process; the children
// run in parallel, since they mostly wait. The baseline "none" runs the
// whole suite unmutated and must pass, so a mutant's failure is due to its
// mutation. No mutant relies on a sleep to open a race window: the racy
// ones yield (runtime.Gosched) between their non-atomic steps, and the
// suite's races run many rounds.

const mutantEnv = "TOPOKIT_SUITE_MUTANT"

// mutantSessionTTL is the SessionTTL of the mutants' stores (what a
// partitioned Conn's session lapses after).
const mutantSessionTTL = time.Second

// mutants maps each mutant to a description of its defect and the subtest
// expected to catch it first (documentation: any failure kills it).
var mutants = map[string]string{
	"none": "the baseline: no defect",
	// Files.
	"cas-creates-absent":     "a versioned Update of an absent file creates it (the etcd ModRevision==0 / ZooKeeper version 0 trap): File/UpdateAbsentWithVersion",
	"dir-cas-creates-file":   "a versioned Update of a path that is only a directory creates a file there (issue 10 item 4): File/FileAndDirectory",
	"stale-versions":         "every write keeps returning the first version: File/Update",
	"cas-returns-other":      "an Update returns the version read after it, which may be another writer's (issue 10 item 8): Concurrency/LargeValueCompareAndSet",
	"list-dir-prefix":        "List treats its prefix as a directory: File/List",
	"getversion-latest":      "GetVersion ignores the version: File/GetVersion",
	"delete-erases-parent":   "deleting a child rewrites the parent file's data (issue 10 item 3): File/FileAndDirectory",
	"delete-not-atomic":      "a versioned Delete is a Get, a compare, then an unconditional Delete: Concurrency/VersionedDelete",
	"cas-not-atomic":         "compare-and-set is a Get followed by an unconditional write: Concurrency/CompareAndSet",
	"stale-reads":            "Get serves each connection's last read or write from a cache: Concurrency/Linearizable",
	"reserved-create":        "Create, Update and Delete accept reserved paths (issue 10 item 9): File/ReservedNames",
	"reserved-lock":          "Lock, TryLock, LockWithTTL and LockName accept reserved directories: File/ReservedNames",
	"lenient-paths":          "Create normalises \"a//b\" instead of rejecting it: BadInput/Paths",
	"create-ignores-context": "Create ignores its context: BadInput/CancelledContext",
	"oversize-truncated":     "Create truncates oversized values instead of refusing them: BadInput/ValueSize",
	// Directories.
	"listdir-unsorted": "ListDir is not sorted: Directory/ListDir",
	"no-ephemeral":     "a full ListDir never marks lock or election entries Ephemeral: Lock/Ephemeral",
	// Locks.
	"trylock-blocks":         "TryLock waits like Lock: Lock/TryLock",
	"lock-not-exclusive":     "Lock grants immediately without excluding anyone: Lock/Blocks",
	"unlock-twice-ok":        "a second Unlock succeeds: Lock/Blocks",
	"timeout-as-interrupted": "a Lock whose deadline passes reports Interrupted instead of Timeout: Lock/Timeout",
	"check-lags-loss":        "Check says nil for 1 s after the lock was lost: SessionLoss/Lock",
	"stale-unlock":           "the Unlock of a lost lock releases the lock's current holder and returns nil (issue 10 item 1): SessionLoss/Lock",
	"waiter-stays-blocked":   "a Lock waiter whose session ends keeps waiting for the holder (issue 10 item 18): SessionLoss/Waiter",
	// Watches.
	"watch-silent-delete":           "a watch closes on delete without the NoNode event: Watch/Delete",
	"watchrecursive-ends-on-delete": "a recursive watch ends at the first deletion: WatchRecursive/Events",
	"watchrecursive-forgets":        "a recursive watch drops the events of re-created paths: WatchRecursive/Recreate",
	// Elections.
	"leadership-never-cancelled": "the leadership context is never cancelled: Election/Handover",
	"leadership-cancelled-late":  "the leadership context is cancelled 1 s after leadership ended: Election/Handover",
	"nested-elections-leak":      "an election without a leader reports the leader of a nested election (issue 10 item 10): Election/Nested",
	"newleader-latest-only":      "WaitForNewLeader keeps only the latest leader until read, so a reader misses the leader current at the call: Election/WaitForNewLeader",
}

func TestSuiteCatchesMutants(t *testing.T) {
	if name := os.Getenv(mutantEnv); name != "" {
		runMutant(t, name)
		return
	}
	names := make([]string, 0, len(mutants))
	for name := range mutants {
		names = append(names, name)
	}
	slices.Sort(names)
	type result struct {
		out string
		err error
	}
	results := make(map[string]result, len(names))
	var mu sync.Mutex
	// The children mostly wait (for watch events, blocked locks, the
	// suite's 300 ms "nothing happens" windows), so many run at once even
	// on two cores.
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out, err := runChild(t, name)
			mu.Lock()
			results[name] = result{out, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	failLine := regexp.MustCompile(`--- FAIL: TestSuiteCatchesMutants/([^\s]+)`)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			r := results[name]
			if name == "none" {
				require.NoError(t, r.err, "the unmutated memorytopo fails the suite:\n%s", r.out)
				return
			}
			require.Error(t, r.err, "the suite did not catch mutant %q (%s):\n%s", name, mutants[name], r.out)
			var caught []string
			for _, m := range failLine.FindAllStringSubmatch(r.out, -1) {
				if strings.Count(m[1], "/") == 1 {
					caught = append(caught, m[1])
				}
			}
			require.NotEmpty(t, caught, "mutant %q made the child fail without a failing subtest (a crash or a hang?):\n%s", name, r.out)
			t.Logf("mutant %q (%s) caught by %v", name, mutants[name], caught)
		})
	}
}

// runChild re-runs this test binary on the whole suite with the mutant.
func runChild(t *testing.T, name string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSuiteCatchesMutants$", "-test.v", "-test.count=1",
		"-test.failfast", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), mutantEnv+"="+name)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runMutant runs the whole suite on memorytopo wrapped by the named mutant.
func runMutant(t *testing.T, name string) {
	_, ok := mutants[name]
	require.True(t, ok, "unknown mutant %q", name)
	var cur *mutantStore
	test.Run(t, func(t *testing.T) func() topo.Conn {
		cur = &mutantStore{f: memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: mutantSessionTTL})}
		return func() topo.Conn { return cur.conn(t, name) }
	}, test.Options{
		ExpireSession: func(t *testing.T, conn topo.Conn) {
			conn.(*mutantConn).mem.ExpireSession()
		},
		Partition: func(t *testing.T) test.Partitioned {
			c := cur.conn(t, name)
			return test.Partitioned{Conn: c, Cut: c.mem.Partition, Heal: c.mem.Heal}
		},
		SessionBound: mutantSessionTTL,
		FaultyStore: func(t *testing.T) test.FaultyStore {
			fs := &mutantStore{f: memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: mutantSessionTTL})}
			return test.FaultyStore{
				Open: func() topo.Conn { return fs.conn(t, name) },
				Fault: func(t *testing.T) {
					fs.f.AddFault(memorytopo.Fault{Op: memorytopo.OpAny, Err: topo.Unavailable, Times: 20})
					fs.f.BreakWatches(nil)
				},
			}
		},
	})
}

// mutantStore is one store of the mutants, with what the mutants share
// between its Conns.
type mutantStore struct {
	f *memorytopo.Factory

	mu   sync.Mutex
	held map[string]topo.LockDescriptor // stale-unlock: the last lock taken per directory
}

func (s *mutantStore) conn(t *testing.T, name string) *mutantConn {
	c, err := s.f.NewConn("mem", "/root")
	require.NoError(t, err)
	return &mutantConn{Conn: c, mem: c, name: name, store: s}
}

// mutantConn is memorytopo with one deliberate bug.
type mutantConn struct {
	topo.Conn
	mem   *memorytopo.Conn
	name  string
	store *mutantStore

	mu    sync.Mutex
	cache map[string]cached // stale-reads
}

type cached struct {
	data []byte
	v    topo.Version
}

func (c *mutantConn) remember(p string, data []byte, v topo.Version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache == nil {
		c.cache = map[string]cached{}
	}
	c.cache[strings.TrimPrefix(p, "/")] = cached{data, v}
}

func (c *mutantConn) Get(ctx context.Context, p string) ([]byte, topo.Version, error) {
	if c.name == "stale-reads" {
		c.mu.Lock()
		e, ok := c.cache[strings.TrimPrefix(p, "/")]
		c.mu.Unlock()
		if ok {
			return e.data, e.v, nil
		}
		data, v, err := c.Conn.Get(ctx, p)
		if err == nil {
			c.remember(p, data, v)
		}
		return data, v, err
	}
	return c.Conn.Get(ctx, p)
}

// reservedEscape maps a reserved path to a lookalike the store accepts.
func reservedEscape(p string) string {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	for i, s := range segs {
		if s == backendkit.LocksDirName || s == backendkit.ConsulLockName || (i == 0 && s == backendkit.ElectionsDirName) {
			segs[i] = s + "_"
		}
	}
	return strings.Join(segs, "/")
}

// isDir reports whether p is only a directory.
func (c *mutantConn) isDir(ctx context.Context, p string) bool {
	_, err := c.Conn.ListDir(ctx, p, false)
	return err == nil
}

func (c *mutantConn) Update(ctx context.Context, p string, contents []byte, v topo.Version) (topo.Version, error) {
	switch c.name {
	case "cas-creates-absent":
		if _, _, err := backendkit.CheckUpdate(p, contents, v); err == nil && v != nil {
			if _, _, err := c.Conn.Get(ctx, p); topo.IsErrType(err, topo.NoNode) {
				return c.Conn.Update(ctx, p, contents, nil)
			}
		}
	case "dir-cas-creates-file":
		if _, _, err := backendkit.CheckUpdate(p, contents, v); err == nil && v != nil {
			if _, _, err := c.Conn.Get(ctx, p); topo.IsErrType(err, topo.NoNode) && c.isDir(ctx, p) {
				return c.Conn.Update(ctx, p, contents, nil)
			}
		}
	case "stale-versions":
		_, old, err := c.Conn.Get(ctx, p)
		if _, uerr := c.Conn.Update(ctx, p, contents, v); uerr != nil || err != nil {
			return nil, uerr
		}
		return old, nil
	case "cas-returns-other":
		if _, err := c.Conn.Update(ctx, p, contents, v); err != nil {
			return nil, err
		}
		runtime.Gosched()
		_, cur, err := c.Conn.Get(ctx, p)
		return cur, err
	case "stale-reads":
		nv, err := c.Conn.Update(ctx, p, contents, v)
		if err == nil {
			c.remember(p, contents, nv)
		}
		return nv, err
	case "cas-not-atomic":
		if _, _, err := backendkit.CheckUpdate(p, contents, v); err == nil && v != nil {
			_, cur, err := c.Conn.Get(ctx, p)
			if err != nil {
				return nil, err
			}
			if cur.String() != v.String() {
				return nil, topo.NewError(topo.BadVersion, p)
			}
			runtime.Gosched()
			return c.Conn.Update(ctx, p, contents, nil)
		}
	case "reserved-create":
		if cp, err := topo.CleanFilePath(p); err == nil && topo.IsReserved(cp) {
			return c.Conn.Update(ctx, reservedEscape(cp), contents, nil)
		}
	}
	return c.Conn.Update(ctx, p, contents, v)
}

func (c *mutantConn) Create(ctx context.Context, p string, contents []byte) (topo.Version, error) {
	switch c.name {
	case "lenient-paths":
		p = strings.ReplaceAll(p, "//", "/")
	case "create-ignores-context":
		ctx = context.Background()
	case "oversize-truncated":
		if len(contents) > topo.MaxValueSize {
			contents = contents[:topo.MaxValueSize]
		}
	case "reserved-create":
		if cp, err := topo.CleanFilePath(p); err == nil && topo.IsReserved(cp) {
			p = reservedEscape(cp)
		}
	}
	return c.Conn.Create(ctx, p, contents)
}

func (c *mutantConn) Delete(ctx context.Context, p string, v topo.Version) error {
	switch c.name {
	case "delete-not-atomic":
		if _, _, err := backendkit.CheckDelete(p, v); err == nil && v != nil {
			_, cur, err := c.Conn.Get(ctx, p)
			if err != nil {
				return err
			}
			if cur.String() != v.String() {
				return topo.NewError(topo.BadVersion, p)
			}
			runtime.Gosched()
			return c.Conn.Delete(ctx, p, nil)
		}
	case "delete-erases-parent":
		if err := c.Conn.Delete(ctx, p, v); err != nil {
			return err
		}
		if i := strings.LastIndexByte(strings.Trim(p, "/"), '/'); i > 0 {
			parent := strings.Trim(p, "/")[:i]
			if _, pv, err := c.Conn.Get(ctx, parent); err == nil {
				_, _ = c.Conn.Update(ctx, parent, nil, pv)
			}
		}
		return nil
	case "reserved-create":
		if cp, err := topo.CleanFilePath(p); err == nil && topo.IsReserved(cp) {
			err := c.Conn.Delete(ctx, reservedEscape(cp), v)
			if topo.IsErrType(err, topo.NoNode) || topo.IsErrType(err, topo.BadVersion) {
				return err
			}
			return nil
		}
	}
	return c.Conn.Delete(ctx, p, v)
}

func (c *mutantConn) List(ctx context.Context, prefix string) ([]topo.KVInfo, error) {
	kvs, err := c.Conn.List(ctx, prefix)
	if c.name != "list-dir-prefix" || err != nil {
		return kvs, err
	}
	dir := strings.TrimSuffix(strings.TrimPrefix(prefix, "/"), "/")
	var out []topo.KVInfo
	for _, kv := range kvs {
		if dir == "" || kv.Path == dir || strings.HasPrefix(kv.Path, dir+"/") {
			out = append(out, kv)
		}
	}
	if len(out) == 0 {
		return nil, topo.NewError(topo.NoNode, prefix)
	}
	return out, nil
}

func (c *mutantConn) GetVersion(ctx context.Context, p string, v int64) ([]byte, error) {
	if c.name == "getversion-latest" {
		data, _, err := c.Conn.Get(ctx, p)
		return data, err
	}
	return c.Conn.GetVersion(ctx, p, v)
}

func (c *mutantConn) ListDir(ctx context.Context, dir string, full bool) ([]topo.DirEntry, error) {
	entries, err := c.Conn.ListDir(ctx, dir, full)
	switch c.name {
	case "listdir-unsorted":
		slices.Reverse(entries)
	case "no-ephemeral":
		for i := range entries {
			entries[i].Ephemeral = false
		}
	}
	return entries, err
}

// lockDir returns the directory the mutant really locks for dir.
func (c *mutantConn) lockDir(dir string) string {
	if c.name == "reserved-lock" {
		if cp, err := topo.CleanDirPath(dir); err == nil && topo.IsReserved(cp) {
			return reservedEscape(cp)
		}
	}
	return dir
}

func (c *mutantConn) TryLock(ctx context.Context, dir, contents string) (topo.LockDescriptor, error) {
	if c.name == "trylock-blocks" {
		return c.Lock(ctx, dir, contents)
	}
	return c.wrapLock(dir)(c.Conn.TryLock(ctx, c.lockDir(dir), contents))
}

func (c *mutantConn) LockWithTTL(ctx context.Context, dir, contents string, ttl time.Duration) (topo.LockDescriptor, error) {
	return c.wrapLock(dir)(c.Conn.LockWithTTL(ctx, c.lockDir(dir), contents, ttl))
}

func (c *mutantConn) LockName(ctx context.Context, dir, contents string) (topo.LockDescriptor, error) {
	return c.wrapLock(dir)(c.Conn.LockName(ctx, c.lockDir(dir), contents))
}

func (c *mutantConn) Lock(ctx context.Context, dir, contents string) (topo.LockDescriptor, error) {
	switch c.name {
	case "lock-not-exclusive":
		if _, err := backendkit.CheckLockPath(dir); err != nil {
			return nil, err
		}
		if _, err := c.Conn.ListDir(ctx, dir, false); err != nil {
			return nil, err
		}
		return &fakeLock{}, nil
	case "timeout-as-interrupted":
		l, err := c.Conn.Lock(ctx, dir, contents)
		if topo.IsErrType(err, topo.Timeout) {
			err = topo.NewError(topo.Interrupted, dir)
		}
		return l, err
	case "waiter-stays-blocked":
		l, err := c.Conn.Lock(ctx, dir, contents)
		if topo.IsErrType(err, topo.LockLost) {
			// Wait on, as if still queued, until the lock is free.
			l, err = c.Conn.Lock(ctx, dir, contents)
		}
		return c.wrapLock(dir)(l, err)
	}
	return c.wrapLock(dir)(c.Conn.Lock(ctx, c.lockDir(dir), contents))
}

// wrapLock returns the func that applies the lock descriptor mutants to
// the outcome of a lock call on dir.
func (c *mutantConn) wrapLock(dir string) func(topo.LockDescriptor, error) (topo.LockDescriptor, error) {
	return func(l topo.LockDescriptor, err error) (topo.LockDescriptor, error) { return c.wrap(dir, l, err) }
}

func (c *mutantConn) wrap(dir string, l topo.LockDescriptor, err error) (topo.LockDescriptor, error) {
	if err != nil {
		return nil, err
	}
	switch c.name {
	case "unlock-twice-ok":
		return &lenientUnlock{LockDescriptor: l}, nil
	case "check-lags-loss":
		return &laggingCheck{LockDescriptor: l}, nil
	case "stale-unlock":
		s := c.store
		s.mu.Lock()
		if s.held == nil {
			s.held = map[string]topo.LockDescriptor{}
		}
		key := strings.Trim(dir, "/")
		s.held[key] = l
		s.mu.Unlock()
		return &staleUnlock{LockDescriptor: l, s: s, key: key}, nil
	}
	return l, nil
}

// fakeLock is a lock that excludes nobody.
type fakeLock struct{ released bool }

func (l *fakeLock) Check(context.Context) error { return nil }
func (l *fakeLock) Token() int64                { return 1 }
func (l *fakeLock) Done() <-chan struct{}       { return nil }
func (l *fakeLock) Unlock(context.Context) error {
	if l.released {
		return topo.NewError(topo.Interrupted, "")
	}
	l.released = true
	return nil
}

// lenientUnlock ignores errors from Unlock.
type lenientUnlock struct{ topo.LockDescriptor }

func (l *lenientUnlock) Unlock(ctx context.Context) error {
	_ = l.LockDescriptor.Unlock(ctx)
	return nil
}

// laggingCheck reports a lost lock as held for 1 s after it first saw the
// loss.
type laggingCheck struct {
	topo.LockDescriptor
	mu       sync.Mutex
	lostSeen time.Time
}

func (l *laggingCheck) Check(ctx context.Context) error {
	err := l.LockDescriptor.Check(ctx)
	if !topo.IsErrType(err, topo.LockLost) {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostSeen.IsZero() {
		l.lostSeen = time.Now()
	}
	if time.Since(l.lostSeen) < time.Second {
		return nil
	}
	return err
}

// staleUnlock: the Unlock of a lost lock releases whoever holds the
// directory's lock now, and reports success.
type staleUnlock struct {
	topo.LockDescriptor
	s   *mutantStore
	key string
}

func (l *staleUnlock) Unlock(ctx context.Context) error {
	err := l.LockDescriptor.Unlock(ctx)
	if !topo.IsErrType(err, topo.LockLost) {
		return err
	}
	l.s.mu.Lock()
	cur := l.s.held[l.key]
	l.s.mu.Unlock()
	if cur != nil && cur != l.LockDescriptor {
		_ = cur.Unlock(ctx)
	}
	return nil
}

func (c *mutantConn) Watch(ctx context.Context, p string) (*topo.WatchData, <-chan *topo.WatchData, error) {
	cur, ch, err := c.Conn.Watch(ctx, p)
	if c.name != "watch-silent-delete" || err != nil {
		return cur, ch, err
	}
	out := make(chan *topo.WatchData)
	go func() {
		defer close(out)
		for wd := range ch {
			if topo.IsErrType(wd.Err, topo.NoNode) {
				continue
			}
			out <- wd
		}
	}()
	return cur, out, nil
}

func (c *mutantConn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	init, ch, err := c.Conn.WatchRecursive(ctx, prefix)
	if err != nil || (c.name != "watchrecursive-ends-on-delete" && c.name != "watchrecursive-forgets") {
		return init, ch, err
	}
	out := make(chan *topo.WatchDataRecursive)
	go func() {
		defer func() {
			for range ch {
			}
		}()
		defer close(out)
		deleted := map[string]bool{}
		for wd := range ch {
			if c.name == "watchrecursive-forgets" {
				if deleted[wd.Path] && wd.Err == nil {
					continue
				}
				if topo.IsErrType(wd.Err, topo.NoNode) {
					deleted[wd.Path] = true
				}
			}
			out <- wd
			if c.name == "watchrecursive-ends-on-delete" && wd.Err != nil {
				return
			}
		}
	}()
	return init, out, nil
}

func (c *mutantConn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	p, err := c.Conn.NewLeaderParticipation(name, id)
	if err != nil {
		return p, err
	}
	switch c.name {
	case "leadership-never-cancelled":
		return &uncancelledLeader{LeaderParticipation: p}, nil
	case "leadership-cancelled-late":
		return &lateLeader{LeaderParticipation: p}, nil
	case "nested-elections-leak":
		return &leakyElection{LeaderParticipation: p, c: c, name: strings.Trim(name, "/")}, nil
	case "newleader-latest-only":
		return &latestOnlyLeader{LeaderParticipation: p}, nil
	}
	return p, nil
}

// uncancelledLeader hands out a leadership context that never ends.
type uncancelledLeader struct{ topo.LeaderParticipation }

func (p *uncancelledLeader) WaitForLeadership() (context.Context, error) {
	ctx, err := p.LeaderParticipation.WaitForLeadership()
	if err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

// lateLeader hands out a leadership context cancelled 1 s after the real
// one.
type lateLeader struct {
	topo.LeaderParticipation
	mu   sync.Mutex
	real context.Context
	late context.Context
}

func (p *lateLeader) WaitForLeadership() (context.Context, error) {
	ctx, err := p.LeaderParticipation.WaitForLeadership()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.real != ctx {
		late, cancel := context.WithCancel(context.WithoutCancel(ctx))
		context.AfterFunc(ctx, func() { time.AfterFunc(time.Second, cancel) })
		p.real, p.late = ctx, late
	}
	return p.late, nil
}

// leakyElection: an election without a leader of its own reports the
// leader of a nested election (as a prefix scan over elections/<name>/
// would).
type leakyElection struct {
	topo.LeaderParticipation
	c    *mutantConn
	name string
}

func (p *leakyElection) GetCurrentLeaderID(ctx context.Context) (string, error) {
	id, err := p.LeaderParticipation.GetCurrentLeaderID(ctx)
	if err != nil || id != "" {
		return id, err
	}
	entries, err := p.c.Conn.ListDir(ctx, "elections/"+p.name, true)
	if err != nil {
		return "", nil
	}
	for _, e := range entries {
		if e.Type != topo.TypeDirectory {
			continue
		}
		nested, err := p.c.Conn.NewLeaderParticipation(p.name+"/"+e.Name, "probe")
		if err != nil {
			continue
		}
		if id, err := nested.GetCurrentLeaderID(ctx); err == nil && id != "" {
			return id, nil
		}
	}
	return "", nil
}

// latestOnlyLeader: WaitForNewLeader keeps only the latest id until the
// reader takes it.
type latestOnlyLeader struct{ topo.LeaderParticipation }

func (p *latestOnlyLeader) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	in, err := p.LeaderParticipation.WaitForNewLeader(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan string)
	go func() {
		defer close(out)
		var latest string
		have := false
		for {
			var send chan string
			if have {
				send = out
			}
			select {
			case id, ok := <-in:
				if !ok {
					return
				}
				latest, have = id, true
			case send <- latest:
				have = false
			}
		}
	}()
	return out, nil
}

var _ = fmt.Sprintf
