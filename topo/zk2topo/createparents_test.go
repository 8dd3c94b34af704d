package zk2topo

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// TestCreateInNewDirectoriesIsAtomic: a Create below missing directories
// makes them and the file in one multi, so no reader ever sees a new
// directory znode before its file is in it (an empty znode without
// children reads as an empty file). The writer's Conn is behind a proxy
// that delays its traffic, which leaves a reader all the time it needs
// between two requests of the writer: before, a WatchRecursive reported
// the new directory "a/b" as an empty file, and a Get read it as one.
func TestCreateInNewDirectoriesIsAtomic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader, writer, p, newDirs := delayedWriter(ctx, t)
	initial, events, err := reader.WatchRecursive(ctx, "w")
	require.NoError(t, err)
	require.Len(t, initial, 1)

	p.SetDelay(100 * time.Millisecond)
	created := make(chan error, 1)
	go func() {
		_, err := writer.Create(ctx, "w/a/b/z", []byte("z"))
		created <- err
	}()
	newDirs("while the Create ran", "w/a", "w/a/b")
	_, _, err = reader.Get(ctx, "w/a")
	assert.True(t, topo.IsErrType(err, topo.NoNode), "Get(w/a) = %v, want NoNode (a directory)", err)
	require.NoError(t, <-created)
	select {
	case ev := <-events:
		require.NoError(t, ev.Err)
		assert.Equal(t, "w/a/b/z", ev.Path)
		assert.Equal(t, "z", string(ev.Contents))
	case <-ctx.Done():
		t.Fatal("the create below the prefix was not reported")
	}
}

// TestLockNameNewDirectoryNeverAFile: LockName on a path whose directories
// are missing creates them with the "locks" znode in one multi, so that no
// reader sees a new directory as an empty file (an empty znode without
// children is one, in Vitess's layout) before its child is made. The
// writer sits behind the fault proxy's delay, and a reader straight on
// ZooKeeper reads what the first new directory holds as soon as its
// parent's child watch fires.
func TestLockNameNewDirectoryNeverAFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader, writer, p, newDirs := delayedWriter(ctx, t)
	p.SetDelay(100 * time.Millisecond)
	locked := make(chan error, 1)
	var l topo.LockDescriptor
	go func() {
		var err error
		l, err = writer.LockName(ctx, "w/named/x", "holder")
		locked <- err
	}()
	newDirs("while LockName ran", "w/named", "w/named/x")
	_, _, err := reader.Get(ctx, "w/named")
	assert.True(t, topo.IsErrType(err, topo.NoNode), "Get(w/named) = %v, want NoNode (a directory)", err)
	require.NoError(t, <-locked)
	p.SetDelay(0)
	require.NoError(t, l.Unlock(ctx))
	entries, err := reader.ListDir(ctx, "w", false)
	require.NoError(t, err)
	assert.Equal(t, []topo.DirEntry{{Name: "x"}}, entries, "Unlock removes the directories LockName made")
}

// delayedWriter opens, on a fresh root holding the file w/x, a reader on the
// server and a writer behind a fault proxy (returned, for its delay), and
// a child watch of "w" straight on ZooKeeper. newDirs waits for that watch
// to fire and then reads each of dirs at once, as any reader of the store
// may, asserting it is no file (an empty znode without children is one).
func delayedWriter(ctx context.Context, t *testing.T) (reader, writer *Conn, p *faultproxy.Proxy, newDirs func(when string, dirs ...string)) {
	t.Helper()
	root := freshRoot(t)
	reader = openConn(t, []string{testServer}, root)
	p, err := faultproxy.New(testServer)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	writer = openConn(t, []string{p.Addr()}, root)
	_, err = reader.Create(ctx, "w/x", []byte("x"))
	require.NoError(t, err)
	zr, _, err := zk.Connect([]string{testServer}, testSessionTimeout, zk.WithLogInfo(false))
	require.NoError(t, err)
	t.Cleanup(zr.Close)
	_, _, childCh, err := zr.ChildrenW(reader.zkPath("w"))
	require.NoError(t, err)
	newDirs = func(when string, dirs ...string) {
		t.Helper()
		select {
		case <-childCh:
		case <-ctx.Done():
			t.Fatal("no child event on w")
		}
		for _, d := range dirs {
			data, st, err := zr.Get(reader.zkPath(d))
			require.NoError(t, err)
			assert.False(t, isFile(st), "%s read as a file (%q) %s", d, data, when)
		}
	}
	return reader, writer, p, newDirs
}
