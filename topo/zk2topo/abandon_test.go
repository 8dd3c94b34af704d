package zk2topo

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// TestAbandonedLockRemovesEmptyDirectory: a Lock whose context ends while
// its entry's create is answering leaves nothing behind, although the
// directory's last file was deleted meanwhile: the entry is deleted when
// the answer comes, and with it the directory that holds nothing else (as
// Unlock removes it). The file's Delete could not remove the directory:
// the entry was in it then. A semaphore contender cancelled while it took
// its lock left its directory so (seen in CI).
func TestAbandonedLockRemovesEmptyDirectory(t *testing.T) {
	ctx, root, px, slow, other, raw := slowAndOther(t, time.Minute)
	_, err := other.Create(ctx, "d/info", []byte("x"))
	require.NoError(t, err)

	// Answers to the slow Conn take a second: its entry shows on the
	// server well before the Lock hears of it.
	px.SetDelay(500 * time.Millisecond)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		ld, err := slow.Lock(lctx, "d", "abandoned")
		if err == nil {
			err = ld.Unlock(ctx)
			if err == nil {
				err = errLockTaken
			}
		}
		errc <- err
	}()
	require.Eventually(t, func() bool {
		names, _, err := raw.Children(root + "/d/locks")
		return err == nil && len(names) == 1
	}, 30*time.Second, 5*time.Millisecond, "the slow Lock's entry never showed")
	require.NoError(t, other.Delete(ctx, "d/info", nil))
	cancel()
	require.ErrorIs(t, <-errc, topo.Interrupted)

	require.Eventually(t, func() bool {
		ok, _, err := raw.Exists(root + "/d")
		return err == nil && !ok
	}, 30*time.Second, 10*time.Millisecond, "the directory of the abandoned lock stayed")
	px.SetDelay(0)
}

// errLockTaken says that a Lock the test meant to abandon was taken.
var errLockTaken = topo.NewError(topo.NodeExists, "the lock was taken before its context ended")

// TestInterruptedCreateLeavesNoDirectories: a Create below missing
// directories whose context ends at any point leaves the file with its
// directories, or nothing: never an empty directory (ListDir would list
// it, a reader would take it for an empty file). Before, the directories
// were created first, one request each, and an interrupted Create left
// them (removed again in the background, while a reader could see them; a
// semaphore contender cancelled while it registered left its contender
// directory so, seen in CI). An empty file found on the path stays.
func TestInterruptedCreateLeavesNoDirectories(t *testing.T) {
	ctx, root, px, slow, other, raw := slowAndOther(t, 2*time.Minute)
	_, err := other.Create(ctx, "keep", []byte("x"))
	require.NoError(t, err)
	for i := range 4 {
		_, err := other.Create(ctx, fmt.Sprintf("e%d", i), nil)
		require.NoError(t, err)
	}
	exists := func(p string) bool {
		t.Helper()
		ok, _, err := raw.Exists(root + "/" + p)
		require.NoError(t, err)
		return ok
	}

	// Answers to the slow Conn take a quarter of a second each way: a
	// cancel every 150 ms lands at each step of the Create in turn (its
	// first create, its multi, their answers).
	px.SetDelay(250 * time.Millisecond)
	defer px.SetDelay(0)
	interrupted := 0
	for i := range 12 {
		dir, file := fmt.Sprintf("d%d/sub", i), fmt.Sprintf("d%d/sub/file", i)
		if i >= 8 {
			dir, file = fmt.Sprintf("e%d/x", i-8), fmt.Sprintf("e%d/x/y", i-8)
		}
		cctx, cancel := context.WithTimeout(ctx, time.Duration(i%4+1)*150*time.Millisecond)
		_, err := slow.Create(cctx, file, []byte("x"))
		cancel()
		if err != nil {
			require.True(t, topo.IsErrType(err, topo.Timeout), "Create: %v", err)
			interrupted++
		}
		// A read on the slow Conn's session is answered after every
		// request the Create sent: what they did is done.
		_, _, err = slow.Get(ctx, "keep")
		require.NoError(t, err)
		require.Equal(t, exists(file), exists(dir), "%s: the directory without the file, or the file without it", file)
		if i < 8 {
			require.Equal(t, exists(file), exists(zkDirOf(dir)), "%s: the top directory without the file", file)
		}
	}
	require.NotZero(t, interrupted, "no Create was interrupted")
	for i := range 4 {
		require.True(t, exists(fmt.Sprintf("e%d", i)), "the empty file above the Create's directories went")
	}
}

// zkDirOf is the parent of the relative path p ("" at the top).
func zkDirOf(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[:i]
	}
	return ""
}

// slowAndOther returns, for a fresh root: a context ending after d, a
// fault proxy, a Conn through it (slow), one straight to the server
// (other) and a raw client. The slow Conn's session timeout is
// slowSessionTimeout.
func slowAndOther(t *testing.T, d time.Duration) (context.Context, string, *faultproxy.Proxy, *Conn, *Conn, *zk.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	root := freshRoot(t)
	px, err := faultproxy.New(testServer)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	slow, err := NewConn(Options{Servers: []string{px.Addr()}, SessionTimeout: slowSessionTimeout}, root)
	require.NoError(t, err)
	t.Cleanup(slow.Close)
	return ctx, root, px, slow, openConn(t, []string{testServer}, root), openRaw(t)
}

// slowSessionTimeout is the session timeout of slowAndOther's slow Conn,
// whose traffic the tests delay by half a second each way, up to a second
// for a frame that comes while the proxy holds another: a session stays
// proven while each answer comes within 23/60 of its timeout (the package
// doc, Sessions), 1.5 s of testSessionTimeout.
const slowSessionTimeout = 10 * time.Second

// TestAbandonedLockGoneOnReturn: a Lock whose context ends while its
// entry's create is answering returns only once that entry is gone from
// the server: the next contender never waits on an entry nobody owns.
// Answers to the slow Conn are delayed, so the entry shows on the server
// well before the Lock hears of it. Before, the Lock returned at once and
// the entry was deleted in the background when the answer came, after
// the Lock had returned.
func TestAbandonedLockGoneOnReturn(t *testing.T) {
	ctx, root, px, slow, other, raw := slowAndOther(t, time.Minute)
	_, err := other.Create(ctx, "d/info", []byte("x"))
	require.NoError(t, err)

	px.SetDelay(500 * time.Millisecond)
	defer px.SetDelay(0)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		ld, err := slow.Lock(lctx, "d", "abandoned")
		if err == nil {
			err = ld.Unlock(ctx)
			if err == nil {
				err = errLockTaken
			}
		}
		errc <- err
	}()
	require.Eventually(t, func() bool {
		names, _, err := raw.Children(root + "/d/locks")
		return err == nil && len(names) == 1
	}, 30*time.Second, 5*time.Millisecond, "the slow Lock's entry never showed")
	px.Blackhole() // the create's answer is held
	cancel()
	var err2 error
	select {
	case err2 = <-errc:
	case <-time.After(200 * time.Millisecond):
		// The Lock waits for the create's answer (or the old code
		// waits for its pipelined read's): let them through.
		// A shorter delay from now on: the frames queued behind the
		// hole come within the Lock's grace.
		px.SetDelay(100 * time.Millisecond)
		px.Heal()
		err2 = <-errc
	}
	require.ErrorIs(t, err2, topo.Interrupted)
	names, _, err := raw.Children(root + "/d/locks")
	if err != zk.ErrNoNode {
		require.NoError(t, err)
	}
	require.Empty(t, names, "the abandoned Lock returned before its entry left the server")
}
