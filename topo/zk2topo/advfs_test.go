package zk2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// heldAfterApplied starts write on a new Conn at root behind a proxy
// that delays every chunk of bytes by a margin, waits until applied
// returns (it watches, on a direct Conn, for the write's first request
// to land in the store), and blackholes the proxy: the answer to that
// request, and every request the writer would send after it, are held
// until release is called. The caller reads the store in between, in the
// window between the write's first request and its next one. release
// heals the proxy, waits for write to return and returns its error.
func heldAfterApplied(t *testing.T, root string, write func(ctx context.Context, w *Conn) error, applied func()) (release func() error) {
	t.Helper()
	px, err := faultproxy.New(testServer)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	w := openConn(t, []string{px.Addr()}, root)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	_, err = w.ListDir(ctx, "", false) // the session is up, its first sync done
	if !topo.IsErrType(err, topo.NoNode) {
		require.NoError(t, err)
	}
	// The margin is no timing assertion: the test only needs the
	// blackhole to come before the delayed answer is let through.
	px.SetDelay(500 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- write(ctx, w) }()
	applied()
	px.Blackhole()
	return func() error {
		px.SetDelay(0)
		px.Heal()
		select {
		case err := <-done:
			return err
		case <-time.After(time.Minute):
			t.Fatal("the write did not return after the heal")
			return nil
		}
	}
}

// TestDeleteLastFileNoPhantomFile: a Delete of the only file below two
// directories (a/d/e/f, beside a/keep) must remove the file and the
// directories it empties at once: a directory znode left empty and
// childless, even for one round trip, reads as an empty file. The
// writer's traffic is held once the server has applied its first write
// (a direct Watch of the file saw it go), so that the readers look
// exactly in the window between the file's delete and the directories'
// (before the fix: Get(a/d/e) returned an empty file at version 0, and
// List, ListDir and WatchRecursive listed it).
func TestDeleteLastFileNoPhantomFile(t *testing.T) {
	root := freshRoot(t)
	r := openConn(t, []string{testServer}, root)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err := r.Create(ctx, "a/d/e/f", []byte("f"))
	require.NoError(t, err)
	_, err = r.Create(ctx, "a/keep", []byte("k"))
	require.NoError(t, err)
	_, ch, err := r.Watch(ctx, "a/d/e/f")
	require.NoError(t, err)

	release := heldAfterApplied(t, root, func(ctx context.Context, w *Conn) error {
		return w.Delete(ctx, "a/d/e/f", nil)
	}, func() {
		for wd := range ch {
			if wd.Err != nil {
				require.True(t, topo.IsErrType(wd.Err, topo.NoNode), "%v", wd.Err)
				return
			}
		}
	})

	for _, d := range []string{"a/d", "a/d/e"} {
		_, _, err = r.Get(ctx, d)
		require.Truef(t, topo.IsErrType(err, topo.NoNode), "Get(%s) while the Delete of its last file is in flight: %v", d, err)
		_, _, err = r.Watch(ctx, d)
		require.Truef(t, topo.IsErrType(err, topo.NoNode), "Watch(%s) while the Delete of its last file is in flight: %v", d, err)
	}
	kvs, err := r.List(ctx, "a/")
	require.NoError(t, err)
	var paths []string
	for _, kv := range kvs {
		paths = append(paths, kv.Path)
	}
	require.Equal(t, []string{"a/keep"}, paths, "List(a/) while the Delete of a/d/e/f is in flight")
	entries, err := r.ListDir(ctx, "a", true)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "keep", Type: topo.TypeFile}}, entries, "ListDir(a) while the Delete of a/d/e/f is in flight")
	wctx, wcancel := context.WithCancel(ctx)
	init, wch, err := r.WatchRecursive(wctx, "a/")
	require.NoError(t, err)
	wcancel()
	for range wch {
	}
	require.Len(t, init, 1, "WatchRecursive(a/) while the Delete of a/d/e/f is in flight: %v", init)
	require.Equal(t, "a/keep", init[0].Path)
	require.NoError(t, release())
	_, err = r.ListDir(ctx, "a/d", false)
	require.True(t, topo.IsErrType(err, topo.NoNode), "ListDir(a/d) after the Delete: %v", err)
	entries, err = r.ListDir(ctx, "a", false)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "keep"}}, entries)
}
