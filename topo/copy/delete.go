package copy

import (
	"context"
	"fmt"
	"sync"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/tree"
)

// DeleteError is the error of a DeleteTree that did not complete.
type DeleteError struct {
	// Deleted and Total count the files deleted and listed.
	Deleted, Total int
	// Interrupted is set when ctx ended (Err is nil then).
	Interrupted bool
	// Err is the first delete's error.
	Err error
}

// Error says how far the delete got.
func (e *DeleteError) Error() string {
	if e.Interrupted {
		return fmt.Sprintf("interrupted: deleted %d of %s", e.Deleted, plural(e.Total, "file"))
	}
	return fmt.Sprintf("deleted %d of %s: %v", e.Deleted, plural(e.Total, "file"), e.Err)
}

// Unwrap returns the delete's error.
func (e *DeleteError) Unwrap() error { return e.Err }

// DeleteTree deletes files (as tree.List returns them) from conn, whatever
// their version (only at the version listed, KVInfo.Version, with
// opts.AtListedVersion: a file changed since is BadVersion, which stops
// the run as any failed delete does), opts.Parallel requests at a time and opts.Batch deletes
// to a transaction (a refused batch is deleted one file at a time; a file
// already gone counts as done, not deleted; a file with files below it is
// deleted after those of them that are in files). It returns how many files it
// deleted. When a delete fails (a batch whose answer was lost included) or
// ctx ends, no new delete starts and the *DeleteError says how many were
// deleted; deletes are not reverted.
func DeleteTree(ctx context.Context, conn topo.Conn, files []topo.KVInfo, opts ExecOptions) (int, error) {
	var (
		mu       sync.Mutex
		deleted  int
		firstErr error
	)
	stopped := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil || ctx.Err() != nil
	}
	// at is the version a delete of f is conditional on (nil: none).
	at := func(f *topo.KVInfo) topo.Version {
		if opts.AtListedVersion {
			return f.Version
		}
		return nil
	}
	one := func(f *topo.KVInfo) {
		p := f.Path
		wctx, cancel := opts.writeCtx(ctx)
		err := conn.Delete(wctx, p, at(f))
		cancel()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			deleted++
			opts.step()
		case topo.IsErrType(err, topo.NoNode):
			opts.step()
		case firstErr == nil:
			firstErr = tree.WithPath(err, p)
		}
	}
	// batch deletes the files b in one transaction, or one by one when
	// it is refused.
	batch := func(b []Op) {
		if len(b) == 1 {
			one(b[0].Old)
			return
		}
		txops := make([]topo.TxnOp, len(b))
		for i, w := range b {
			txops[i] = topo.DeleteOp(w.Path, at(w.Old))
		}
		wctx, cancel := opts.writeCtx(ctx)
		_, err := conn.Txn(wctx, txops...)
		cancel()
		switch {
		case err == nil:
			mu.Lock()
			deleted += len(b)
			for range b {
				opts.step()
			}
			mu.Unlock()
		case Ambiguous(err):
			mu.Lock()
			if firstErr == nil {
				firstErr = fmt.Errorf("batch of %d deletes starting at /%s (its answer was lost: it may have been applied): %w", len(b), b[0].Path, err)
			}
			mu.Unlock()
		default:
			// Refused (a file already gone or, with
			// AtListedVersion, changed; or no transactions):
			// nothing was deleted; one by one instead.
			for _, w := range b {
				if stopped() {
					return
				}
				one(w.Old)
			}
		}
	}
	// run deletes ops (one phase): opts.Batch to a transaction,
	// opts.Parallel at a time.
	run := func(ops []Op) {
		forEach(batches(ops, opts.Batch), opts.Parallel, stopped, func(_ int, b []Op) { batch(b) })
	}
	// Files below a file are deleted before it (see phases).
	for _, ph := range phases(len(files), func(i int) string { return files[i].Path }, func(int) bool { return true }) {
		ops := make([]Op, len(ph))
		for j, i := range ph {
			ops[j] = Op{Kind: Delete, Path: files[i].Path, Old: &files[i]}
		}
		run(ops)
	}
	opts.done(firstErr == nil && ctx.Err() == nil)
	if firstErr != nil {
		return deleted, &DeleteError{Deleted: deleted, Total: len(files), Err: firstErr}
	}
	if ctx.Err() != nil {
		return deleted, &DeleteError{Deleted: deleted, Total: len(files), Interrupted: true}
	}
	return deleted, nil
}
