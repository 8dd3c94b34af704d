package copy

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/topokit/topokit/topo"
)

// revert undoes done (parallel at a time), each change only if the file
// still is as this run left it: a created file is deleted at the version
// written, an overwritten one gets its old value back, a deleted one is
// created again. A write whose outcome is unknown is first read back: it
// is undone only if the file holds exactly what this run wrote. It returns
// the changes it could not undo, sorted by path. On ZooKeeper, whose
// versions start again at 0 when a file is deleted and created anew, a
// write whose version is known is read back too, and undone only if the
// file still holds this run's bytes at that version (BadVersion
// otherwise).
func revert(ctx context.Context, dst topo.Conn, done []undo, parallel int, opts ExecOptions) []RevertFailure {
	var mu sync.Mutex
	var left []RevertFailure
	// A created file is deleted only after the created files below it
	// (see phases).
	for _, ph := range phases(len(done), func(i int) string { return done[i].op.Path }, func(i int) bool { return done[i].op.Kind == Create }) {
		forEach(ph, parallel, func() bool { return false }, func(_ int, i int) {
			u := done[i]
			wctx, cancel := opts.writeCtx(ctx)
			defer cancel()
			if err := revertOne(wctx, dst, u); err != nil {
				opts.log().Warn("revert failed", "path", "/"+u.op.Path, "err", err)
				mu.Lock()
				left = append(left, RevertFailure{Path: u.op.Path, Err: err})
				mu.Unlock()
			}
		})
	}
	slices.SortFunc(left, func(a, b RevertFailure) int { return strings.Compare(a.Path, b.Path) })
	return left
}

func revertOne(ctx context.Context, dst topo.Conn, u undo) error {
	v := u.version
	if u.unknown {
		cur, cv, err := dst.Get(ctx, u.op.Path)
		switch {
		case u.op.Kind == Delete:
			if topo.IsErrType(err, topo.NoNode) {
				break // the delete was applied: re-create below
			}
			if err != nil {
				return err
			}
			return nil // still there: nothing to undo
		case topo.IsErrType(err, topo.NoNode):
			return nil // the create was not applied
		case err != nil:
			return err
		case !bytes.Equal(cur, u.op.Value):
			return nil // not applied (or changed by someone else since)
		case u.op.Kind == Overwrite && bytes.Equal(cur, u.op.Old.Value):
			return nil
		}
		v = cv
	} else if u.op.Kind != Delete && isZooKeeper(dst) {
		// ZooKeeper numbers a file's versions from 0 again when it is
		// deleted and created anew: another writer's file at the
		// version this run wrote would be reverted in its place. Only a
		// file that still holds this run's bytes is.
		cur, cv, err := dst.Get(ctx, u.op.Path)
		if err != nil {
			return err
		}
		if !bytes.Equal(cur, u.op.Value) || cv.String() != v.String() {
			return topo.NewError(topo.BadVersion, u.op.Path)
		}
	}
	switch u.op.Kind {
	case Create:
		return dst.Delete(ctx, u.op.Path, v)
	case Overwrite:
		_, err := dst.Update(ctx, u.op.Path, u.op.Old.Value, v)
		return err
	case Delete:
		_, err := dst.Create(ctx, u.op.Path, u.op.Old.Value)
		return err
	}
	return nil
}
