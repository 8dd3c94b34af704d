package test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testWatch: the current value first, then changes made through any
// connection, each with the version the write returned.
func testWatch(s *store) {
	t, ctx, c, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()

	v1 := mustCreate(t, ctx, c, "w/f", "one")
	cur, ch := mustWatch(t, ctx, c, "w/f", "Watch(w/f)")
	require.NotNil(t, ch)
	require.NotNil(t, cur)
	require.NoError(t, cur.Err)
	require.Equal(t, "one", string(cur.Contents))
	require.Equal(t, v1.String(), cur.Version.String())

	v2 := mustUpdate(t, ctx, c2, "w/f", "two", nil)
	wd := waitWatchValue(t, ch, "two", "Watch after an update from another connection")
	require.Equal(t, v2.String(), wd.Version.String())

	v3 := mustUpdate(t, ctx, c, "/w/f", "three", v2)
	wd = waitWatchValue(t, ch, "three", "Watch after an update from the watching connection")
	require.Equal(t, v3.String(), wd.Version.String())

	// Writes to other files, even with a common prefix, are not events.
	mustCreate(t, ctx, c2, "w/f2", "other")
	mustCreate(t, ctx, c2, "w/f/child", "child")
	mustUpdate(t, ctx, c2, "w/g", "other", nil)
	requireNothingBut(t, ch, "three", "Watch(w/f) after writes to other files")
}

// requireNothingBut fails t if ch delivers, within shortWait, anything
// other than a repeat of contents.
func requireNothingBut(t *testing.T, ch <-chan *topo.WatchData, contents, what string) {
	t.Helper()
	timeout := time.After(shortWait)
	for {
		select {
		case wd, ok := <-ch:
			require.Truef(t, ok, "%s: channel closed", what)
			require.NoErrorf(t, wd.Err, "%s: unexpected error event", what)
			require.Equalf(t, contents, string(wd.Contents), "%s: unexpected event", what)
		case <-timeout:
			return
		}
	}
}

// testWatchNoNode: watching an absent file is NoNode with no channel.
func testWatchNoNode(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	cur, ch, err := c.Watch(ctx, "absent")
	requireCode(t, err, topo.NoNode, "Watch of an absent file")
	require.Nil(t, ch)
	require.Nil(t, cur)

	mustCreate(t, ctx, c, "dir/f", "x")
	_, ch, err = c.Watch(ctx, "dir/g")
	requireCode(t, err, topo.NoNode, "Watch of an absent file next to another")
	require.Nil(t, ch)
	require.NoError(t, c.Delete(ctx, "dir/f", nil))
	_, ch, err = c.Watch(ctx, "dir/f")
	requireCode(t, err, topo.NoNode, "Watch of a deleted file")
	require.Nil(t, ch)
}

// testWatchDelete: a delete sends NoNode, then the channel closes.
func testWatchDelete(s *store) {
	t, ctx, c, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()

	mustCreate(t, ctx, c, "w/f", "one")
	_, ch := mustWatch(t, ctx, c, "w/f", "Watch(w/f)")
	mustUpdate(t, ctx, c2, "w/f", "two", nil)
	waitWatchValue(t, ch, "two", "Watch before the delete")
	require.NoError(t, c2.Delete(ctx, "w/f", nil))
	waitWatchErr(t, ch, topo.NoNode, "Watch of a deleted file")

	// Re-creating the file does not revive the closed watch; a new watch works.
	mustCreate(t, ctx, c2, "w/f", "again")
	cur, _ := mustWatch(t, ctx, c, "w/f", "second Watch(w/f)")
	require.Equal(t, "again", string(cur.Contents))
}

// testWatchCancel: cancelling the context sends Interrupted and closes.
func testWatchCancel(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	mustCreate(t, ctx, c, "w/f", "one")
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, ch := mustWatch(t, wctx, c, "w/f", "Watch(w/f)")
	mustUpdate(t, ctx, c, "w/f", "two", nil)
	waitWatchValue(t, ch, "two", "Watch before cancel")
	cancel()
	waitWatchErr(t, ch, topo.Interrupted, "Watch after its context was cancelled")

	// The connection and the file are unaffected.
	requireFile(t, ctx, c, "w/f", "two", nil)
	_, ch2 := mustWatch(t, ctx, c, "w/f", "second Watch(w/f)")
	mustUpdate(t, ctx, c, "w/f", "three", nil)
	waitWatchValue(t, ch2, "three", "a new Watch after another was cancelled")
}

