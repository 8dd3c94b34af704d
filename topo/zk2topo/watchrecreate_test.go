package zk2topo

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestWatchRecursiveRecreatedFileWatchesDoNotPileUp: a file deleted and
// re-created in one multi by another client, again and again, under a
// WatchRecursive: every life is reported (its deletion, then its value,
// in order), and the watch keeps one child watch on the file. It once
// re-armed the child watch of the earlier life on top of the one its scan
// of the new life set, one more watch (and goroutine) per re-creation,
// each then re-read at every event of the file: after n re-creations a
// further one cost n+1 child reads.
func TestWatchRecursiveRecreatedFileWatchesDoNotPileUp(t *testing.T) {
	root := freshRoot(t)
	var oc opCounter
	c := openCounted(t, &oc, root)
	ctx := t.Context()
	_, err := c.Create(ctx, "r/f", []byte("start"))
	require.NoError(t, err)
	raw, _, err := zk.Connect([]string{testServer}, testSessionTimeout, zk.WithLogInfo(false))
	require.NoError(t, err)
	defer raw.Close()
	_, ch, err := c.WatchRecursive(ctx, "r/")
	require.NoError(t, err)

	zp := root + "/r/f"
	recreate := func(i int) {
		t.Helper()
		_, err := raw.Multi(&zk.DeleteRequest{Path: zp, Version: -1},
			&zk.CreateRequest{Path: zp, Data: fmt.Appendf(nil, "%d", i), Acl: zk.WorldACL(zk.PermAll)})
		require.NoError(t, err)
		// The deletion, then the new life's value: nothing else.
		for _, want := range []string{"deleted", fmt.Sprint(i)} {
			select {
			case wd := <-ch:
				require.Equal(t, "r/f", wd.Path)
				got := string(wd.Contents)
				if wd.Err != nil {
					require.True(t, topo.IsErrType(wd.Err, topo.NoNode), "event error %v", wd.Err)
					got = "deleted"
				}
				require.Equalf(t, want, got, "re-creation %d", i)
			case <-time.After(time.Minute):
				t.Fatalf("re-creation %d: no %s event within a minute", i, want)
			}
		}
	}
	const n = 30
	for i := range n {
		recreate(i)
	}
	oc.reset()
	recreate(n)
	// A re-creation lists the prefix's directory and the new life's
	// children, once each (the previous one's may still be finishing when
	// the counts are reset: up to two more); a pile-up read them once per
	// earlier re-creation.
	reads := oc.count(opGetChildren) + oc.count(opGetChildren2)
	require.LessOrEqualf(t, reads, 4, "child reads of one re-creation after %d of them", n)
}
