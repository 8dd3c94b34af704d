package copy

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/tree"
	"github.com/topokit/topokit/topo/zk2topo"
)

// Default values of ExecOptions.
const (
	// DefaultParallel is how many store requests to keep in flight.
	DefaultParallel = 16
	// DefaultBatch is the most writes of one transaction.
	DefaultBatch = 32
	// DefaultWriteTimeout bounds each write when WriteTimeout is 0.
	DefaultWriteTimeout = 30 * time.Second
)

// Progress is told of each write made. Step is called once per file
// written (or found already gone by a delete), from any goroutine, one
// call at a time; Done once, before any revert starts, with ok false when
// the run failed or was interrupted. A nil Progress is not called.
type Progress interface {
	Step()
	Done(ok bool)
}

// ExecOptions are the choices of Execute and DeleteTree.
type ExecOptions struct {
	// Parallel is how many requests to keep in flight (values below 1
	// mean 1).
	Parallel int
	// Batch is the most writes sent in one transaction; below 2, one
	// request per file.
	Batch int
	// WriteTimeout bounds each write and each revert (0:
	// DefaultWriteTimeout). Writes are detached from ctx's cancellation:
	// on ctx's end no new write starts, but a write in flight runs to its
	// answer, so that its outcome is known and can be reverted.
	WriteTimeout time.Duration
	// Progress is told of each write (may be nil).
	Progress Progress
	// Interrupted, when set, is called once when ctx ends while writes
	// run, with the number of writes in flight, before they finish.
	Interrupted func(inFlight int)
	// Log receives what the run does (nil: nothing is logged).
	Log *slog.Logger
	// AtListedVersion makes DeleteTree delete each file only at the
	// version it was listed with (its KVInfo.Version; a nil Version
	// deletes whatever the version): a file another writer changed since
	// it was listed is kept, and its BadVersion stops the run. Execute
	// ignores it: its writes are always conditional.
	AtListedVersion bool
}

func (o ExecOptions) log() *slog.Logger {
	if o.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Log
}

func (o ExecOptions) writeTimeout() time.Duration {
	if o.WriteTimeout <= 0 {
		return DefaultWriteTimeout
	}
	return o.WriteTimeout
}

// writeCtx bounds one write: detached from ctx's cancellation (see
// ExecOptions.WriteTimeout).
func (o ExecOptions) writeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), o.writeTimeout())
}

func (o ExecOptions) step() {
	if o.Progress != nil {
		o.Progress.Step()
	}
}

func (o ExecOptions) done(ok bool) {
	if o.Progress != nil {
		o.Progress.Done(ok)
	}
}

// ExecError is the error of a run of Execute that did not complete: a
// write failed, or ctx ended.
type ExecError struct {
	// What names the run, e.g. "copying".
	What string
	// Interrupted is set when ctx ended (and no write failed).
	Interrupted bool
	// FailedAt is the canonical path of the first write that failed.
	FailedAt string
	// Written and Total count the writes made and planned.
	Written, Total int
	// Reverted is set when there was something to revert; Left lists the
	// changes that could not be reverted, sorted by path, each with the
	// error of its revert.
	Reverted bool
	Left     []RevertFailure
	// Err is the first write's error (nil when Interrupted).
	Err error
}

// RevertFailure is a change that could not be undone.
type RevertFailure struct {
	// Path is the file's canonical path; Err the error of its revert.
	Path string
	Err  error
}

// Summary says what happened, with fmtErr rendering each revert's error:
// "copying stopped at /a (1 of 3 writes made); everything this run wrote
// was reverted, nothing of it is left".
func (e *ExecError) Summary(fmtErr func(error) string) string {
	var msg string
	if e.Interrupted {
		msg = fmt.Sprintf("%s interrupted after %d of %d writes", e.What, e.Written, e.Total)
	} else {
		msg = fmt.Sprintf("%s stopped at /%s (%d of %d writes made)", e.What, e.FailedAt, e.Written, e.Total)
	}
	switch {
	case len(e.Left) > 0:
		left := make([]string, len(e.Left))
		for i, l := range e.Left {
			left[i] = "/" + l.Path + " (" + fmtErr(l.Err) + ")"
		}
		msg += fmt.Sprintf("; reverting failed, %s not reverted (holding this run's write, or a later writer's: see each error): %s", plural(len(left), "file"), strings.Join(left, ", "))
	case e.Reverted:
		msg += "; everything this run wrote was reverted, nothing of it is left"
	default:
		msg += "; nothing was written"
	}
	return msg
}