// testWatchConverges: after rapid updates the watch delivers the latest
// value, and nothing older after it.
func testWatchConverges(s *store) {
	t, ctx, c, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()

	mustCreate(t, ctx, c, "w/f", "start")
	_, ch := mustWatch(t, ctx, c, "w/f", "Watch(w/f)")
	const n = 30
	var last topo.Version
	for i := range n {
		last = mustUpdate(t, ctx, c2, "w/f", fmt.Sprintf("v%02d", i), nil)
	}
	want := fmt.Sprintf("v%02d", n-1)
	wd := waitWatchValue(t, ch, want, "Watch after rapid updates")
	require.Equal(t, last.String(), wd.Version.String())
	requireNothingBut(t, ch, want, "Watch after it delivered the latest value")
}

// testWatchTwoWatchers: two watches of one file on one connection are
// independent: cancelling one leaves the other running.
func testWatchTwoWatchers(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	mustCreate(t, ctx, c, "w/f", "one")
	ctx1, cancel1 := context.WithCancel(ctx)
	defer cancel1()
	_, ch1 := mustWatch(t, ctx1, c, "w/f", "first Watch(w/f)")
	_, ch2 := mustWatch(t, ctx, c, "w/f", "second Watch(w/f)")

	mustUpdate(t, ctx, c, "w/f", "two", nil)
	waitWatchValue(t, ch1, "two", "first watch")
	waitWatchValue(t, ch2, "two", "second watch")

	cancel1()
	waitWatchErr(t, ch1, topo.Interrupted, "first watch after cancel")
	mustUpdate(t, ctx, c, "w/f", "three", nil)
	waitWatchValue(t, ch2, "three", "second watch after the first was cancelled")
}

// recursiveInitial turns WatchRecursive's initial values into path → value
// and checks each version against Get.
func recursiveInitial(t *testing.T, ctx context.Context, c topo.Conn, init []*topo.WatchDataRecursive) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, wd := range init {
		require.NotNil(t, wd)
		require.NoErrorf(t, wd.Err, "initial value of %q", wd.Path)
		_, dup := got[wd.Path]
		require.Falsef(t, dup, "%q listed twice in WatchRecursive's initial values", wd.Path)
		got[wd.Path] = string(wd.Contents)
		_, v, err := c.Get(ctx, wd.Path)
		require.NoErrorf(t, err, "Get(%q) of a path WatchRecursive listed", wd.Path)
		require.NotNil(t, wd.Version, "initial version of %q", wd.Path)
		require.Equalf(t, v.String(), wd.Version.String(), "initial version of %q", wd.Path)
	}
	return got
}

// testWatchRecursive: initial values with their own versions, then create,
// update and delete events; a delete keeps the channel open.
func testWatchRecursive(s *store) {
	t, ctx, c, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()

	mustCreate(t, ctx, c, "r/a", "a1")
	mustUpdate(t, ctx, c, "r/a", "a1", nil) // a version of its own, not the creation's
	mustCreate(t, ctx, c, "r/b/c", "c1")
	mustCreate(t, ctx, c, "rx", "outside")
	mustCreate(t, ctx, c, "other", "outside")

	init, ch := mustWatchRecursive(t, ctx, c, "r/", "WatchRecursive(r/)")
	require.Equal(t, map[string]string{"r/a": "a1", "r/b/c": "c1"}, recursiveInitial(t, ctx, c, init))

	vd := mustCreate(t, ctx, c2, "r/d", "d1")
	wd := waitRecursive(t, ch, "r/", "create event", func(wd *topo.WatchDataRecursive) bool { return wd.Path == "r/d" })
	require.NoError(t, wd.Err)
	require.Equal(t, "d1", string(wd.Contents))
	require.Equal(t, vd.String(), wd.Version.String())

	va := mustUpdate(t, ctx, c2, "r/a", "a2", nil)
	wd = waitRecursive(t, ch, "r/", "update event", func(wd *topo.WatchDataRecursive) bool {
		return wd.Path == "r/a" && string(wd.Contents) == "a2"
	})
	require.Equal(t, va.String(), wd.Version.String())

	// Writes outside the prefix are never reported (waitRecursive checks
	// every event's path).
	mustUpdate(t, ctx, c2, "rx", "still outside", nil)
	mustCreate(t, ctx, c2, "r", "outside: r/ is the prefix")
	mustUpdate(t, ctx, c2, "other", "still outside", nil)

	require.NoError(t, c2.Delete(ctx, "r/b/c", nil))
	waitRecursive(t, ch, "r/", "delete event", func(wd *topo.WatchDataRecursive) bool {
		return wd.Path == "r/b/c" && topo.IsErrType(wd.Err, topo.NoNode)
	})

	// The channel stays open after a deletion.
	vd2 := mustUpdate(t, ctx, c2, "r/d", "d2", vd)
	wd = waitRecursive(t, ch, "r/", "update after a delete", func(wd *topo.WatchDataRecursive) bool {
		return wd.Path == "r/d" && string(wd.Contents) == "d2"
	})
	require.Equal(t, vd2.String(), wd.Version.String())

	// Deep creates are reported too.
	mustCreate(t, ctx, c2, "r/x/y/z", "deep")
	waitRecursive(t, ch, "r/", "deep create", func(wd *topo.WatchDataRecursive) bool {
		return wd.Path == "r/x/y/z" && string(wd.Contents) == "deep"
	})
}

