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

// TestInterruptedCreateRemovesItsDirectories: a Create whose context ends
// after it created the file's missing parent directories, but before the
// file's own create was sent, removes those directories again. Before,
// they stayed, empty, and ListDir listed them (a semaphore contender
// cancelled while it registered left its contender directory so, seen in
// CI).
func TestInterruptedCreateRemovesItsDirectories(t *testing.T) {
	ctx, root, px, slow, other, raw := slowAndOther(t, 2*time.Minute)
	_, err := other.Create(ctx, "keep", []byte("x"))
	require.NoError(t, err)

	// Answers to the slow Conn take half a second: the test sees the
	// Create's first directory on the server, and cancels the Create, well
	// before the Create hears of it and sends the next request.
	px.SetDelay(500 * time.Millisecond)
	defer px.SetDelay(0)
	// interrupted runs Create(file) on the slow Conn, cancelled when
	// first (a znode path below root) appears, until an attempt is
	// interrupted; it returns the znode path of the attempt's first.
	interrupted := func(first, file string) string {
		t.Helper()
		for attempt := range 5 {
			f, fp := fmt.Sprintf(first, attempt), fmt.Sprintf(file, attempt)
			_, _, created, err := raw.ExistsW(root + "/" + f)
			require.NoError(t, err)
			cctx, cancel := context.WithCancel(ctx)
			go func() {
				select {
				case <-created:
					cancel()
				case <-cctx.Done():
				}
			}()
			_, err = slow.Create(cctx, fp, []byte("x"))
			cancel()
			if err == nil {
				continue // the file was created before the cancel arrived: again
			}
			require.ErrorIs(t, err, topo.Interrupted)
			return root + "/" + f
		}
		t.Fatal("no Create was interrupted after it created a directory")
		return ""
	}
	gone := func(zp, what string) {
		t.Helper()
		require.Eventually(t, func() bool {
			ok, _, err := raw.Exists(zp)
			return err == nil && !ok
		}, 30*time.Second, 10*time.Millisecond, what)
	}

	gone(interrupted("d%d", "d%d/sub/file"), "the directories of the interrupted Create stayed")
	entries, err := other.ListDir(ctx, "", false)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the file created before is listed")

	// An empty file the Create found on its path is not a directory it
	// made: it stays.
	for i := range 5 {
		_, err := other.Create(ctx, fmt.Sprintf("e%d", i), nil)
		require.NoError(t, err)
	}
	made := interrupted("e%d/x", "e%d/x/y")
	px.SetDelay(0) // the clean-up goes on at once
	gone(made, "the directory of the interrupted Create stayed")
	file := strings.TrimPrefix(zkDir(made), root+"/")
	require.Never(t, func() bool {
		_, _, err := other.Get(ctx, file)
		return err != nil
	}, 2*time.Second, 20*time.Millisecond, "the empty file above the Create's directory was deleted")
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
