package vitessinterop

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vtopo "vitess.io/vitess/go/vt/topo"

	"github.com/topokit/topokit/topo"
)

// TestFileRoundTrip writes files through each library and reads them
// through the other: the same bytes, the same version (as a string), and
// compare-and-set across libraries: a version one library returned is
// current for the other, and stale after the other's write.
func TestFileRoundTrip(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			vc, tc := s.vitess(t, root), s.topokit(t, root)
			b1 := []byte("\x00vitess\xff\n")
			b2 := []byte("topokit\x00\x01")
			b3 := []byte(`{"vitess":3}`)

			vv1, err := vc.Create(ctx, "a/x", b1)
			require.NoError(t, err)
			got, tv1, err := tc.Get(ctx, "a/x")
			require.NoError(t, err)
			assert.Equal(t, b1, got)
			assert.Equal(t, vv1.String(), tv1.String(), "version of Vitess's Create read by topokit")
			_, err = tc.Create(ctx, "a/x", b2)
			assert.True(t, topo.IsErrType(err, topo.NodeExists), "topokit Create over Vitess's file: %v", err)

			tv2, err := tc.Update(ctx, "a/x", b2, tv1)
			require.NoError(t, err, "topokit Update with the version Vitess created")
			got, vv2, err := vc.Get(ctx, "a/x")
			require.NoError(t, err)
			assert.Equal(t, b2, got)
			assert.Equal(t, tv2.String(), vv2.String(), "version of topokit's Update read by Vitess")
			_, err = vc.Update(ctx, "a/x", b3, vv1)
			assert.True(t, vtopo.IsErrType(err, vtopo.BadVersion), "Vitess Update with a version topokit's write made stale: %v", err)

			vv3, err := vc.Update(ctx, "a/x", b3, vv2)
			require.NoError(t, err, "Vitess Update with the version topokit wrote")
			_, err = tc.Update(ctx, "a/x", b1, tv2)
			assert.True(t, topo.IsErrType(err, topo.BadVersion), "topokit Update with a version Vitess's write made stale: %v", err)
			err = tc.Delete(ctx, "a/x", tv2)
			assert.True(t, topo.IsErrType(err, topo.BadVersion), "topokit Delete with a stale version: %v", err)
			got, tv3, err := tc.Get(ctx, "a/x")
			require.NoError(t, err)
			assert.Equal(t, b3, got)
			assert.Equal(t, vv3.String(), tv3.String())

			require.NoError(t, tc.Delete(ctx, "a/x", tv3), "topokit Delete with the version Vitess wrote")
			_, _, err = vc.Get(ctx, "a/x")
			assert.True(t, vtopo.IsErrType(err, vtopo.NoNode), "Vitess Get after topokit's Delete: %v", err)

			tv, err := tc.Create(ctx, "a/y", b2)
			require.NoError(t, err)
			got, vv, err := vc.Get(ctx, "a/y")
			require.NoError(t, err)
			assert.Equal(t, b2, got)
			assert.Equal(t, tv.String(), vv.String(), "version of topokit's Create read by Vitess")
			require.NoError(t, vc.Delete(ctx, "a/y", vv), "Vitess Delete with the version topokit created")
			_, _, err = tc.Get(ctx, "a/y")
			assert.True(t, topo.IsErrType(err, topo.NoNode), "topokit Get after Vitess's Delete: %v", err)
		})
	}
}

// TestWatchAcross watches a file with each library while the other writes
// it: every watch sees the other's contents with the version the writer
// got, and the delete.
func TestWatchAcross(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			vc, tc := s.vitess(t, root), s.topokit(t, root)
			_, err := vc.Create(ctx, "w/f", []byte("v0"))
			require.NoError(t, err)
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			tcur, tch, err := tc.Watch(wctx, "w/f")
			require.NoError(t, err)
			assert.Equal(t, "v0", string(tcur.Contents))
			vcur, vch, err := vc.Watch(wctx, "w/f")
			require.NoError(t, err)
			assert.Equal(t, "v0", string(vcur.Contents))

			// Watches may coalesce: read until the expected contents.
			waitT := func(want string, ver string) {
				t.Helper()
				for wd := range tch {
					require.NoError(t, wd.Err, "topokit watch")
					if string(wd.Contents) == want {
						assert.Equal(t, ver, wd.Version.String())
						return
					}
				}
				t.Fatalf("topokit watch closed before %q", want)
			}
			waitV := func(want string, ver string) {
				t.Helper()
				for wd := range vch {
					require.NoError(t, wd.Err, "Vitess watch")
					if string(wd.Contents) == want {
						assert.Equal(t, ver, wd.Version.String())
						return
					}
				}
				t.Fatalf("Vitess watch closed before %q", want)
			}
			vv, err := vc.Update(ctx, "w/f", []byte("by-vitess"), nil)
			require.NoError(t, err)
			waitT("by-vitess", vv.String())
			waitV("by-vitess", vv.String())
			tv, err := tc.Update(ctx, "w/f", []byte("by-topokit"), nil)
			require.NoError(t, err)
			waitV("by-topokit", tv.String())
			waitT("by-topokit", tv.String())

			require.NoError(t, vc.Delete(ctx, "w/f", nil))
			var last *topo.WatchData
			for wd := range tch {
				last = wd
			}
			require.NotNil(t, last)
			assert.True(t, topo.IsErrType(last.Err, topo.NoNode), "topokit watch's last event after Vitess's Delete: %v", last.Err)
			// Vitess's watch ends too. Reading its channel to its close
			// also keeps the test from closing vc under a running watch:
			// Vitess's consultopo Close clears the client its watch
			// goroutine reads, unsynchronized (a data race under -race).
			var vlast *vtopo.WatchData
			for wd := range vch {
				vlast = wd
			}
			require.NotNil(t, vlast)
			assert.True(t, vtopo.IsErrType(vlast.Err, vtopo.NoNode), "Vitess watch's last event after its Delete: %v", vlast.Err)
		})
	}
}

