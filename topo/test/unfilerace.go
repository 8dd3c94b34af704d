package test

import (
	"context"
	"fmt"
	"sync"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testDeleteFileWithChildrenRaces: deleting a file that has a file below
// it (the file goes, the file below stays) while other Conns write it.
// An unconditional Delete racing a few unconditional Updates of the file
// deletes it: never BadVersion, which only a version can cause. Of two
// Deletes at the version both read, one deletes and the other finds
// NoNode: never BadVersion, as the file was at that version until it
// went. A compare-and-set Update at the version read, racing an
// unconditional Delete, is applied before it or finds NoNode: never
// BadVersion. Every other round, one of the calls is a Txn's op. A
// Txn conditioned on IfPresent of the file and one deleting it
// conditioned on the absence of what the first creates: exactly one
// succeeds. IfPresent of a path that becomes a directory meanwhile (a
// file created below it) fails, as do IfVersion and a compare-and-set
// UpdateOp at version 0 (a new directory's data version on ZooKeeper).
func testDeleteFileWithChildrenRaces(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	conns := s.conns(3)
	belowV := mustCreate(t, ctx, conns[0], "dr/f/below", "below")
	const rounds = 30
	for r := range rounds {
		_, err := conns[0].Update(ctx, "dr/f", []byte(fmt.Sprintf("r%d", r)), nil)
		require.NoError(t, err)
		// A few Updates, not a loop: a Delete a backend makes of a read
		// and a write may give up (ResourceExhausted) to a writer that
		// always lands between them.
		var werr error
		together(func() {
			for i := range 5 {
				if _, werr = conns[1].Update(ctx, "dr/f", []byte(fmt.Sprintf("r%d-%d", r, i)), nil); werr != nil {
					return
				}
			}
		}, func() {
			err = deleteVia(ctx, conns[2], r%2 == 1, "dr/f", nil)
		})
		require.NoErrorf(t, err, "round %d: an unconditional Delete of a file with a file below it, racing unconditional Updates of the file", r)
		require.NoErrorf(t, werr, "round %d: an unconditional Update racing a Delete", r)
	}
	for r := range rounds {
		ver, err := conns[0].Update(ctx, "dr/f", []byte(fmt.Sprintf("v%d", r)), nil)
		require.NoError(t, err)
		var errs [2]error
		del := func(i int) func() {
			return func() { errs[i] = deleteVia(ctx, conns[1+i], i == r%2, "dr/f", ver) }
		}
		together(del(0), del(1))
		won := 0
		for i, err := range errs {
			if err == nil {
				won++
				continue
			}
			requireCode(t, err, topo.NoNode, fmt.Sprintf("round %d: Delete %d at the version both read, of a file with a file below it, losing to the other", r, i))
		}
		require.Equalf(t, 1, won, "round %d: Deletes at the version both read that succeeded", r)
		_, _, err = conns[0].Get(ctx, "dr/f")
		requireCode(t, err, topo.NoNode, fmt.Sprintf("round %d: Get after the Deletes", r))
	}
	for r := range rounds {
		ver, err := conns[0].Update(ctx, "dr/f", []byte(fmt.Sprintf("u%d", r)), nil)
		require.NoError(t, err)
		var casErr, delErr error
		together(func() {
			if casErr = phase(ctx, conns[1], r); casErr != nil {
				return
			}
			contents := []byte(fmt.Sprintf("u%d-cas", r))
			if r%2 == 1 {
				_, casErr = conns[1].Txn(ctx, topo.UpdateOp("dr/f", contents, ver))
			} else {
				_, casErr = conns[1].Update(ctx, "dr/f", contents, ver)
			}
		}, func() {
			delErr = conns[2].Delete(ctx, "dr/f", nil)
		})
		require.NoErrorf(t, delErr, "round %d: an unconditional Delete of a file with a file below it, racing a compare-and-set", r)
		if casErr != nil {
			requireCode(t, casErr, topo.NoNode, fmt.Sprintf("round %d: a compare-and-set at the version read, losing to an unconditional Delete", r))
		}
		_, _, err = conns[0].Get(ctx, "dr/f")
		requireCode(t, err, topo.NoNode, fmt.Sprintf("round %d: Get after the Delete", r))
	}
	// Txn(IfPresent(f), CreateOp(x)) and Txn(IfAbsent(x), DeleteOp(f)):
	// in either order one succeeds and the other's condition fails.
	for r := range rounds {
		_, err := conns[0].Update(ctx, "dr/f", []byte(fmt.Sprintf("p%d", r)), nil)
		require.NoError(t, err)
		x := fmt.Sprintf("dr/x%d", r)
		var createErr, deleteErr error
		together(func() {
			if createErr = phase(ctx, conns[1], r); createErr != nil {
				return
			}
			_, createErr = conns[1].Txn(ctx, topo.IfPresent("dr/f"), topo.CreateOp(x, []byte("x")))
		}, func() {
			_, deleteErr = conns[2].Txn(ctx, topo.IfAbsent(x), topo.DeleteOp("dr/f", nil))
		})
		switch {
		case createErr == nil:
			requireCode(t, deleteErr, topo.NodeExists, fmt.Sprintf("round %d: Txn(IfAbsent(x), DeleteOp(f)) after Txn(IfPresent(f), CreateOp(x)) created x", r))
			requireFile(t, ctx, conns[0], "dr/f", fmt.Sprintf("p%d", r), nil)
		case deleteErr == nil:
			requireCode(t, createErr, topo.NoNode, fmt.Sprintf("round %d: Txn(IfPresent(f), CreateOp(x)) after Txn(IfAbsent(x), DeleteOp(f)) deleted f", r))
			_, _, err := conns[0].Get(ctx, x)
			requireCode(t, err, topo.NoNode, fmt.Sprintf("round %d: Get(x)", r))
		default:
			require.Failf(t, "both transactions failed", "round %d: %v; %v", r, createErr, deleteErr)
		}
	}
	// IfPresent of a path that only ever becomes a directory (a file is
	// created below it meanwhile) never holds.
	for r := range rounds {
		g, y := fmt.Sprintf("dr/g%d", r), fmt.Sprintf("dr/y%d", r)
		var txnErr, createErr error
		together(func() {
			cond := topo.IfPresent(g)
			switch r % 3 {
			case 1:
				cond = topo.IfVersion(g, topo.NumericVersion(0))
			case 2:
				cond = topo.UpdateOp(g, []byte("g"), topo.NumericVersion(0))
			}
			_, txnErr = conns[1].Txn(ctx, cond, topo.CreateOp(y, []byte("y")))
		}, func() {
			if createErr = phase(ctx, conns[2], r); createErr != nil {
				return
			}
			_, createErr = conns[2].Create(ctx, g+"/child", []byte("c"))
		})
		require.NoErrorf(t, createErr, "round %d: Create below g", r)
		requireCode(t, txnErr, topo.NoNode, fmt.Sprintf("round %d: Txn(IfPresent(g), IfVersion(g, 0) or UpdateOp(g, 0); CreateOp(y)), g only ever a directory", r))
		_, _, err := conns[0].Get(ctx, y)
		requireCode(t, err, topo.NoNode, fmt.Sprintf("round %d: Get(y)", r))
		_, _, err = conns[0].Get(ctx, g)
		requireCode(t, err, topo.NoNode, fmt.Sprintf("round %d: Get(g)", r))
	}
	requireFile(t, ctx, conns[0], "dr/f/below", "below", belowV)
}

// deleteVia deletes p with Delete, or with a Txn of one DeleteOp.
func deleteVia(ctx context.Context, c topo.Conn, txn bool, p string, version topo.Version) error {
	if txn {
		_, err := c.Txn(ctx, topo.DeleteOp(p, version))
		return err
	}
	return c.Delete(ctx, p, version)
}

// together runs fs at once, each on a goroutine of its own released at
// the same moment, and returns when all have returned.
func together(fs ...func()) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Go(func() {
			<-start
			f()
		})
	}
	close(start)
	wg.Wait()
}

// phase makes r%3 reads through c (none, one or two round trips) before a
// racing call, so that the rounds of a race try its orders at several
// phases.
func phase(ctx context.Context, c topo.Conn, r int) error {
	for range r % 3 {
		if _, _, err := c.Get(ctx, "dr/f/below"); err != nil {
			return err
		}
	}
	return nil
}
