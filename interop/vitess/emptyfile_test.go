package vitessinterop

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestEmptyFilesAcross: files of empty contents written by topokit's
// unconditional and compare-and-set Updates (one-op transactions on
// ZooKeeper) read by Vitess with the same version, Vitess's empty files
// updated by topokit at the version Vitess read, and, on ZooKeeper, the
// same bytes on the server as Vitess stores for empty contents.
func TestEmptyFilesAcross(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			vc, tc := s.vitess(t, root), s.topokit(t, root)

			tv, err := tc.Update(ctx, "e/new", []byte{}, nil) // absent: created
			require.NoError(t, err)
			got, vv, err := vc.Get(ctx, "e/new")
			require.NoError(t, err)
			assert.Empty(t, got)
			assert.Equal(t, tv.String(), vv.String(), "version of topokit's empty Update (create) read by Vitess")

			_, err = tc.Create(ctx, "e/old", []byte("x"))
			require.NoError(t, err)
			tv, err = tc.Update(ctx, "e/old", []byte{}, nil) // existing: overwritten
			require.NoError(t, err)
			got, vv, err = vc.Get(ctx, "e/old")
			require.NoError(t, err)
			assert.Empty(t, got)
			assert.Equal(t, tv.String(), vv.String(), "version of topokit's empty Update read by Vitess")

			vv0, err := vc.Create(ctx, "e/vitess", nil)
			require.NoError(t, err)
			got, tv0, err := tc.Get(ctx, "e/vitess")
			require.NoError(t, err)
			assert.Empty(t, got)
			assert.Equal(t, vv0.String(), tv0.String())
			tv1, err := tc.Update(ctx, "e/vitess", []byte{}, tv0) // compare-and-set
			require.NoError(t, err)
			_, err = tc.Update(ctx, "e/vitess", nil, tv0)
			assert.True(t, topo.IsErrType(err, topo.BadVersion), "stale compare-and-set: %v", err)
			_, vv1, err := vc.Get(ctx, "e/vitess")
			require.NoError(t, err)
			assert.Equal(t, tv1.String(), vv1.String())

			if s.name != "zk" {
				return
			}
			z := rawZK(t)
			defer z.Close()
			_, err = vc.Create(ctx, "e/vitess2", nil)
			require.NoError(t, err)
			vdata, _, err := z.Get(root + "/e/vitess2")
			require.NoError(t, err)
			// A compare-and-set of []byte{} (e/vitess) stores a buffer of
			// length 0, as before f2b834a1: only unconditional writes
			// send empty contents as a null buffer.
			for _, p := range []string{"e/new", "e/old"} {
				data, _, err := z.Get(root + "/" + p)
				require.NoError(t, err)
				assert.Equal(t, vdata == nil, data == nil, "%s: null buffer as Vitess writes (Vitess's nil: %v)", p, vdata == nil)
			}
		})
	}
}