// entries renders a full ListDir of either library for comparison.
type entry struct {
	Name      string
	Dir       bool
	Ephemeral bool
}

func vitessEntries(es []vtopo.DirEntry) []entry {
	out := make([]entry, 0, len(es))
	for _, e := range es {
		out = append(out, entry{e.Name, e.Type == vtopo.TypeDirectory, e.Ephemeral})
	}
	return out
}

func topokitEntries(es []topo.DirEntry) []entry {
	out := make([]entry, 0, len(es))
	for _, e := range es {
		out = append(out, entry{e.Name, e.Type == topo.TypeDirectory, e.Ephemeral})
	}
	return out
}

// listDirBoth lists dir with both libraries, full, and returns both.
func listDirBoth(ctx context.Context, t *testing.T, vc vtopo.Conn, tc topo.Conn, dir string) (v, k []entry) {
	t.Helper()
	ve, err := vc.ListDir(ctx, dir, true)
	require.NoError(t, err, "Vitess ListDir %q", dir)
	te, err := tc.ListDir(ctx, dir, true)
	require.NoError(t, err, "topokit ListDir %q", dir)
	return vitessEntries(ve), topokitEntries(te)
}

// file is one List result, path relative to the root.
type file struct {
	Path, Value, Version string
}

func vitessList(ctx context.Context, t *testing.T, vc vtopo.Conn, root, prefix string) []file {
	t.Helper()
	kvs, err := vc.List(ctx, prefix)
	require.NoError(t, err, "Vitess List %q", prefix)
	var out []file
	for _, kv := range kvs {
		p := strings.TrimPrefix(strings.TrimPrefix(string(kv.Key), "/"), strings.TrimPrefix(root, "/")+"/")
		out = append(out, file{p, string(kv.Value), kv.Version.String()})
	}
	return out
}

func topokitFiles(kvs []topo.KVInfo) []file {
	var out []file
	for _, kv := range kvs {
		out = append(out, file{kv.Path, string(kv.Value), kv.Version.String()})
	}
	return out
}

// topokitView is what topokit's full ListDir of dir must return (nil:
// NoNode), given Vitess's own listing of it, on
// the backend called backend. topokit follows Vitess, with these
// documented differences (docs/layout-*.md), all on entries Vitess does
// not read itself:
//   - Lock and election entries are Ephemeral, as topo.Conn.ListDir
//     promises (and Vitess's etcd2topo does). Vitess's zk2topo marks only
//     znodes with an ephemeral owner, so not a lock's persistent locks
//     znode nor an election's elections/<name> znode (its lock.go says so
//     and ignores the flag), and Vitess's consultopo does not mark election
//     keys (elections/<name>, held by a session).
//   - On ZooKeeper, the candidates under elections/<name> are not listed
//     (they are not files), so a listing of elections/<name> is NoNode.
//
// The top-level elections entry is compared separately
// (TestElectionsEntryEphemeral): elections is marked as in Vitess's.
func topokitView(backend, dir string, vitess []entry) []entry {
	if backend == "zk" && strings.HasPrefix(dir, "elections/") {
		return nil
	}
	out := make([]entry, 0, len(vitess))
	for _, e := range vitess {
		if backend == "etcd" && dir == "elections" && e.Name == "\x00values" {
			// topokit's published leader values (elections/\x00values/,
			// where no Vitess election can read them): Vitess's ListDir
			// shows the directory, topokit's hides it.
			continue
		}
		switch {
		case dir == "" && e.Name == "elections":
			e.Ephemeral = false // compared by TestElectionsEntryEphemeral
		case backend == "zk" && e.Name == "locks" && e.Dir:
			e.Ephemeral = true
		case backend == "consul" && e.Name == "locks" && e.Dir:
			// The queue of topokit's waiting candidate
			// (elections/el/locks/queue/), Ephemeral as etcd's locks.
			e.Ephemeral = true
		case backend == "consul" && dir == "elections":
			// el is the election key and the directory of the topokit
			// candidate's queue entry: topokit lists it once, as a
			// directory; Vitess shows the key.
			e.Ephemeral, e.Dir = true, true
		case backend == "zk" && dir == "elections":
			e.Ephemeral = true
		}
		out = append(out, e)
	}
	return out
}

