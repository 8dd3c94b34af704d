package zk2topo

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/semaphore"
)

// TestSemaphorePrunesHolderWithoutInfo: a full semaphore whose record
// lists a holder that has no info file any more is not stuck on it. Such
// a holder is gone: its Unlock removes it from the record before deleting
// its info file. On ZooKeeper its contender directory may then linger a
// moment as an empty znode (the server reaps the empty "locks" container
// before the releasing session's clean-up removes the directory): TryLock
// calls that znode an empty file (InvalidArgument), which Acquire
// returned ("is a file, not a directory", seen once in CI, in
// Semaphore/NeverMoreThanLimit). With no directory at all, TryLock says
// NoNode, and the admission's delete of the absent info file failed, and
// failed again, until ctx ended.
func TestSemaphorePrunesHolderWithoutInfo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		emptyDir bool // the contender directory is there, empty
	}{
		{"EmptyContenderDir", true},
		{"NoContenderDir", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := freshRoot(t)
			raw := rawConn(t)
			acl := zk.WorldACL(zk.PermAll)
			for _, zp := range []string{root, root + "/sem", root + "/sem/contenders"} {
				_, err := raw.Create(zp, nil, 0, acl)
				require.NoError(t, err)
			}
			_, err := raw.Create(root+"/sem/holders", []byte(`{"limit":1,"seq":7,"holders":[{"id":"gone","token":7}]}`), 0, acl)
			require.NoError(t, err)
			if tc.emptyDir {
				_, err := raw.Create(root+"/sem/contenders/gone", nil, 0, acl)
				require.NoError(t, err)
			}
			conn := openConn(t, []string{testServer}, root)
			sem, err := semaphore.New(conn, "sem", 1, semaphore.Options{})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			ld, err := sem.TryAcquire(ctx)
			require.NoError(t, err)
			require.Equal(t, int64(8), ld.Token())
			hs, err := sem.Holders(ctx)
			require.NoError(t, err)
			require.Len(t, hs, 1)
			require.NotEqual(t, "gone", hs[0].ID)
			require.NoError(t, ld.Unlock(ctx))
		})
	}
}