// Error returns the Summary, then the write's error.
func (e *ExecError) Error() string {
	msg := e.Summary(func(err error) string { return err.Error() })
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the write's error (nil when Interrupted).
func (e *ExecError) Unwrap() error { return e.Err }

// undo is a change a plan made, to revert it.
type undo struct {
	op Op
	// version is the version this run wrote (create, overwrite); nil when
	// the outcome is unknown or for a delete.
	version topo.Version
	unknown bool
}

// Execute carries out plan's writes on dst (the store PlanWrites read)
// with at most opts.Parallel requests in flight, opts.Batch writes to a
// transaction. Files are created and overwritten only if unchanged since
// planning (a versioned Update, a Create that fails if someone created the
// file meanwhile); deletes are versioned too, and a file with files below
// it is deleted after those of them that the plan deletes (as the revert
// deletes a file it created after the files it created below it). A batch the store refuses
// (a condition failed, too large, no transactions) is written one file at
// a time. When a write fails or ctx ends, no new write starts, the writes
// in flight run to their answer, and everything written is reverted --
// each only if nobody changed it since -- and the *ExecError says what,
// if anything, is left. It returns nil when every write was made.
func Execute(ctx context.Context, dst topo.Conn, plan *Plan, what string, opts ExecOptions) error {
	ops := plan.Writes()
	log := opts.log()
	parallel := max(opts.Parallel, 1)
	var (
		mu       sync.Mutex
		done     []undo
		firstErr error
		failedAt string
	)
	log.Info("writing", "what", what, "writes", len(ops), "parallel", parallel)
	inFlight := 0
	finished, noted := make(chan struct{}), make(chan struct{})
	defer func() { close(finished); <-noted }()
	go func() {
		defer close(noted)
		select {
		case <-ctx.Done():
		case <-finished:
			return
		}
		mu.Lock()
		n := inFlight
		mu.Unlock()
		if opts.Interrupted != nil {
			opts.Interrupted(n)
		}
	}()
	// record notes the outcome of w (under mu).
	record := func(w Op, v topo.Version, err error) {
		if err == nil {
			done = append(done, undo{op: w, version: v})
			opts.step()
			return
		}
		if Ambiguous(err) {
			done = append(done, undo{op: w, unknown: true})
		}
		if firstErr == nil {
			firstErr, failedAt = tree.WithPath(err, w.Path), w.Path
		}
	}
	// stopped reports whether no new write may start (under mu).
	stopped := func() bool { return firstErr != nil || ctx.Err() != nil }
	// one makes the single write w.
	one := func(w Op) {
		wctx, cancel := opts.writeCtx(ctx)
		defer cancel()
		v, err := writeOne(wctx, dst, w)
		mu.Lock()
		defer mu.Unlock()
		inFlight--
		record(w, v, err)
	}
	// batch makes the writes b in one transaction (absent: the
	// directory hint of its creates), or one by one when it is refused.
	batch := func(b []Op, absent []string) {
		mu.Lock()
		inFlight += len(b)
		mu.Unlock()
		if len(b) == 1 {
			one(b[0])
			return
		}
		wctx, cancel := opts.writeCtx(ctx)
		vs, err := dst.Txn(zk2topo.DirectoriesAbsent(wctx, absent...), txnOps(b)...)
		cancel()
		if err == nil || Ambiguous(err) {
			// Applied, or maybe: each write is recorded (as unknown
			// when the answer was lost), so that a revert reads it back.
			mu.Lock()
			defer mu.Unlock()
			inFlight -= len(b)
			for i, w := range b {
				var v topo.Version
				if err == nil {
					v = vs[i]
				}
				record(w, v, err)
			}
			return
		}
		// A refused transaction wrote nothing (a condition failed, it
		// is too large for the store, or the backend has no Txn): the
		// writes are made one by one instead, so that each gets its own
		// answer.
		log.Debug("batch refused, writing its files one by one", "files", len(b), "err", err)
		for i, w := range b {
			mu.Lock()
			if stopped() {
				inFlight -= len(b) - i
				mu.Unlock()
				return
			}
			mu.Unlock()
			one(w)
		}
	}
	// Files are written, and the deletes of files with no deleted file
	// below them made, in the first phase; a file with deleted files
	// below it is deleted after them (see phases).
	for _, ph := range phases(len(ops), func(i int) string { return ops[i].Path }, func(i int) bool { return ops[i].Kind == Delete }) {
		pops := make([]Op, len(ph))
		for j, i := range ph {
			pops[j] = ops[i]
		}
		bs := batches(pops, opts.Batch)
		absent := plan.absentDirs(bs)
		forEach(bs, parallel, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return stopped()
		}, func(bi int, b []Op) { batch(b, absent[bi]) })
	}
	interrupted := firstErr == nil && ctx.Err() != nil
	opts.done(firstErr == nil && !interrupted)
	if firstErr == nil && !interrupted {
		return nil
	}
	e := &ExecError{What: what, Interrupted: interrupted, FailedAt: failedAt, Total: len(ops), Reverted: len(done) > 0}
	if !interrupted {
		e.Err = firstErr
	}
	for _, u := range done {
		if !u.unknown {
			e.Written++
		}
	}
	e.Left = revert(ctx, dst, done, parallel, opts)
	return e
}

// Ambiguous reports whether a failed write may still have been applied by
// the store (the answer was lost, not a refusal).
func Ambiguous(err error) bool {
	switch topo.CodeOf(err) {
	case topo.NodeExists, topo.NoNode, topo.BadVersion, topo.InvalidPath, topo.InvalidArgument,
		topo.PermissionDenied, topo.NoImplementation, topo.NodeNotEmpty, topo.ResourceExhausted:
		return false
	}
	return true
}

// writeOne makes the single write w on dst.
func writeOne(ctx context.Context, dst topo.Conn, w Op) (topo.Version, error) {
	switch w.Kind {
	case Create:
		return dst.Create(ctx, w.Path, w.Value)
	case Overwrite:
		return dst.Update(ctx, w.Path, w.Value, w.Old.Version)
	case Delete:
		return nil, dst.Delete(ctx, w.Path, w.Old.Version)
	}
	return nil, fmt.Errorf("unknown write kind %d", w.Kind)
}