// withoutElectionsFlag clears the top-level elections entry's Ephemeral
// flag of a root listing (compared by TestElectionsEntryEphemeral).
func withoutElectionsFlag(dir string, es []entry) []entry {
	for i := range es {
		if dir == "" && es[i].Name == "elections" {
			es[i].Ephemeral = false
		}
	}
	return es
}

// vitessTree has Vitess hold a lock on t, and lead election el with a
// topokit candidate waiting behind it, until the end of t.
func vitessTree(ctx context.Context, t *testing.T, s store, root string, vc vtopo.Conn, tc topo.Conn) {
	t.Helper()
	vld, err := vc.Lock(ctx, "t", "vitess-holder")
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, vld.Unlock(context.Background())) })
	leader, err := vc.NewLeaderParticipation("el", "vitess-leader")
	require.NoError(t, err)
	_, err = leader.WaitForLeadership()
	require.NoError(t, err)
	t.Cleanup(leader.Stop)
	waiter, err := tc.NewLeaderParticipation("el", "topokit-waiter")
	require.NoError(t, err)
	waiting := make(chan error, 1)
	go func() {
		_, err := waiter.WaitForLeadership()
		waiting <- err
	}()
	t.Cleanup(func() {
		waiter.Stop()
		<-waiting
	})
	s.waitCandidates(ctx, t, root, "el", 2)
	if s.name == "consul" {
		// topokit's waiting candidate queues in a key of its own,
		// elections/el/locks/queue/<entry> (docs/layout-consul.md, "Fair
		// order"), which Vitess never reads: wait for it, so that the
		// listings see it.
		waitConsulKeys(ctx, t, root+"/elections/el/locks/queue/", 1)
	}
}

// waitConsulKeys polls, with a raw Consul client, until n keys are under
// prefix.
func waitConsulKeys(ctx context.Context, t *testing.T, prefix string, n int) {
	t.Helper()
	cfg := consulapi.DefaultConfig()
	cfg.Address = consulAddr
	cl, err := consulapi.NewClient(cfg)
	require.NoError(t, err)
	for {
		keys, _, err := cl.KV().Keys(prefix, "", (&consulapi.QueryOptions{}).WithContext(ctx))
		require.NoError(t, err)
		if len(keys) == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("never %d keys under %s: %v", n, prefix, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// TestListings has both libraries write files in one tree, then checks
// that ListDir (names, types, Ephemeral) and, where Vitess has it (etcd,
// Consul), List agree. Then Vitess holds a lock on a directory of the
// tree and leads an election with a topokit candidate waiting: ListDir of
// the locked directory, of the root and of the election directories
// agree with Vitess's (with topokitView's documented differences), and
// topokit's List reports the same files as before and no error: lock and
// election entries are internal entries, never files and never reported
// as reserved files.
func TestListings(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			vc, tc := s.vitess(t, root), s.topokit(t, root)
			for _, p := range []string{"t/v1", "t/sub/v2"} {
				_, err := vc.Create(ctx, p, []byte("vitess:"+p))
				require.NoError(t, err)
			}
			for _, p := range []string{"t/k1", "t/sub/k2", "t/deep/er/k3", "rootfile"} {
				_, err := tc.Create(ctx, p, []byte("topokit:"+p))
				require.NoError(t, err)
			}
			for _, dir := range []string{"", "t", "t/sub", "t/deep"} {
				for _, full := range []bool{false, true} {
					ve, err := vc.ListDir(ctx, dir, full)
					require.NoError(t, err)
					te, err := tc.ListDir(ctx, dir, full)
					require.NoError(t, err)
					assert.Equal(t, vitessEntries(ve), topokitEntries(te), "ListDir(%q, %v)", dir, full)
				}
			}
			tkl, err := tc.List(ctx, "t")
			require.NoError(t, err)
			before := topokitFiles(tkl)
			assert.Len(t, before, 5)
			if s.name != "zk" { // Vitess's zk2topo has no List
				assert.Equal(t, vitessList(ctx, t, vc, root, "t"), before, "List(t)")
			}

			vitessTree(ctx, t, s, root, vc, tc)
			for _, dir := range []string{"", "t", "elections", "elections/el"} {
				ve, verr := vc.ListDir(ctx, dir, true)
				te, terr := tc.ListDir(ctx, dir, true)
				if verr != nil {
					// Consul: an election is one key, not a directory.
					require.True(t, vtopo.IsErrType(verr, vtopo.NoNode), "Vitess ListDir(%q): %v", dir, verr)
				}
				t.Logf("Vitess ListDir(%q, full) with its lock and election: %+v, %v", dir, vitessEntries(ve), verr)
				var want []entry
				if verr == nil {
					want = topokitView(s.name, dir, vitessEntries(ve))
				}
				if want == nil {
					assert.True(t, topo.IsErrType(terr, topo.NoNode), "topokit ListDir(%q): %v", dir, terr)
					continue
				}
				require.NoError(t, terr, "topokit ListDir(%q)", dir)
				assert.Equal(t, want, withoutElectionsFlag(dir, topokitEntries(te)), "topokit ListDir(%q, full) with Vitess's lock and election", dir)
			}
			tkl, err = tc.List(ctx, "t")
			require.NoError(t, err, "topokit List(t) while Vitess holds t's lock")
			assert.Equal(t, before, topokitFiles(tkl), "topokit List(t) while Vitess holds t's lock")
			all, err := tc.List(ctx, "")
			require.NoError(t, err, "topokit List of the root with Vitess's lock and election")
			assert.Len(t, all, 6, "topokit List of the root: %+v", topokitFiles(all))
			if s.name != "zk" {
				t.Logf("Vitess List(t) while it holds t's lock: %+v", vitessList(ctx, t, vc, root, "t"))
			}
		})
	}
}

