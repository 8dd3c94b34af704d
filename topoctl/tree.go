package topoctl

// The CLI side of the tree commands (copy, diff, import, export, rm -R):
// their flags, progress bar and reports. The walking, planning, writing
// and reverting are in topo/tree and topo/copy.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/copy"
	"github.com/topokit/topokit/topo/tree"
)

// defaultParallel is how many store requests import, copy, export and
// rm -R keep in flight at once (--parallel).
const defaultParallel = copy.DefaultParallel

// defaultBatch is the most writes of one batch (--batch).
const defaultBatch = copy.DefaultBatch

// progressRedraw is the shortest interval between two redraws of a
// progress bar.
const progressRedraw = 100 * time.Millisecond

// treeRun is what the tree commands (copy, diff, import, export, rm -R)
// share: their --parallel, --batch and --progress, the store calls'
// bound, and their reports and progress bar through the printer.
type treeRun struct {
	stores   *connector
	out      *printer
	parallel int
	batch    int
	progress bool
}

// newTreeRun adds --parallel, --progress and (copy, import, rm) --batch
// to a tree command, which runs through the treeRun returned; a
// --parallel or --batch below 1 is a usage error before anything is read
// or written.
func newTreeRun(cmd *cobra.Command, stores *connector, out *printer) *treeRun {
	t := &treeRun{stores: stores, out: out}
	cmd.Flags().IntVar(&t.parallel, "parallel", defaultParallel, "how many store requests to keep in flight")
	if n := cmd.Name(); n == "copy" || n == "import" || n == "rm" {
		cmd.Flags().IntVar(&t.batch, "batch", defaultBatch, "how many writes (rm -R: deletes) to send in one transaction (1: one request per file)")
	}
	cmd.Flags().BoolVar(&t.progress, "progress", false, "draw a progress bar on stderr even when stdout is not a terminal")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if t.parallel < 1 {
			return usagef("--parallel %d: want at least 1", t.parallel)
		}
		if cmd.Flags().Lookup("batch") != nil && t.batch < 1 {
			return usagef("--batch %d: want at least 1", t.batch)
		}
		return nil
	}
	return t
}

// list is tree.List bounded by --timeout.
func (o *treeRun) list(ctx context.Context, conn topo.Conn, dir string) (tree.Listing, error) {
	cctx, cancel := o.stores.callCtx(ctx)
	defer cancel()
	return tree.List(cctx, conn, dir)
}

// execOptions are the copy package's options of a tree command's flags,
// drawing a bar described by what for n writes (see newProgress) and
// noting an interruption on stderr.
func (o *treeRun) execOptions(n int, what string) copy.ExecOptions {
	wt := unlockTimeout(o.stores.timeout)
	return copy.ExecOptions{
		Parallel: o.parallel, Batch: o.batch, WriteTimeout: wt, Log: o.out.log,
		Progress: o.newProgress(n, what),
		Interrupted: func(inFlight int) {
			o.out.eprintf("\ninterrupted: no new writes start; waiting up to %s for %s in flight, then reverting what this run wrote\n",
				wt, plural(inFlight, "write"))
		},
	}
}

// plan is copy.PlanWrites bounded by --timeout, with its error for
// files that differ in topoctl's words.
func (o *treeRun) plan(ctx context.Context, dst topo.Conn, dir string, files []topo.KVInfo, po copy.PlanOptions) (*copy.Plan, error) {
	po.CallTimeout = o.stores.timeout
	plan, err := copy.PlanWrites(ctx, dst, dir, files, po)
	var ce *copy.ClashError
	if errors.As(err, &ce) {
		verb := "exist"
		if len(ce.Paths) == 1 {
			verb = "exists"
		}
		return nil, backendkit.Wrap(topo.NodeExists, displayPath(ce.Paths[0]), fmt.Errorf("%d of the %s already %s in the destination with other contents; nothing was written (use --overwrite)", len(ce.Paths), plural(ce.Files, "file"), verb))
	}
	return plan, err
}

// execute is copy.Execute with topoctl's words for a run that did not
// complete: exit 130 when interrupted, the summary then the write's error
// otherwise.
func (o *treeRun) execute(ctx context.Context, dst topo.Conn, plan *copy.Plan, what string) error {
	err := copy.Execute(ctx, dst, plan, what, o.execOptions(len(plan.Writes()), what))
	var ee *copy.ExecError
	if !errors.As(err, &ee) {
		return err
	}
	msg := ee.Summary(o.out.errorLine)
	if ee.Interrupted {
		return exitError{code: ExitInterrupted, err: errors.New(msg)}
	}
	if c := topo.CodeOf(ee.Err); c == topo.NodeExists || c == topo.BadVersion {
		// Every write is conditional on what the listing showed: this
		// one failed because another writer created or changed the file
		// since, and its write is never overwritten (with --overwrite
		// neither), so the user is told to run again, not to add it.
		msg += fmt.Sprintf("; %s was created or changed in the destination by another writer after it was listed, and a write not seen in the listing is never overwritten (--overwrite included): run again to compare anew", displayPath(ee.FailedAt))
	}
	return fmt.Errorf("%s: %w", msg, ee.Err)
}

