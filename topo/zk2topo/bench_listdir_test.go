package zk2topo

import (
	"fmt"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"
)

// listDirEntries is the size of the directory BenchmarkListDir lists.
const listDirEntries = 1000

// BenchmarkListDir lists a directory of 1,000 files (names only) beside
// the raw client's Children of the same znode.
func BenchmarkListDir(b *testing.B) {
	e := newBenchEnv(b)
	_, err := e.conn.Create(e.ctx, "d/f0000", []byte("v"))
	require.NoError(b, err)
	dir := e.root + "/d"
	for i := 1; i < listDirEntries; i++ {
		_, err := e.raw.Create(fmt.Sprintf("%s/f%04d", dir, i), []byte("v"), 0, zk.WorldACL(zk.PermAll))
		require.NoError(b, err)
	}
	paired(b, e, func(int) error {
		names, _, err := e.raw.Children(dir)
		if err == nil && len(names) != listDirEntries {
			err = fmt.Errorf("raw: %d children", len(names))
		}
		return err
	}, func(int) error {
		entries, err := e.conn.ListDir(e.ctx, "d", false)
		if err == nil && len(entries) != listDirEntries {
			err = fmt.Errorf("ListDir: %d entries", len(entries))
		}
		return err
	})
}
