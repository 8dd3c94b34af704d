package test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// Waits used by the suite. None of them is a timing assertion: longWait
// bounds things that must happen (a generous limit so that a slow CI machine
// under -race never fails a correct backend), shortWait is how long the suite
// watches for something that must NOT happen (a blocked Lock returning, a
// second leader), and poll is the polling interval of require.Eventually.
//
// promptWait bounds calls that must return without waiting for another
// holder (TryLock): generous for a loaded machine, but far below a lock
// wait such as Consul's default 15 s LockWaitTime.
const (
	promptWait = 5 * time.Second
	longWait   = 30 * time.Second
	shortWait  = 300 * time.Millisecond
	poll       = 10 * time.Millisecond
)

// store is one subtest's fresh, isolated store.
type store struct {
	t    *testing.T
	open func() topo.Conn
	opts Options
}

// conn opens a new connection (with its own session or lease) to the
// subtest's store and closes it when the subtest ends.
func (s *store) conn() topo.Conn {
	s.t.Helper()
	c := s.open()
	require.NotNil(s.t, c, "the store's opener returned a nil Conn")
	s.t.Cleanup(c.Close)
	return c
}

// conns opens n connections with s.conn, in order.
func (s *store) conns(n int) []topo.Conn {
	s.t.Helper()
	out := make([]topo.Conn, n)
	for i := range out {
		out[i] = s.conn()
	}
	return out
}

// ctx returns a context for the subtest's calls: cancelled when the subtest
// ends (before its cleanups run) and bounded by a generous deadline so that
// a hung backend fails instead of blocking the whole run.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 3*longWait)
	t.Cleanup(cancel)
	return ctx
}

// shortCtx returns a context that expires after d.
func shortCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// cancelledCtx returns a context that is already cancelled.
func cancelledCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}

// expiredCtx returns a context whose deadline has already passed.
func expiredCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	t.Cleanup(cancel)
	return ctx
}

// requireCode fails t unless err is a *topo.Error (found with errors.As)
// carrying code (checked with errors.Is).
func requireCode(t testing.TB, err error, code topo.ErrorCode, what string) {
	t.Helper()
	require.Errorf(t, err, "%s: want a %q error, got nil", what, code)
	require.Truef(t, errors.Is(err, code), "%s: want a %q error, got %q (%T)", what, code, err, err)
	var te *topo.Error
	require.Truef(t, errors.As(err, &te), "%s: error %q (%T) is not a *topo.Error", what, err, err)
	require.Truef(t, topo.IsErrType(err, code), "%s: IsErrType(%q, %q) is false", what, err, code)
}

// requireOneOf fails t unless err is a *topo.Error carrying one of codes.
func requireOneOf(t testing.TB, err error, what string, codes ...topo.ErrorCode) {
	t.Helper()
	require.Errorf(t, err, "%s: want one of %v, got nil", what, codes)
	var te *topo.Error
	require.Truef(t, errors.As(err, &te), "%s: error %q (%T) is not a *topo.Error", what, err, err)
	for _, c := range codes {
		if errors.Is(err, c) {
			return
		}
	}
	require.Failf(t, "wrong error code", "%s: want one of %v, got %q", what, codes, err)
}

// requireNamesPath fails t unless err's message mentions path.
func requireNamesPath(t testing.TB, err error, path string) {
	t.Helper()
	require.Error(t, err)
	require.Containsf(t, err.Error(), path, "the error message %q does not name the path %q", err, path)
}

// mustCreate creates path holding contents and returns its version.
func mustCreate(t testing.TB, ctx context.Context, c topo.Conn, path, contents string) topo.Version {
	t.Helper()
	v, err := c.Create(ctx, path, []byte(contents))
	require.NoErrorf(t, err, "Create(%q)", path)
	require.NotNilf(t, v, "Create(%q) returned a nil version", path)
	return v
}

// mustUpdate writes path unconditionally (or with version) and returns the new version.
func mustUpdate(t testing.TB, ctx context.Context, c topo.Conn, path, contents string, version topo.Version) topo.Version {
	t.Helper()
	v, err := c.Update(ctx, path, []byte(contents), version)
	require.NoErrorf(t, err, "Update(%q)", path)
	require.NotNilf(t, v, "Update(%q) returned a nil version", path)
	return v
}

