package zk2topo

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestConcurrentEmptyingRemovesDirectory (issue 10, item 5): two clients
// deleting the last two files of a directory at the same time never leave
// the emptied directory behind. Each delete is followed by a read of the
// parent on the same session, so whichever read comes last sees the
// directory empty and removes it.
func TestConcurrentEmptyingRemovesDirectory(t *testing.T) {
	root := freshRoot(t)
	a := openConn(t, []string{testServer}, root)
	b := openConn(t, []string{testServer}, root)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := a.Create(ctx, "keep", []byte("k"))
	require.NoError(t, err)
	const rounds = 120
	for i := range rounds {
		dir := fmt.Sprintf("p/d%d", i%4) // reused: cached state of the directory too
		_, err := a.Create(ctx, dir+"/f1", []byte("1"))
		require.NoError(t, err)
		_, err = b.Create(ctx, dir+"/f2", []byte("2"))
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for c, f := range map[*Conn]string{a: dir + "/f1", b: dir + "/f2"} {
			wg.Go(func() {
				<-start
				require.NoError(t, c.Delete(ctx, f, nil))
			})
		}
		close(start)
		wg.Wait()
	}
	entries, err := a.ListDir(ctx, "", false)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "keep"}}, entries, "every emptied directory (and p) was removed")
}

// TestQueuedOnOneSessionLastUnlockRemovesDirectory: an Unlock reads
// nothing after its delete while its session has another entry queued
// for the lock (that one's Unlock comes later); the last Unlock of
// contenders sharing one Conn still removes the named lock's directory.
func TestQueuedOnOneSessionLastUnlockRemovesDirectory(t *testing.T) {
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for round := range 10 {
		var wg sync.WaitGroup
		errs := make(chan error, 6)
		for range 6 {
			wg.Go(func() {
				for range 5 {
					l, err := c.LockName(ctx, "n/x", "holder")
					if err == nil {
						err = l.Unlock(ctx)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		exists, _, err := raw.Exists(c.zkPath("n"))
		require.NoError(t, err)
		require.False(t, exists, "round %d left the lock's directory", round)
	}
}