// reportSkipped names on stderr, one line each, the files of tl that a
// tree command (verb, e.g. "exported") left alone: those at reserved paths
// (see reportReserved) and those under keys that are no canonical path
// (quoted byte for byte). It returns the PartialResult error the command
// ends with, or nil when there are none.
func (o *treeRun) reportSkipped(verb, store, dir string, tl tree.Listing) error {
	for _, p := range tl.Odd {
		o.out.eprintf("not %s: the key %s in %s is no canonical path (an empty, \".\" or \"..\" segment, or a trailing \"/\"; written by another tool): carried over it would land at another path\n", verb, strconv.Quote(displayPath(p)), store)
	}
	rerr := o.reportReserved(verb, store, dir, tl.Reserved)
	if len(tl.Odd) == 0 {
		return rerr
	}
	return backendkit.Wrap(topo.PartialResult, displayPath(dir), fmt.Errorf("%s under keys that are no canonical path %s not %s (listed above)",
		plural(len(tl.Odd), "file"), wasWere(len(tl.Odd)), verb))
}

// reportReserved names, one line each on stderr, the files at reserved
// paths that a tree command (verb, e.g. "copied") left alone, and returns
// the PartialResult error the command ends with, or nil when there are none.
func (o *treeRun) reportReserved(verb, store, dir string, reserved []string) error {
	if len(reserved) == 0 {
		return nil
	}
	for _, p := range reserved {
		o.out.eprintf("not %s: %s in %s is at a reserved path (written by another tool; topokit neither writes nor deletes such files)\n", verb, displayPath(p), store)
	}
	return backendkit.Wrap(topo.PartialResult, displayPath(dir), fmt.Errorf("%s at reserved paths %s not %s (listed above)",
		plural(len(reserved), "file"), wasWere(len(reserved)), verb))
}

func wasWere(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}

// subtreePrefix is the store prefix of get's and watch's -R DIR (every
// file under DIR: "DIR/", or "" for the root), or with raw (--prefix) of
// the plain string prefix arg. Bad paths are InvalidPath.
func subtreePrefix(arg string, raw bool) (string, error) {
	if raw {
		return topo.CleanPrefix(arg)
	}
	d, err := topo.CleanDirPath(arg)
	if err != nil || d == "" {
		return d, err
	}
	return d + "/", nil
}

// emptyTree is the error of copy, export and diff when there is nothing
// under dir in store: the root is empty or absent (dir is the root), or
// the PATH given is, which is surely not what the user meant.
func emptyTree(dir, store string) error {
	what := "the root is empty or absent (check the root and the address)"
	if d := strings.Trim(dir, "/"); d != "" {
		what = fmt.Sprintf("%s is empty or absent (check the path, the root and the address)", displayPath(d))
	}
	return backendkit.Wrap(topo.NoNode, displayPath(dir), fmt.Errorf("no files under %s in %s: %s%s", displayPath(dir), store, what, memoryHint(store)))
}

// memoryHint ends the note or error that a store's root is empty when the
// store, named IMPL:ADDR:ROOT, is a memory one: such a store lives in
// its topoctl process only, so what an earlier command wrote to it is gone.
func memoryHint(store string) string {
	if !strings.HasPrefix(store, "memory:") {
		return ""
	}
	return "; a memory store lives only as long as its topoctl process: each command starts with an empty one, so nothing an earlier command wrote is there (use an etcd, such as topoctl serve's, to keep data)"
}

// progress draws a progress bar on stderr, redrawn at most every
// progressRedraw; a nil *progress draws nothing. It is a copy.Progress.
type progress struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
}

// newProgress returns a bar of n steps described by what when stdout is a
// terminal or force (--progress) is set, else nil.
func (o *treeRun) newProgress(n int, what string) *progress {
	if n == 0 || !(o.progress || o.out.terminal()) {
		return nil
	}
	return &progress{bar: progressbar.NewOptions(n,
		progressbar.OptionSetWriter(o.out.stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(progressRedraw),
		progressbar.OptionClearOnFinish())}
}

// Step advances the bar by one.
func (p *progress) Step() {
	if p == nil {
		return
	}
	p.mu.Lock()
	_ = p.bar.Add(1)
	p.mu.Unlock()
}

// Done ends the bar: finished when ok, left as it is otherwise.
func (p *progress) Done(ok bool) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ok {
		_ = p.bar.Finish()
	} else {
		_ = p.bar.Exit()
	}
	_ = p.bar.Close()
}