// requireFile fails t unless path holds contents at version (version nil: any).
func requireFile(t testing.TB, ctx context.Context, c topo.Conn, path, contents string, version topo.Version) {
	t.Helper()
	got, v, err := c.Get(ctx, path)
	require.NoErrorf(t, err, "Get(%q)", path)
	require.Equalf(t, contents, string(got), "contents of %q", path)
	if version != nil {
		require.Equalf(t, version.String(), v.String(), "version of %q", path)
	}
}

// requireNoFile fails t unless Get(path) returns NoNode.
func requireNoFile(t testing.TB, ctx context.Context, c topo.Conn, path string) {
	t.Helper()
	_, _, err := c.Get(ctx, path)
	requireCode(t, err, topo.NoNode, fmt.Sprintf("Get(%q) of a file that must not exist", path))
}

// names returns the names of entries, in order.
func names(entries []topo.DirEntry) []string {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name)
	}
	return out
}

// requireSortedNames fails t unless entries are sorted by name and named want.
func requireSortedNames(t testing.TB, entries []topo.DirEntry, want []string, what string) {
	t.Helper()
	got := names(entries)
	require.Truef(t, slices.IsSorted(got), "%s: entries not sorted by name: %q", what, got)
	require.Equalf(t, want, got, "%s: entry names", what)
}

// entry returns the entry called name, failing t if there is none.
func entry(t testing.TB, entries []topo.DirEntry, name string) topo.DirEntry {
	t.Helper()
	for _, e := range entries {
		if e.Name == name {
			return e
		}
	}
	require.Failf(t, "missing entry", "no entry %q in %q", name, names(entries))
	return topo.DirEntry{}
}

// kvPaths returns the paths of kvs, in order.
func kvPaths(kvs []topo.KVInfo) []string {
	out := make([]string, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, kv.Path)
	}
	return out
}

// snapshot is the observable content of a store: every file with its value
// and version, and the root listing. Bad-input tests compare snapshots taken
// before and after to check that nothing was written.
type snapshot struct {
	files []string
	root  []topo.DirEntry
}

func takeSnapshot(t testing.TB, ctx context.Context, c topo.Conn) snapshot {
	t.Helper()
	var s snapshot
	kvs, err := c.List(ctx, "")
	if !topo.IsErrType(err, topo.NoNode) {
		require.NoError(t, err, "List of the root")
	}
	for _, kv := range kvs {
		s.files = append(s.files, fmt.Sprintf("%s=%q@%s", kv.Path, kv.Value, kv.Version))
	}
	s.root, err = c.ListDir(ctx, "", true)
	if !topo.IsErrType(err, topo.NoNode) {
		require.NoError(t, err, "ListDir of the root")
	}
	return s
}

func requireSameSnapshot(t testing.TB, ctx context.Context, c topo.Conn, before snapshot, what string) {
	t.Helper()
	after := takeSnapshot(t, ctx, c)
	require.Equalf(t, before.files, after.files, "%s wrote to the store (List of the root changed)", what)
	require.Equalf(t, before.root, after.root, "%s wrote to the store (ListDir of the root changed)", what)
}

// recv receives one value from ch within longWait; ok is false when ch closed.
func recv[T any](t testing.TB, ch <-chan T, what string) (T, bool) {
	t.Helper()
	select {
	case v, ok := <-ch:
		return v, ok
	case <-time.After(longWait):
		require.FailNowf(t, "timed out", "%s: nothing received within %v", what, longWait)
		var zero T
		return zero, false
	}
}

// requireClosed fails t unless ch closes within longWait without sending.
func requireClosed[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	v, ok := recv(t, ch, what)
	require.Falsef(t, ok, "%s: want the channel closed, got %+v", what, v)
}

// requireNothing fails t if ch delivers anything (or closes) within shortWait.
func requireNothing[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	select {
	case v, ok := <-ch:
		require.FailNowf(t, "unexpected", "%s: got %+v (open: %v), want nothing yet", what, v, ok)
	case <-time.After(shortWait):
	}
}

