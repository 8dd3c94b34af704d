package memorytopo_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestWatchRevision: Watch and WatchRecursive carry the store revision
// they have reached (topo.WatchData.Revision; a file's Version is the
// revision that wrote it, a delete takes a revision of its own). Once an
// event with Revision R is received, every write up to R has been
// delivered, also while events of one file are coalesced behind a reader
// that does not keep up.
func TestWatchRevision(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	v, err := c.Create(ctx, "r/a", []byte("0"))
	require.NoError(t, err)
	created := int64(v.(topo.NumericVersion))

	cur, ch, err := c.Watch(ctx, "r/a")
	require.NoError(t, err)
	require.GreaterOrEqual(t, cur.Revision, created)
	init, rch, err := c.WatchRecursive(ctx, "r/")
	require.NoError(t, err)
	require.Len(t, init, 1)
	require.GreaterOrEqual(t, init[0].Revision, cur.Revision)

	// Writes while nobody reads: the recursive watch coalesces them.
	type write struct {
		path string
		rev  int64
	}
	var writes []write
	for i := range 20 {
		p := fmt.Sprintf("r/%c", 'a'+i%3)
		v, err := c.Create(ctx, p, []byte(fmt.Sprint(i)))
		if topo.IsErrType(err, topo.NodeExists) {
			v, err = c.Update(ctx, p, []byte(fmt.Sprint(i)), nil)
		}
		require.NoError(t, err)
		writes = append(writes, write{p, int64(v.(topo.NumericVersion))})
	}
	final := writes[len(writes)-1].rev
	held := map[string]int64{"r/a": created} // version each file is known at
	mark := init[0].Revision
	for mark < final {
		ev := <-rch
		require.NoError(t, ev.Err)
		held[ev.Path] = int64(ev.Version.(topo.NumericVersion))
		require.GreaterOrEqual(t, ev.Revision, mark, "Revision never decreases")
		mark = ev.Revision
		for _, w := range writes {
			if w.rev <= mark {
				require.GreaterOrEqualf(t, held[w.path], w.rev, "event %s at Revision %d, write of %s at %d not delivered", ev.Path, mark, w.path, w.rev)
			}
		}
	}
	require.Equal(t, final, mark)

	// A delete takes a revision between the writes around it.
	var aLast int64 // the version of r/a's last write
	for _, w := range writes {
		if w.path == "r/a" {
			aLast = w.rev
		}
	}
	for wd := <-ch; int64(wd.Version.(topo.NumericVersion)) < aLast; wd = <-ch {
		require.NoError(t, wd.Err) // r/a's changes, coalesced
	}
	require.NoError(t, c.Delete(ctx, "r/a", nil))
	v, err = c.Create(ctx, "r/z", []byte("z"))
	require.NoError(t, err)
	z := int64(v.(topo.NumericVersion))
	wd := <-ch
	require.ErrorIs(t, wd.Err, topo.NoNode)
	require.Greater(t, wd.Revision, final)
	require.Less(t, wd.Revision, z)
	ev := <-rch
	require.Equal(t, "r/a", ev.Path)
	require.ErrorIs(t, ev.Err, topo.NoNode)
	// r/z may be queued behind it already: then the watch has not got
	// further than the revision before.
	require.Contains(t, []int64{final, wd.Revision}, ev.Revision)
	ev = <-rch
	require.Equal(t, "r/z", ev.Path)
	require.Equal(t, z, ev.Revision)
}
