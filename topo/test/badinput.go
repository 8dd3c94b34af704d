package test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// badPaths are rejected by every path rule (file, directory or prefix)
// unless the rule explicitly allows them: "" and "/" name the root for
// directories and prefixes, and a trailing "/" is fine there too.
var badPaths = []struct{ name, path string }{
	{"empty", ""},
	{"root", "/"},
	{"double slash", "a//b"},
	{"leading double slash", "//a"},
	{"dot segment", "a/./b"},
	{"dot", "."},
	{"dotdot segment", "a/../b"},
	{"dotdot", ".."},
	{"leading dotdot", "../a"},
	{"trailing slash", "a/b/"},
	{"NUL", "a/b\x00c"},
	{"control byte", "a/\x01b"},
	{"newline", "a\nb"},
	{"tab", "a\tb"},
	{"DEL", "a/b\x7f"},
	{"invalid UTF-8", "a/\xffb"},
	{"truncated UTF-8", "a/\xe2\x82"},
	{"C1 control (ZooKeeper, Consul)", "a/\u0085"},
	{"not printable (Consul)", "a/\u00a0"},
	{"private use (ZooKeeper, Consul)", "a/\ue000"},
	{"noncharacter (ZooKeeper, Consul)", "a/\uffff"},
	{"above U+FFFF (ZooKeeper)", "a/\U0001f600"},
	{"too long", strings.Repeat("a", topo.MaxPathLength+1)},
	{"too long in segments", strings.Repeat("abcdefg/", topo.MaxPathLength/8) + "tail"},
}

// pathRule says whether path is bad for a kind of method.
type pathRule func(string) (string, error)

// pathCall is one path-taking method called with a bad path.
type pathCall struct {
	method string
	rule   pathRule
	call   func(ctx context.Context, c topo.Conn, p string) error
}

func pathCalls(s *store) []pathCall {
	file, dir, prefix := topo.CleanFilePath, topo.CleanDirPath, topo.CleanPrefix
	calls := []pathCall{
		{"ListDir", dir, func(ctx context.Context, c topo.Conn, p string) error {
			_, err := c.ListDir(ctx, p, true)
			return err
		}},
		{"Create", file, func(ctx context.Context, c topo.Conn, p string) error {
			_, err := c.Create(ctx, p, []byte("x"))
			return err
		}},
		{"Update", file, func(ctx context.Context, c topo.Conn, p string) error {
			_, err := c.Update(ctx, p, []byte("x"), nil)
			return err
		}},
		{"Get", file, func(ctx context.Context, c topo.Conn, p string) error {
			_, _, err := c.Get(ctx, p)
			return err
		}},
		{"GetVersion", file, func(ctx context.Context, c topo.Conn, p string) error {
			_, err := c.GetVersion(ctx, p, 1)
			return err
		}},
		{"List", prefix, func(ctx context.Context, c topo.Conn, p string) error {
			_, err := c.List(ctx, p)
			return err
		}},
		{"Delete", file, func(ctx context.Context, c topo.Conn, p string) error {
			return c.Delete(ctx, p, nil)
		}},
		{"Lock", dir, func(ctx context.Context, c topo.Conn, p string) error {
			l, err := c.Lock(ctx, p, "x")
			releaseIfHeld(l)
			return err
		}},
		{"LockWithTTL", dir, func(ctx context.Context, c topo.Conn, p string) error {
			l, err := c.LockWithTTL(ctx, p, "x", time.Minute)
			releaseIfHeld(l)
			return err
		}},
		{"LockName", dir, func(ctx context.Context, c topo.Conn, p string) error {
			l, err := c.LockName(ctx, p, "x")
			releaseIfHeld(l)
			return err
		}},
		{"TryLock", dir, func(ctx context.Context, c topo.Conn, p string) error {
			l, err := c.TryLock(ctx, p, "x")
			releaseIfHeld(l)
			return err
		}},
		{"Watch", file, func(ctx context.Context, c topo.Conn, p string) error {
			_, ch, err := c.Watch(ctx, p)
			drainNow(ch)
			return err
		}},
		{"WatchRecursive", prefix, func(ctx context.Context, c topo.Conn, p string) error {
			_, ch, err := c.WatchRecursive(ctx, p)
			drainNow(ch)
			return err
		}},
	}
	return calls
}

// releaseIfHeld unlocks a lock a buggy backend granted for a bad path.
func releaseIfHeld(l topo.LockDescriptor) {
	if l != nil {
		ctx, cancel := context.WithTimeout(context.Background(), longWait)
		defer cancel()
		_ = l.Unlock(ctx)
	}
}

// drainNow drains a channel a buggy backend returned for a bad path; its
// context is cancelled by the caller.
func drainNow[T any](ch <-chan T) {
	if ch != nil {
		go func() {
			for range ch {
			}
		}()
	}
}