// drainOnCleanup drains ch when the subtest ends (its context is cancelled
// then, so a correct backend closes ch), so no backend goroutine stays
// blocked sending on it. It reports a channel that does not close.
func drainOnCleanup[T any](t *testing.T, ch <-chan T, what string) {
	if ch == nil {
		return
	}
	t.Cleanup(func() {
		timeout := time.After(longWait)
		for {
			select {
			case _, ok := <-ch:
				if !ok {
					return
				}
			case <-timeout:
				t.Errorf("%s: channel not closed %v after its context ended", what, longWait)
				return
			}
		}
	})
}

// mustWatch starts c.Watch(ctx, path), failing t on an error, and drains
// its channel (labelled what) when the subtest ends.
func mustWatch(t *testing.T, ctx context.Context, c topo.Conn, path, what string) (*topo.WatchData, <-chan *topo.WatchData) {
	t.Helper()
	cur, ch, err := c.Watch(ctx, path)
	require.NoError(t, err)
	drainOnCleanup(t, ch, what)
	return cur, ch
}

// mustWatchRecursive is mustWatch for c.WatchRecursive(ctx, prefix).
func mustWatchRecursive(t *testing.T, ctx context.Context, c topo.Conn, prefix, what string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive) {
	t.Helper()
	init, ch, err := c.WatchRecursive(ctx, prefix)
	require.NoError(t, err)
	drainOnCleanup(t, ch, what)
	return init, ch
}

// mustWaitForNewLeader starts p.WaitForNewLeader(ctx), failing t on an
// error, and drains its channel when the subtest ends.
func mustWaitForNewLeader(t *testing.T, ctx context.Context, p topo.LeaderParticipation) <-chan string {
	t.Helper()
	ch, err := p.WaitForNewLeader(ctx)
	require.NoError(t, err)
	drainOnCleanup(t, ch, "WaitForNewLeader")
	return ch
}

// waitWatchValue reads events from ch until one carries contents, and
// returns it. It fails on an error event or when ch closes.
func waitWatchValue(t testing.TB, ch <-chan *topo.WatchData, contents, what string) *topo.WatchData {
	t.Helper()
	for {
		wd, ok := recv(t, ch, what)
		require.Truef(t, ok, "%s: channel closed while waiting for %q", what, contents)
		require.NotNilf(t, wd, "%s: nil WatchData", what)
		require.NoErrorf(t, wd.Err, "%s: error event while waiting for %q", what, contents)
		if string(wd.Contents) == contents {
			return wd
		}
	}
}

// waitWatchErr reads events from ch until an error event, requires it to
// carry code, and requires ch to close right after it.
func waitWatchErr(t testing.TB, ch <-chan *topo.WatchData, code topo.ErrorCode, what string) {
	t.Helper()
	for {
		wd, ok := recv(t, ch, what)
		require.Truef(t, ok, "%s: channel closed without a %q event", what, code)
		require.NotNilf(t, wd, "%s: nil WatchData", what)
		if wd.Err != nil {
			requireCode(t, wd.Err, code, what+": final event")
			requireClosed(t, ch, what+": after the final event")
			return
		}
	}
}

// waitRecursive reads events from ch until match returns true for one, and
// returns it. Every event must be for a path starting with prefix; an error
// event other than a NoNode (deletion) fails t.
func waitRecursive(t testing.TB, ch <-chan *topo.WatchDataRecursive, prefix, what string, match func(*topo.WatchDataRecursive) bool) *topo.WatchDataRecursive {
	t.Helper()
	for {
		wd, ok := recv(t, ch, what)
		require.Truef(t, ok, "%s: channel closed", what)
		require.NotNilf(t, wd, "%s: nil WatchDataRecursive", what)
		require.Truef(t, strings.HasPrefix(wd.Path, prefix), "%s: event for %q, outside the prefix %q", what, wd.Path, prefix)
		if wd.Err != nil {
			requireCode(t, wd.Err, topo.NoNode, what+": error event (only deletions may carry an error before the end)")
		}
		if match(wd) {
			return wd
		}
	}
}

