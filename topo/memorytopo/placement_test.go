package memorytopo_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestLazyPlacementMatchesEager: each probe that can see a lock or
// election entry in the tree (Get, GetVersion, ListDir, a Conn on a new
// root, a write at an entry's path from a root where it is not reserved, a
// transaction's condition) sees the same, on a store of its own, whether
// the entries were placed in the tree at their creation (a store with a
// Conn rooted inside a locks directory) or are placed when first seen.
// It fails when a placement point is missing.
func TestLazyPlacementMatchesEager(t *testing.T) {
	type world struct {
		f                  *memorytopo.Factory
		c, top             *memorytopo.Conn
		lockPath, candPath string // relative to c's root
		lockSeq            string
	}
	setup := func(t *testing.T, ctx context.Context, eager bool) world {
		f := memorytopo.NewFactory()
		open := func(root string) *memorytopo.Conn {
			c, err := f.NewConn("", root)
			require.NoError(t, err)
			t.Cleanup(c.Close)
			return c
		}
		if eager {
			open("/zone1/x/locks")
		}
		w := world{f: f, c: open("/zone1"), top: open("/")}
		_, err := w.c.Create(ctx, "d/f", []byte("x"))
		require.NoError(t, err)
		ld, err := w.c.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		p, err := w.c.NewLeaderParticipation("e", "cand")
		require.NoError(t, err)
		_, err = p.WaitForLeadership()
		require.NoError(t, err)
		term, err := p.Term()
		require.NoError(t, err)
		w.lockSeq = fmt.Sprintf("%016x", ld.Token())
		w.lockPath = "d/locks/" + w.lockSeq
		w.candPath = fmt.Sprintf("elections/e/%016x", term.Token())
		return w
	}
	code := func(err error) string {
		if err == nil {
			return "ok"
		}
		return topo.CodeOf(err).String()
	}
	probes := map[string]func(ctx context.Context, w world) string{
		"Get lock": func(ctx context.Context, w world) string {
			data, v, err := w.c.Get(ctx, w.lockPath)
			return fmt.Sprint(string(data), v, code(err))
		},
		"Get candidate from the top": func(ctx context.Context, w world) string {
			data, v, err := w.top.Get(ctx, "zone1/"+w.candPath)
			return fmt.Sprint(string(data), v, code(err))
		},
		"GetVersion lock": func(ctx context.Context, w world) string {
			data, err := w.c.GetVersion(ctx, w.lockPath, 0)
			return fmt.Sprint(string(data), code(err))
		},
		"ListDir d": func(ctx context.Context, w world) string {
			es, err := w.c.ListDir(ctx, "d", true)
			return fmt.Sprint(es, code(err))
		},
		"ListDir root": func(ctx context.Context, w world) string {
			es, err := w.c.ListDir(ctx, "", true)
			return fmt.Sprint(es, code(err))
		},
		"ListDir candidates": func(ctx context.Context, w world) string {
			es, err := w.c.ListDir(ctx, "elections/e", true)
			return fmt.Sprint(len(es), code(err))
		},
		"Create over a candidate": func(ctx context.Context, w world) string {
			_, err := w.top.Create(ctx, "zone1/"+w.candPath, []byte("y"))
			return code(err)
		},
		"Update over a candidate": func(ctx context.Context, w world) string {
			_, err := w.top.Update(ctx, "zone1/"+w.candPath, []byte("y"), nil)
			return code(err)
		},
		"Txn IfAbsent a candidate": func(ctx context.Context, w world) string {
			_, err := w.top.Txn(ctx, topo.IfAbsent("zone1/"+w.candPath), topo.CreateOp("zone1/z", nil))
			return code(err)
		},
		"a new root inside locks": func(ctx context.Context, w world) string {
			c, err := w.f.NewConn("", "/zone1/d/locks")
			if err != nil {
				return code(err)
			}
			defer c.Close()
			data, _, err := c.Get(ctx, w.lockSeq)
			return fmt.Sprint(string(data), code(err))
		},
	}
	for name, probe := range probes {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			var got [2]string
			for i, eager := range []bool{true, false} {
				w := setup(t, ctx, eager)
				got[i] = probe(ctx, w)
			}
			require.Equal(t, got[0], got[1], "eager, then lazy placement")
		})
	}
}