// testBadPaths: every path-taking method rejects every bad path with
// InvalidPath, and nothing is written to the store.
func testBadPaths(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	mustCreate(t, ctx, c, "keep/f", "keep")
	mustCreate(t, ctx, c, "a/b", "for paths that would name it") // "a/./b" etc. must not reach it
	before := takeSnapshot(t, ctx, c)

	for _, pc := range pathCalls(s) {
		t.Run(pc.method, func(t *testing.T) {
			checked := 0
			for _, bp := range badPaths {
				if _, err := pc.rule(bp.path); err == nil {
					continue // allowed by this kind of path (the root, a trailing "/")
				}
				checked++
				cctx, cancel := context.WithCancel(ctx)
				err := pc.call(cctx, c, bp.path)
				cancel()
				requireCode(t, err, topo.InvalidPath, fmt.Sprintf("%s(%s %q)", pc.method, bp.name, bp.path))
			}
			require.Positive(t, checked)
		})
	}
	requireSameSnapshot(t, ctx, c, before, "a call with a bad path")
	requireFile(t, ctx, c, "a/b", "for paths that would name it", nil)
}

// testBadElectionNames: a participation in an election whose name breaks
// the path rules is refused (InvalidPath or InvalidArgument), by
// NewLeaderParticipation or at the latest by WaitForLeadership.
func testBadElectionNames(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()
	before := takeSnapshot(t, ctx, c)

	for _, bp := range badPaths {
		if _, err := topo.CleanFilePath(bp.path); err == nil || bp.path == "" {
			continue
		}
		what := fmt.Sprintf("election name %s %q", bp.name, bp.path)
		p, err := c.NewLeaderParticipation(bp.path, "id")
		if err == nil {
			_, err = p.WaitForLeadership()
			p.Stop()
		}
		requireOneOf(t, err, what, topo.InvalidPath, topo.InvalidArgument)
	}
	requireSameSnapshot(t, ctx, c, before, "a participation with a bad election name")
}

// testValueSize: values up to MaxValueSize are stored; larger ones are
// InvalidArgument and nothing is written.
func testValueSize(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	maxValue := bytes.Repeat([]byte("m"), topo.MaxValueSize)
	_, err := c.Create(ctx, "max", maxValue)
	require.NoError(t, err, "Create of a MaxValueSize value")
	got, _, err := c.Get(ctx, "max")
	require.NoError(t, err)
	require.True(t, bytes.Equal(maxValue, got), "a MaxValueSize value did not round-trip")

	v := mustCreate(t, ctx, c, "keep", "keep")
	before := takeSnapshot(t, ctx, c)
	big := bytes.Repeat([]byte("b"), topo.MaxValueSize+1)
	_, err = c.Create(ctx, "big", big)
	requireCode(t, err, topo.InvalidArgument, "Create of an oversized value")
	_, err = c.Update(ctx, "big", big, nil)
	requireCode(t, err, topo.InvalidArgument, "Update (creating) of an oversized value")
	_, err = c.Update(ctx, "keep", big, nil)
	requireCode(t, err, topo.InvalidArgument, "Update of an oversized value")
	_, err = c.Update(ctx, "keep", big, v)
	requireCode(t, err, topo.InvalidArgument, "versioned Update of an oversized value")
	requireSameSnapshot(t, ctx, c, before, "a write of an oversized value")
	requireNoFile(t, ctx, c, "big")
	requireFile(t, ctx, c, "keep", "keep", v)
}

// testBadVersions: a version of a foreign type or a negative one is
// InvalidArgument, and nothing is written or deleted.
func testBadVersions(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	v := mustCreate(t, ctx, c, "keep", "keep")
	before := takeSnapshot(t, ctx, c)
	for _, bad := range []topo.Version{foreignVersion{}, topo.NumericVersion(-1), topo.NumericVersion(-1 << 62)} {
		what := fmt.Sprintf("version %q", bad)
		_, err := c.Update(ctx, "keep", []byte("changed"), bad)
		requireCode(t, err, topo.InvalidArgument, "Update with "+what)
		_, err = c.Update(ctx, "absent", []byte("created"), bad)
		requireCode(t, err, topo.InvalidArgument, "Update of an absent file with "+what)
		err = c.Delete(ctx, "keep", bad)
		requireCode(t, err, topo.InvalidArgument, "Delete with "+what)
		err = c.Delete(ctx, "absent", bad)
		requireCode(t, err, topo.InvalidArgument, "Delete of an absent file with "+what)
	}
	_, err := c.GetVersion(ctx, "keep", -1)
	if s.opts.GetVersionUnsupported {
		requireOneOf(t, err, "GetVersion with a negative version", topo.InvalidArgument, topo.NoImplementation)
	} else {
		requireCode(t, err, topo.InvalidArgument, "GetVersion with a negative version")
	}
	requireSameSnapshot(t, ctx, c, before, "a call with a bad version")
	requireFile(t, ctx, c, "keep", "keep", v)
	requireNoFile(t, ctx, c, "absent")
}