// waitRecursiveErr reads events until an error event other than a deletion,
// requires it to carry code, and requires ch to close after it.
func waitRecursiveErr(t testing.TB, ch <-chan *topo.WatchDataRecursive, code topo.ErrorCode, what string) {
	t.Helper()
	for {
		wd, ok := recv(t, ch, what)
		require.Truef(t, ok, "%s: channel closed without a %q event", what, code)
		require.NotNilf(t, wd, "%s: nil WatchDataRecursive", what)
		if wd.Err != nil && !topo.IsErrType(wd.Err, topo.NoNode) {
			requireCode(t, wd.Err, code, what+": final event")
			requireClosed(t, ch, what+": after the final event")
			return
		}
	}
}

// requireNoWorkerErrs waits for the workers in wg, then fails t on the
// first error they sent to errs (which it closes).
func requireNoWorkerErrs(t testing.TB, wg *sync.WaitGroup, errs chan error) {
	t.Helper()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// stopOnCleanup stops p when the subtest ends.
func stopOnCleanup(t *testing.T, p topo.LeaderParticipation) {
	t.Cleanup(p.Stop)
}

// unlockOnCleanup releases l when the subtest ends, ignoring errors (the
// test may have released it already).
func unlockOnCleanup(t *testing.T, l topo.LockDescriptor) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), longWait)
		defer cancel()
		_ = l.Unlock(ctx)
	})
}

// mustLock takes the lock on dir through c and releases it when the
// subtest ends.
func mustLock(t *testing.T, ctx context.Context, c topo.Conn, dir, name string) topo.LockDescriptor {
	t.Helper()
	l, err := c.Lock(ctx, dir, name)
	require.NoError(t, err)
	unlockOnCleanup(t, l)
	return l
}

// lockResult is the outcome of a Lock run in a goroutine.
type lockResult struct {
	l   topo.LockDescriptor
	err error
}

// lockAsync runs lock in a goroutine and returns a channel with its outcome.
// A lock it obtains is released when the subtest ends.
func lockAsync(t *testing.T, lock func() (topo.LockDescriptor, error)) <-chan lockResult {
	ch := make(chan lockResult, 1)
	done := make(chan struct{})
	var res lockResult
	go func() {
		l, err := lock()
		res = lockResult{l, err}
		ch <- res
		close(done)
	}()
	t.Cleanup(func() {
		// The subtest's context is cancelled by now, so a Lock still
		// waiting returns soon.
		select {
		case <-done:
			if res.err == nil && res.l != nil {
				ctx, cancel := context.WithTimeout(context.Background(), longWait)
				defer cancel()
				_ = res.l.Unlock(ctx)
			}
		case <-time.After(longWait):
			t.Errorf("a Lock call did not return %v after its context ended", longWait)
		}
	})
	return ch
}

// leadResult is the outcome of a WaitForLeadership run in a goroutine.
type leadResult struct {
	ctx context.Context
	err error
}

func leadAsync(p topo.LeaderParticipation) <-chan leadResult {
	ch := make(chan leadResult, 1)
	go func() {
		ctx, err := p.WaitForLeadership()
		ch <- leadResult{ctx, err}
	}()
	return ch
}

// requireDone fails t unless ctx ends within longWait.
func requireDone(t testing.TB, ctx context.Context, what string) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(longWait):
		require.FailNowf(t, "timed out", "%s: context not cancelled within %v", what, longWait)
	}
}

// foreignVersion is a Version no backend issued.
type foreignVersion struct{}

func (foreignVersion) String() string { return "foreign" }

// eventually polls cond every poll interval until it returns true or
// longWait passes, and reports whether it returned true.
func eventually(cond func() bool) bool {
	if cond() {
		return true
	}
	timeout := time.After(longWait)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-timeout:
			return cond()
		case <-tick.C:
			if cond() {
				return true
			}
		}
	}
}

// participate joins election name as id on c, and stops the participation
// when the subtest ends.
func participate(t *testing.T, c topo.Conn, name, id string) topo.LeaderParticipation {
	t.Helper()
	p, err := c.NewLeaderParticipation(name, id)
	require.NoError(t, err)
	stopOnCleanup(t, p)
	return p
}