// testWatchRecursivePlainPrefix: the prefix is a plain string prefix, and a
// leading "/" changes nothing.
func testWatchRecursivePlainPrefix(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	for _, p := range []string{"r/a", "rx/b", "r", "s"} {
		mustCreate(t, ctx, c, p, p)
	}
	want := []string{"r", "r/a", "rx/b"}
	for i, prefix := range []string{"r", "/r"} {
		init, ch := mustWatchRecursive(t, ctx, c, prefix, "WatchRecursive("+prefix+")")
		got := recursiveInitial(t, ctx, c, init)
		require.Equalf(t, want, slices.Sorted(maps.Keys(got)), "WatchRecursive(%q) initial paths", prefix)

		created := fmt.Sprintf("ry%d", i)
		mustCreate(t, ctx, c, created, "new")
		want = append(want, created)
		waitRecursive(t, ch, "r", "create matching the plain prefix", func(wd *topo.WatchDataRecursive) bool {
			return wd.Path == created
		})
	}
	init, _ := mustWatchRecursive(t, ctx, c, "", "WatchRecursive of the root")
	require.Len(t, recursiveInitial(t, ctx, c, init), 6)
}

// testWatchRecursiveEmpty: a prefix nothing matches is not an error; files
// created later are reported.
func testWatchRecursiveEmpty(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	init, ch, err := c.WatchRecursive(ctx, "empty/")
	require.NoError(t, err, "WatchRecursive of a prefix that matches nothing")
	drainOnCleanup(t, ch, "WatchRecursive(empty/)")
	require.Empty(t, init)

	v := mustCreate(t, ctx, s.conn(), "empty/f", "first")
	wd := waitRecursive(t, ch, "empty/", "create under an empty prefix", func(wd *topo.WatchDataRecursive) bool { return wd.Path == "empty/f" })
	require.NoError(t, wd.Err)
	require.Equal(t, "first", string(wd.Contents))
	require.Equal(t, v.String(), wd.Version.String())
}

// testWatchRecursiveCancel: cancelling sends Interrupted, then closes.
func testWatchRecursiveCancel(s *store) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()

	mustCreate(t, ctx, c, "r/a", "a")
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, ch := mustWatchRecursive(t, wctx, c, "r", "WatchRecursive(r)")
	mustUpdate(t, ctx, c, "r/a", "b", nil)
	waitRecursive(t, ch, "r", "update before cancel", func(wd *topo.WatchDataRecursive) bool { return string(wd.Contents) == "b" })
	cancel()
	waitRecursiveErr(t, ch, topo.Interrupted, "WatchRecursive after cancel")

	// Other watches and the connection are unaffected.
	_, ch2 := mustWatchRecursive(t, ctx, c, "r", "second WatchRecursive(r)")
	mustUpdate(t, ctx, c, "r/a", "c", nil)
	waitRecursive(t, ch2, "r", "a new watch after cancel", func(wd *topo.WatchDataRecursive) bool { return string(wd.Contents) == "c" })
}