// TestElectionsEntryEphemeral checks that a full ListDir of the root marks
// the top-level elections directory as Vitess's backends do (Ephemeral on
// etcd, ZooKeeper and Consul), while an election runs (topokit's zk2topo and consultopo once marked
// it not Ephemeral).
func TestElectionsEntryEphemeral(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			vc, tc := s.vitess(t, root), s.topokit(t, root)
			_, err := vc.Create(ctx, "t/f", []byte("x"))
			require.NoError(t, err)
			vitessTree(ctx, t, s, root, vc, tc)
			v, k := listDirBoth(ctx, t, vc, tc, "")
			assert.Equal(t, v, k, "ListDir of the root, full")
		})
	}
}

// TestForeignReservedFiles has Vitess, which knows no reserved names,
// write plain files at paths topokit reserves for lock entries (under a
// locks directory, and a Lock key): topokit's List reports them as
// reserved files (a PartialResult *Error with a *ReservedFilesError
// naming them) beside every other file, and refuses to write there.
func TestForeignReservedFiles(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			vc, tc := s.vitess(t, root), s.topokit(t, root)
			for _, p := range []string{"r/f", "r/locks/foreign", "r/sub/Lock"} {
				_, err := vc.Create(ctx, p, []byte("vitess:"+p))
				require.NoError(t, err)
			}
			kvs, err := tc.List(ctx, "r")
			require.True(t, topo.IsErrType(err, topo.PartialResult), "topokit List over Vitess's files at reserved paths: %v", err)
			var rf *topo.ReservedFilesError
			require.True(t, errors.As(err, &rf), "%v", err)
			assert.Equal(t, []string{"r/locks/foreign", "r/sub/Lock"}, rf.Paths)
			require.Len(t, kvs, 1)
			assert.Equal(t, "r/f", kvs[0].Path)
			_, err = tc.Update(ctx, "r/locks/foreign", []byte("x"), nil)
			assert.True(t, topo.IsErrType(err, topo.InvalidPath), "topokit Update at a reserved path: %v", err)
		})
	}
}

// TestForeignReservedFileGet reads, with topokit's Get, the plain files
// Vitess wrote at reserved paths, which topokit's List reports
// (TestForeignReservedFiles): reads are not refused, so Get returns them
// with the bytes Vitess wrote and Vitess's version, as on etcd and Consul.
// topokit's zk2topo returns NoNode for r/locks/foreign (its Get treats
// every path with a locks segment as internal).
func TestForeignReservedFileGet(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			vc, tc := s.vitess(t, root), s.topokit(t, root)
			for _, p := range []string{"r/locks/foreign", "r/sub/Lock"} {
				vv, err := vc.Create(ctx, p, []byte("vitess:"+p))
				require.NoError(t, err)
				got, tv, err := tc.Get(ctx, p)
				if assert.NoError(t, err, "topokit Get of Vitess's file at reserved path %s", p) {
					assert.Equal(t, "vitess:"+p, string(got))
					assert.Equal(t, vv.String(), tv.String())
				}
			}
		})
	}
}