// ctxCall is one context-taking call.
type ctxCall struct {
	name string
	call func(ctx context.Context) error
}

// ctxCalls lists every context-taking call, on a store holding keep/f.
func ctxCalls(s *store, c topo.Conn, keep topo.Version) []ctxCall {
	p := participate(s.t, c, "elec", "id")
	n, _ := backendkit.VersionNumber("keep/f", keep)
	return []ctxCall{
		{"ListDir", func(ctx context.Context) error { _, err := c.ListDir(ctx, "keep", true); return err }},
		{"Create", func(ctx context.Context) error { _, err := c.Create(ctx, "keep/new", []byte("x")); return err }},
		{"Update", func(ctx context.Context) error { _, err := c.Update(ctx, "keep/f", []byte("x"), nil); return err }},
		{"Update versioned", func(ctx context.Context) error { _, err := c.Update(ctx, "keep/f", []byte("x"), keep); return err }},
		{"Update creating", func(ctx context.Context) error { _, err := c.Update(ctx, "keep/new", []byte("x"), nil); return err }},
		{"Get", func(ctx context.Context) error { _, _, err := c.Get(ctx, "keep/f"); return err }},
		{"GetVersion", func(ctx context.Context) error { _, err := c.GetVersion(ctx, "keep/f", n); return err }},
		{"List", func(ctx context.Context) error { _, err := c.List(ctx, ""); return err }},
		{"Delete", func(ctx context.Context) error { return c.Delete(ctx, "keep/f", nil) }},
		{"Delete versioned", func(ctx context.Context) error { return c.Delete(ctx, "keep/f", keep) }},
		{"Lock", func(ctx context.Context) error { l, err := c.Lock(ctx, "keep", "x"); releaseIfHeld(l); return err }},
		{"LockWithTTL", func(ctx context.Context) error {
			l, err := c.LockWithTTL(ctx, "keep", "x", time.Minute)
			releaseIfHeld(l)
			return err
		}},
		{"LockName", func(ctx context.Context) error { l, err := c.LockName(ctx, "keep", "x"); releaseIfHeld(l); return err }},
		{"TryLock", func(ctx context.Context) error { l, err := c.TryLock(ctx, "keep", "x"); releaseIfHeld(l); return err }},
		{"Watch", func(ctx context.Context) error { _, ch, err := c.Watch(ctx, "keep/f"); drainNow(ch); return err }},
		{"WatchRecursive", func(ctx context.Context) error {
			_, ch, err := c.WatchRecursive(ctx, "keep/")
			drainNow(ch)
			return err
		}},
		{"GetCurrentLeaderID", func(ctx context.Context) error { _, err := p.GetCurrentLeaderID(ctx); return err }},
	}
}

// testCancelledContext: every call with an already cancelled context
// returns Interrupted and writes nothing.
func testCancelledContext(s *store) {
	testDeadContext(s, cancelledCtx(s.t), topo.Interrupted)
}

// testExpiredContext: every call with a context past its deadline returns
// Timeout and writes nothing.
func testExpiredContext(s *store) {
	testDeadContext(s, expiredCtx(s.t), topo.Timeout)
}

func testDeadContext(s *store, dead context.Context, code topo.ErrorCode) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	keep := mustCreate(t, ctx, c, "keep/f", "keep")
	before := takeSnapshot(t, ctx, c)
	for _, cc := range ctxCalls(s, c, keep) {
		err := cc.call(dead)
		if cc.name == "GetVersion" && s.opts.GetVersionUnsupported {
			requireOneOf(t, err, cc.name, code, topo.NoImplementation)
			continue
		}
		requireCode(t, err, code, cc.name+" with a dead context")
	}
	p := participate(t, c, "elec2", "id")
	if ch, err := p.WaitForNewLeader(dead); err != nil {
		requireCode(t, err, code, "WaitForNewLeader with a dead context")
	} else {
		requireClosedEventually(t, ch, "WaitForNewLeader with a dead context")
	}

	requireSameSnapshot(t, ctx, c, before, "a call with a dead context")
	requireFile(t, ctx, c, "keep/f", "keep", keep)
	// No lock was taken.
	l, err := s.conn().TryLock(ctx, "keep", "probe")
	require.NoError(t, err, "a Lock call with a dead context left the lock held")
	require.NoError(t, l.Unlock(ctx))
}
