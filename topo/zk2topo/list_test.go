package zk2topo

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestListLeavesOutZnodesDeletedDuringWalk: List walks d's tree one level
// after another (d's children, d/sub's data, d/sub's children, d/sub/x's
// data, in that order). A znode deleted by another client between the
// read of its parent's children and its own read, or whose children are
// read after it was deleted, is left out without an error.
func TestListLeavesOutZnodesDeletedDuringWalk(t *testing.T) {
	const (
		opcodeGetData      = 4
		opcodeGetChildren2 = 12
	)
	for _, tc := range []struct {
		name   string
		opcode int32 // before the second request of it, the deletes run
		delete []string
		want   []string
	}{
		{"a file deleted before its data is read", opcodeGetData, []string{"d/sub/x"}, []string{"d/sub"}},
		{"a file and its parent deleted before the parent's children are read", opcodeGetChildren2, []string{"d/sub/x", "d/sub"}, []string{"d/sub"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := txnCtx(t)
			root := freshRoot(t)
			var oc opCounter
			c := openCounted(t, &oc, root)
			raw := rawConn(t)
			for _, p := range []string{"d/sub", "d/sub/x"} {
				_, err := c.Create(ctx, p, []byte(p))
				require.NoError(t, err)
			}
			var seen, deleted atomic.Int32 // set on the client's send goroutine
			oc.setBefore(func(op int32) {
				if op == tc.opcode && seen.Add(1) == 2 {
					for _, p := range tc.delete {
						assert.NoError(t, raw.Delete(root+"/"+p, -1))
					}
					deleted.Add(1)
				}
			})
			kvs, err := c.List(ctx, "d/")
			oc.setBefore(nil)
			require.Equal(t, int32(1), deleted.Load(), "the deletes ran during the walk")
			require.NoError(t, err)
			var paths []string
			for _, kv := range kvs {
				paths = append(paths, kv.Path)
			}
			require.Equal(t, tc.want, paths)
			_, _, err = c.Get(ctx, "d/sub/x")
			require.ErrorIs(t, err, topo.NoNode)
		})
	}
}
