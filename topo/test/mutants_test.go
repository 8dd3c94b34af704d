package test_test

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/test"
)

// The suite checks itself: each mutant below wraps memorytopo (which passes
// the suite) with one deliberate contract violation, of the kind a real
// backend gets wrong, and the suite must fail in the subtests named for it.
// Each mutant runs in a child process (this test binary, re-run with
// mutantEnv set) because a failing subtest cannot be contained in-process.

const mutantEnv = "TOPOKIT_SUITE_MUTANT"

// mutants maps each mutant to the suite subtests (group/name) that must
// catch it; the child runs only those.
var mutants = map[string][]string{
	// The baseline runs every subtest the mutants target, unmutated, and
	// must pass: a mutant's failure is then due to its mutation.
	"none": nil,
	// A versioned Update of an absent file creates it (the etcd
	// ModRevision==0 / ZooKeeper version 0 trap).
	"cas-creates-absent": {"File/UpdateAbsentWithVersion"},
	// Every write keeps returning the first version.
	"stale-versions": {"File/Update"},
	// List treats its prefix as a directory.
	"list-dir-prefix": {"File/List"},
	// GetVersion ignores the version.
	"getversion-latest": {"File/GetVersion"},
	// ListDir is not sorted.
	"listdir-unsorted": {"Directory/ListDir"},
	// TryLock waits like Lock.
	"trylock-blocks": {"Lock/TryLock"},
	// Lock grants immediately without excluding anyone.
	"lock-not-exclusive": {"Lock/Blocks", "Concurrency/LockMutualExclusion"},
	// A second Unlock succeeds.
	"unlock-twice-ok": {"Lock/Blocks"},
	// A watch closes on delete without the NoNode event.
	"watch-silent-delete": {"Watch/Delete"},
	// A recursive watch ends at the first deletion.
	"watchrecursive-ends-on-delete": {"WatchRecursive/Events"},
	// The leadership context is never cancelled.
	"leadership-never-cancelled": {"Election/Handover"},
	// Create normalises "a//b" instead of rejecting it.
	"lenient-paths": {"BadInput/Paths"},
	// Create ignores its context.
	"create-ignores-context": {"BadInput/CancelledContext"},
	// Create truncates oversized values instead of refusing them.
	"oversize-truncated": {"BadInput/ValueSize"},
	// A full ListDir never marks lock or election entries Ephemeral.
	"no-ephemeral": {"Lock/Ephemeral", "Election/Handover"},
	// A Lock whose deadline passes reports Interrupted instead of Timeout.
	"timeout-as-interrupted": {"Lock/Timeout"},
	// Get serves each connection's last read or write from a cache, so it
	// misses other connections' writes (stale reads).
	"stale-reads": {"Concurrency/Linearizable"},
	// Compare-and-set is a Get followed by an unconditional write.
	"cas-not-atomic": {"Concurrency/CompareAndSet"},
}

func TestSuiteCatchesMutants(t *testing.T) {
	if name := os.Getenv(mutantEnv); name != "" {
		runMutant(t, name)
		return
	}
	var all []string
	for _, targets := range mutants {
		all = append(all, targets...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	names := make([]string, 0, len(mutants))
	for name := range mutants {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			targets := mutants[name]
			if name == "none" {
				targets = all
			}
			out, err := runChild(t, name, targets)
			if name == "none" {
				require.NoError(t, err, "the unmutated memorytopo fails the targeted subtests:\n%s", out)
				return
			}
			require.Error(t, err, "the suite did not catch mutant %q:\n%s", name, out)
			for _, target := range targets {
				require.Contains(t, out, "--- FAIL: TestSuiteCatchesMutants/"+target,
					"mutant %q was not caught by %s:\n%s", name, target, out)
			}
		})
	}
}