// testWatchRecursiveConverges: after rapid writes to several files, every
// file's last value is reported (events may be coalesced, never lost). A
// file created and deleted between two of the watch's reads may never be
// reported at all (its creation and deletion coalesce into nothing); one
// that was reported must be reported deleted.
func testWatchRecursiveConverges(s *store) {
	t, ctx, c, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()

	const files, writes = 3, 10
	_, ch := mustWatchRecursive(t, ctx, c, "r/", "WatchRecursive(r/)")
	want := map[string]string{}
	for i := range writes {
		for f := range files {
			p := fmt.Sprintf("r/f%d", f)
			want[p] = fmt.Sprintf("v%02d", i)
			mustUpdate(t, ctx, c2, p, want[p], nil)
		}
	}
	require.NoError(t, c2.Delete(ctx, "r/f0", nil))
	want["r/f0"] = "deleted"
	seen := map[string]string{}
	waitRecursive(t, ch, "r/", "convergence after rapid writes", func(wd *topo.WatchDataRecursive) bool {
		if wd.Err != nil {
			seen[wd.Path] = "deleted"
		} else {
			seen[wd.Path] = string(wd.Contents)
		}
		w := want
		if _, ok := seen["r/f0"]; !ok {
			w = maps.Clone(want)
			delete(w, "r/f0")
		}
		return maps.Equal(seen, w)
	})
}

// testPartitionWatches: a Watch of a file updated, a Watch of a file
// deleted and re-created, and a WatchRecursive, on a Conn cut off from the
// store while another Conn writes, catch up once the partition heals or
// end with an error: none keeps running on a value the store no longer
// holds. The first delivers the latest value (or ends Unavailable: the
// store may have ended the Conn's session meanwhile), the second ends with
// NoNode (or Unavailable), never with the new file's value as a change;
// the third reports every file's latest state (or ends).
func testPartitionWatches(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	a := s.partitioned()
	b := s.conn()

	for _, f := range []string{"w/f", "w/g", "w/old"} {
		mustCreate(t, ctx, b, f, "v0")
	}
	_, chF := mustWatch(t, ctx, a.Conn, "w/f", "Watch(w/f) on the Conn to cut")
	_, chG := mustWatch(t, ctx, a.Conn, "w/g", "Watch(w/g) on the Conn to cut")
	init, chR := mustWatchRecursive(t, ctx, a.Conn, "w/", "WatchRecursive(w/) on the Conn to cut")
	files := recursiveInitial(t, ctx, b, init)

	a.Cut()
	mustUpdate(t, ctx, b, "w/f", "v1", nil)
	mustUpdate(t, ctx, b, "w/f", "v2", nil)
	require.NoError(t, b.Delete(ctx, "w/g", nil))
	mustCreate(t, ctx, b, "w/g", "another")
	require.NoError(t, b.Delete(ctx, "w/old", nil))
	mustCreate(t, ctx, b, "w/new", "n")
	a.Heal()

	// w/f: the latest value, or an end other than a deletion.
	for f := "v0"; f != "v2"; {
		wd, ok := recv(t, chF, "Watch(w/f) after the partition healed")
		require.True(t, ok, "Watch(w/f) closed without an error after the partition healed")
		if wd.Err != nil {
			requireCode(t, wd.Err, topo.Unavailable, "the end of Watch(w/f), whose file was never deleted, after the partition")
			break
		}
		f = string(wd.Contents)
	}
	// w/g: its deletion, whatever came after it.
	for {
		wd, ok := recv(t, chG, "Watch(w/g) after the partition healed")
		require.True(t, ok, "Watch(w/g) closed without an error after the partition healed")
		if wd.Err != nil {
			requireOneOf(t, wd.Err, "the end of Watch(w/g), deleted and re-created during the partition", topo.NoNode, topo.Unavailable)
			break
		}
		require.NotEqualf(t, "another", string(wd.Contents), "Watch(w/g) sent the re-created file's value as a change of the deleted one")
	}
	// w/: every file's latest state.
	want := map[string]string{"w/f": "v2", "w/g": "another", "w/new": "n"}
	for !maps.Equal(files, want) {
		wd, ok := recv(t, chR, "WatchRecursive(w/) after the partition healed")
		require.True(t, ok, "WatchRecursive(w/) closed without an error after the partition healed")
		switch {
		case topo.IsErrType(wd.Err, topo.NoNode):
			delete(files, wd.Path)
		case wd.Err != nil:
			requireCode(t, wd.Err, topo.Unavailable, "the end of WatchRecursive(w/) after the partition")
			return
		default:
			files[wd.Path] = string(wd.Contents)
		}
	}
}
