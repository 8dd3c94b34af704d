package zk2topo

import (
	"context"
	"fmt"
	"testing"
	"time"

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
	ctx, cancelAll := context.WithTimeout(context.Background(), time.Minute)
	defer cancelAll()
	root := freshRoot(t)
	px, err := faultproxy.New(testServer)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	slow := openConn(t, []string{px.Addr()}, root)
	other := openConn(t, []string{testServer}, root)
	raw := openRaw(t)
	_, err = other.Create(ctx, "d/info", []byte("x"))
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
	ctx, cancelAll := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelAll()
	root := freshRoot(t)
	px, err := faultproxy.New(testServer)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	slow := openConn(t, []string{px.Addr()}, root)
	other := openConn(t, []string{testServer}, root)
	raw := openRaw(t)
	_, err = other.Create(ctx, "keep", []byte("x"))
	require.NoError(t, err)

	// Answers to the slow Conn take half a second: the test sees its first
	// directory on the server, and cancels the Create, well before the
	// Create hears of it and sends the next request.
	px.SetDelay(500 * time.Millisecond)
	defer px.SetDelay(0)
	for attempt := range 5 {
		top := fmt.Sprintf("d%d", attempt)
		_, _, created, err := raw.ExistsW(root + "/" + top)
		require.NoError(t, err)
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-created:
				cancel()
			case <-cctx.Done():
			}
		}()
		_, err = slow.Create(cctx, top+"/sub/file", []byte("x"))
		cancel()
		if err == nil {
			continue // the file was created before the cancel arrived: again
		}
		require.ErrorIs(t, err, topo.Interrupted)
		require.Eventually(t, func() bool {
			ok, _, err := raw.Exists(root + "/" + top)
			return err == nil && !ok
		}, 30*time.Second, 10*time.Millisecond, "the directories of the interrupted Create stayed")
		entries, err := other.ListDir(ctx, "", false)
		require.NoError(t, err)
		require.Len(t, entries, 1, "only the file created before is listed")
		return
	}
	t.Fatal("no Create was interrupted after it created a directory")
}