// runChild re-runs this test binary on the targeted subtests with the mutant.
func runChild(t *testing.T, name string, targets []string) (string, error) {
	var groups, tests []string
	for _, target := range targets {
		g, s, _ := strings.Cut(target, "/")
		groups = append(groups, g)
		tests = append(tests, s)
	}
	slices.Sort(groups)
	groups = slices.Compact(groups)
	slices.Sort(tests)
	tests = slices.Compact(tests)
	run := "^TestSuiteCatchesMutants$/^(" + strings.Join(groups, "|") + ")$/^(" + strings.Join(tests, "|") + ")$"
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), mutantEnv+"="+name)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runMutant runs the suite (filtered by -test.run) on memorytopo wrapped by
// the named mutant.
func runMutant(t *testing.T, name string) {
	_, ok := mutants[name]
	require.True(t, ok, "unknown mutant %q", name)
	test.Run(t, func(t *testing.T) func() topo.Conn {
		f := memorytopo.NewFactory()
		return func() topo.Conn {
			c, err := f.NewConn("mem", "/root")
			require.NoError(t, err)
			return &mutantConn{Conn: c, mem: c, name: name}
		}
	}, test.Options{
		ExpireSession: func(t *testing.T, conn topo.Conn) {
			conn.(*mutantConn).mem.ExpireSession()
		},
	})
}

// mutantConn is memorytopo with one deliberate bug.
type mutantConn struct {
	topo.Conn
	mem  *memorytopo.Conn
	name string

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

func (c *mutantConn) Update(ctx context.Context, p string, contents []byte, v topo.Version) (topo.Version, error) {
	switch c.name {
	case "cas-creates-absent":
		if v != nil {
			if _, _, err := c.Conn.Get(ctx, p); topo.IsErrType(err, topo.NoNode) {
				return c.Conn.Update(ctx, p, contents, nil)
			}
		}
	case "stale-versions":
		_, old, err := c.Conn.Get(ctx, p)
		if _, uerr := c.Conn.Update(ctx, p, contents, v); uerr != nil || err != nil {
			return nil, uerr
		}
		return old, nil
	case "stale-reads":
		nv, err := c.Conn.Update(ctx, p, contents, v)
		if err == nil {
			c.remember(p, contents, nv)
		}
		return nv, err
	case "cas-not-atomic":
		if v != nil {
			_, cur, err := c.Conn.Get(ctx, p)
			if err != nil {
				return nil, err
			}
			if cur.String() != v.String() {
				return nil, topo.NewError(topo.BadVersion, p)
			}
			time.Sleep(time.Millisecond) // widen the race window (mutant code, not a test wait)
			return c.Conn.Update(ctx, p, contents, nil)
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
	}
	return c.Conn.Create(ctx, p, contents)
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

func (c *mutantConn) TryLock(ctx context.Context, dir, contents string) (topo.LockDescriptor, error) {
	if c.name == "trylock-blocks" {
		return c.Lock(ctx, dir, contents)
	}
	return c.Conn.TryLock(ctx, dir, contents)
}

func (c *mutantConn) Lock(ctx context.Context, dir, contents string) (topo.LockDescriptor, error) {
	switch c.name {
	case "lock-not-exclusive":
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
	case "unlock-twice-ok":
		l, err := c.Conn.Lock(ctx, dir, contents)
		if err != nil {
			return nil, err
		}
		return &lenientUnlock{LockDescriptor: l}, nil
	}
	return c.Conn.Lock(ctx, dir, contents)
}

// fakeLock is a lock that excludes nobody.
type fakeLock struct{ released bool }

func (l *fakeLock) Check(context.Context) error { return nil }
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
	if c.name != "watchrecursive-ends-on-delete" || err != nil {
		return init, ch, err
	}
	out := make(chan *topo.WatchDataRecursive)
	go func() {
		defer func() {
			for range ch {
			}
		}()
		defer close(out)
		for wd := range ch {
			out <- wd
			if wd.Err != nil {
				return
			}
		}
	}()
	return init, out, nil
}

func (c *mutantConn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	p, err := c.Conn.NewLeaderParticipation(name, id)
	if c.name != "leadership-never-cancelled" || err != nil {
		return p, err
	}
	return &uncancelledLeader{LeaderParticipation: p}, nil
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
