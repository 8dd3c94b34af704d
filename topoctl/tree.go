package topoctl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/zk2topo"
)

// defaultParallel is how many store requests import, copy, export and
// rm -R keep in flight at once (--parallel).
const defaultParallel = 16

// progressRedraw is the shortest interval between two redraws of a
// progress bar.
const progressRedraw = 100 * time.Millisecond

// treeList is what listTree found under a directory.
type treeList struct {
	// files are the files at or under the directory, sorted by path.
	files []topo.KVInfo
	// reserved are the canonical paths of files at reserved paths
	// (topo.IsReserved) that another tool wrote: List reports them, and
	// topokit can neither write nor delete them, so every tree command
	// names them instead of skipping them silently.
	reserved []string
	// odd are the raw paths of files that another tool wrote under keys
	// that are no canonical path ("a//b", "t/", "d/./x"): written back
	// they would land at another path (a local file system, or topokit,
	// cleans them), so tree commands leave them alone and name them (see
	// reportSkipped) instead of rewriting or dropping them.
	odd []string
}

// listTree returns every file at or under dir (canonical; "" is the root),
// sorted by path, and the files at reserved paths that List reported (a
// PartialResult wrapping *topo.ReservedFilesError) or that a backend
// returned as ordinary files. An empty tree is an empty list, not an
// error.
func (o *options) listTree(ctx context.Context, conn topo.Conn, dir string) (treeList, error) {
	cctx, cancel := o.callCtx(ctx)
	defer cancel()
	kvs, err := conn.List(cctx, dir)
	var tl treeList
	var rf *topo.ReservedFilesError
	switch {
	case err == nil:
	case errors.As(err, &rf):
		for _, p := range rf.Paths {
			if under(p, dir) {
				tl.reserved = append(tl.reserved, p)
			}
		}
	case topo.IsErrType(err, topo.NoNode):
		return tl, nil
	default:
		return tl, at(err, dir)
	}
	for _, kv := range kvs {
		if !under(kv.Path, dir) {
			continue
		}
		if !canonicalFile(kv.Path) {
			tl.odd = append(tl.odd, kv.Path)
			continue
		}
		if topo.IsReserved(kv.Path) {
			tl.reserved = append(tl.reserved, kv.Path)
			continue
		}
		tl.files = append(tl.files, kv)
	}
	sortByPath(tl.files)
	slices.Sort(tl.odd)
	slices.Sort(tl.reserved)
	tl.reserved = slices.Compact(tl.reserved)
	return tl, nil
}

// canonicalFile reports whether p, a path a backend listed, is a
// canonical file path: one that topokit writes as it is (no empty, "." or
// ".." segment, no trailing "/").
func canonicalFile(p string) bool {
	c, err := topo.CleanFilePath(p)
	return err == nil && c == p
}

// skipped reports whether tl holds files a tree command leaves alone.
func (tl treeList) skipped() bool { return len(tl.reserved) > 0 || len(tl.odd) > 0 }

// reportSkipped names on stderr, one line each, the files of tl that a
// tree command (verb, e.g. "exported") left alone: those at reserved paths
// (see reportReserved) and those under keys that are no canonical path
// (quoted byte for byte, see treeList.odd). It returns the PartialResult
// error the command ends with, or nil when there are none.
func (o *options) reportSkipped(verb, store, dir string, tl treeList) error {
	for _, p := range tl.odd {
		o.eprintf("not %s: the key %s in %s is no canonical path (an empty, \".\" or \"..\" segment, or a trailing \"/\"; written by another tool): carried over it would land at another path\n", verb, strconv.Quote(displayPath(p)), store)
	}
	rerr := o.reportReserved(verb, store, dir, tl.reserved)
	if len(tl.odd) == 0 {
		return rerr
	}
	return backendkit.Wrap(topo.PartialResult, displayPath(dir), fmt.Errorf("%s under keys that are no canonical path %s not %s (listed above)",
		plural(len(tl.odd), "file"), wasWere(len(tl.odd)), verb))
}

// under reports whether the canonical path p is dir or below it.
func under(p, dir string) bool {
	return dir == "" || p == dir || strings.HasPrefix(p, dir+"/")
}

// reportReserved names, one line each on stderr, the files at reserved
// paths that a tree command (verb, e.g. "copied") left alone, and returns
// the PartialResult error the command ends with, or nil when there are none.
func (o *options) reportReserved(verb, store, dir string, reserved []string) error {
	if len(reserved) == 0 {
		return nil
	}
	for _, p := range reserved {
		o.eprintf("not %s: %s in %s is at a reserved path (written by another tool; topokit neither writes nor deletes such files)\n", verb, displayPath(p), store)
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

// emptyTree is the error of copy, export and diff when there is nothing
// under dir in store: the root is empty or absent, which is surely not
// what the user meant.
func emptyTree(dir, store string) error {
	return backendkit.Wrap(topo.NoNode, displayPath(dir), fmt.Errorf("no files under %s in %s: the root is empty or absent (check the root and the address)", displayPath(dir), store))
}

// writeKind is what a plan does to one path.
type writeKind int

const (
	kindCreate writeKind = iota
	kindOverwrite
	kindIdentical // already holds the bytes: nothing to do
	kindDelete    // only in the destination, with --delete
)

func (k writeKind) String() string {
	return [...]string{"create", "overwrite", "identical", "delete"}[k]
}

// op is one step of a plan.
type op struct {
	kind  writeKind
	path  string
	value []byte       // what to write (create, overwrite)
	old   *topo.KVInfo // what the destination held (overwrite, identical, delete)
}

// writePlan is a set of changes to one store, checked before any is made.
type writePlan struct {
	ops []op
	// dir is the directory the destination was listed under ("" for the
	// root); held are the directories at or under it that held a file
	// then (the ancestors of the files listed).
	dir  string
	held map[string]bool
}

// count returns how many ops are of kind k.
func (p *writePlan) count(k writeKind) int {
	n := 0
	for _, o := range p.ops {
		if o.kind == k {
			n++
		}
	}
	return n
}

// writes returns the ops that change the store (all but identical).
func (p *writePlan) writes() []op {
	var out []op
	for _, o := range p.ops {
		if o.kind != kindIdentical {
			out = append(out, o)
		}
	}
	return out
}

// bytes is the number of bytes the plan writes.
func (p *writePlan) bytes() int {
	n := 0
	for _, o := range p.ops {
		if o.kind == kindCreate || o.kind == kindOverwrite {
			n += len(o.value)
		}
	}
	return n
}

// planOpts are the choices of import and copy.
type planOpts struct {
	overwrite bool // replace files that differ
	delete    bool // delete files only in the destination
}

// planWrites checks files and the destination before anything is written:
// every path must be a valid file path outside the reserved names
// (topo.IsReserved, the rule every backend applies), every value at most
// topo.MaxValueSize; without overwrite, a destination file that differs
// fails the whole plan with NodeExists. Files that the destination already
// holds byte for byte are skipped.
func (o *options) planWrites(ctx context.Context, dst topo.Conn, dir string, files []topo.KVInfo, po planOpts) (*writePlan, error) {
	for _, f := range files {
		p, err := topo.CleanFilePath(f.Path)
		if err != nil {
			return nil, err
		}
		if err := backendkit.CheckReserved(p); err != nil {
			return nil, fmt.Errorf("nothing was written: %w", at(err, p))
		}
		if err := checkValue(p, f.Value); err != nil {
			return nil, err
		}
	}
	have, err := o.listTree(ctx, dst, dir)
	if err != nil {
		return nil, err
	}
	existing := make(map[string]topo.KVInfo, len(have.files))
	for _, kv := range have.files {
		existing[kv.Path] = kv
	}
	plan := &writePlan{dir: dir, held: map[string]bool{}}
	for _, kv := range have.files {
		for _, d := range ancestorDirs(kv.Path) {
			plan.held[d] = true
		}
	}
	for _, p := range have.reserved {
		for _, d := range ancestorDirs(p) {
			plan.held[d] = true
		}
	}
	var clash []string
	want := make(map[string]bool, len(files))
	for _, f := range files {
		want[f.Path] = true
		kv, ok := existing[f.Path]
		switch {
		case !ok:
			plan.ops = append(plan.ops, op{kind: kindCreate, path: f.Path, value: f.Value})
		case bytes.Equal(kv.Value, f.Value):
			plan.ops = append(plan.ops, op{kind: kindIdentical, path: f.Path, value: f.Value, old: &kv})
		default:
			clash = append(clash, f.Path)
			plan.ops = append(plan.ops, op{kind: kindOverwrite, path: f.Path, value: f.Value, old: &kv})
		}
	}
	if po.delete {
		for _, kv := range have.files {
			if !want[kv.Path] {
				plan.ops = append(plan.ops, op{kind: kindDelete, path: kv.Path, old: &kv})
			}
		}
	}
	if len(clash) > 0 && !po.overwrite {
		verb := "exist"
		if len(clash) == 1 {
			verb = "exists"
		}
		return nil, backendkit.Wrap(topo.NodeExists, displayPath(clash[0]), fmt.Errorf("%d of the %s already %s in the destination with other contents; nothing was written (use --overwrite)", len(clash), plural(len(files), "file"), verb))
	}
	return plan, nil
}

// checkValue is backendkit.CheckValue with the numbers in the message.
func checkValue(p string, v []byte) error {
	if len(v) > topo.MaxValueSize {
		return backendkit.Wrap(topo.InvalidArgument, displayPath(p), fmt.Errorf("value is %d bytes, more than the %d bytes (%d KiB) a file may hold", len(v), topo.MaxValueSize, topo.MaxValueSize/1024))
	}
	return nil
}

// undo is a change a plan made, to revert it.
type undo struct {
	op op
	// version is the version this run wrote (create, overwrite); nil when
	// the outcome is unknown (the request failed in a way that may have
	// applied it) or for a delete.
	version topo.Version
	unknown bool
}

// progress draws a progress bar on stderr-like output, redrawn at most
// every progressRedraw; a nil *progress draws nothing.
type progress struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
}

// newProgress returns a bar of n steps described by what when stdout is a
// terminal or --progress was given, else nil.
func (o *options) newProgress(n int, what string) *progress {
	if n == 0 || !(o.progress || o.stdoutIsTerminal()) {
		return nil
	}
	return &progress{bar: progressbar.NewOptions(n,
		progressbar.OptionSetWriter(o.io.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(progressRedraw),
		progressbar.OptionClearOnFinish())}
}

func (p *progress) add() {
	if p == nil {
		return
	}
	p.mu.Lock()
	_ = p.bar.Add(1)
	p.mu.Unlock()
}

func (p *progress) finish(ok bool) {
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

// forEach runs fn on items with at most parallel calls in flight, in
// order of issue, and stops issuing new calls once stop returns true. It
// returns when every issued call has returned.
func forEach[T any](items []T, parallel int, stop func() bool, fn func(i int, it T)) {
	if parallel < 1 {
		parallel = 1
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, it := range items {
		sem <- struct{}{}
		if stop() {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i, it)
		}()
	}
	wg.Wait()
}

// writeCtx bounds one write of a tree operation. It is detached from the
// command's cancellation: on Ctrl-C no new write starts, but a write in
// flight runs to its answer, so that its outcome is known and can be
// reverted (a cancelled request may have been applied by the server).
func (o *options) writeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout(o.timeout))
}

// ambiguous reports whether a failed write may still have been applied by
// the store (the answer was lost, not a refusal).
func ambiguous(err error) bool {
	switch topo.CodeOf(err) {
	case topo.NodeExists, topo.NoNode, topo.BadVersion, topo.InvalidPath, topo.InvalidArgument,
		topo.PermissionDenied, topo.NoImplementation, topo.NodeNotEmpty, topo.ResourceExhausted:
		return false
	}
	return true
}

// execute carries out the plan's writes with at most o.parallel requests
// in flight, drawing a progress bar (see newProgress). Files are created
// and overwritten only if unchanged since planning (a versioned Update, a
// Create that fails if someone created the file meanwhile); deletes are
// versioned too. When a write fails or ctx ends (Ctrl-C), no new write
// starts, the writes in flight run to their answer, and everything written
// is reverted -- each only if nobody changed it since -- and the error
// says what, if anything, is left.
func (o *options) execute(ctx context.Context, dst topo.Conn, plan *writePlan, what string) error {
	ops := plan.writes()
	bar := o.newProgress(len(ops), what)
	var (
		mu       sync.Mutex
		done     []undo
		firstErr error
		failedAt string
	)
	o.log.Info("writing", "what", what, "writes", len(ops), "parallel", o.parallel)
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
		o.eprintf("\ninterrupted: no new writes start; waiting up to %s for %s in flight, then reverting what this run wrote\n",
			unlockTimeout(o.timeout), plural(n, "write"))
	}()
	// record notes the outcome of w (under mu).
	record := func(w op, v topo.Version, err error) {
		if err == nil {
			done = append(done, undo{op: w, version: v})
			bar.add()
			return
		}
		if ambiguous(err) {
			done = append(done, undo{op: w, unknown: true})
		}
		if firstErr == nil {
			firstErr, failedAt = at(err, w.path), w.path
		}
	}
	// stopped reports whether no new write may start (under mu).
	stopped := func() bool { return firstErr != nil || ctx.Err() != nil }
	// one makes the single write w.
	one := func(w op) {
		wctx, cancel := o.writeCtx(ctx)
		defer cancel()
		v, err := writeOne(wctx, dst, w)
		mu.Lock()
		defer mu.Unlock()
		inFlight--
		record(w, v, err)
	}
	bs := batches(ops, o.batch)
	absent := plan.absentDirs(bs)
	forEach(bs, o.parallel, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return stopped()
	}, func(bi int, b []op) {
		mu.Lock()
		inFlight += len(b)
		mu.Unlock()
		if len(b) == 1 {
			one(b[0])
			return
		}
		wctx, cancel := o.writeCtx(ctx)
		vs, err := dst.Txn(zk2topo.DirectoriesAbsent(wctx, absent[bi]...), txnOps(b)...)
		cancel()
		if err == nil || ambiguous(err) {
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
		// writes are made one by one instead, as without batching, so
		// that each gets its own answer.
		o.log.Debug("batch refused, writing its files one by one", "files", len(b), "err", err)
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
	})
	interrupted := firstErr == nil && ctx.Err() != nil
	bar.finish(firstErr == nil && !interrupted)
	if firstErr == nil && !interrupted {
		return nil
	}
	written := 0
	for _, u := range done {
		if !u.unknown {
			written++
		}
	}
	var msg string
	if interrupted {
		msg = fmt.Sprintf("%s interrupted after %d of %d writes", what, written, len(ops))
	} else {
		msg = fmt.Sprintf("%s stopped at %s (%d of %d writes made)", what, displayPath(failedAt), written, len(ops))
	}
	left := o.revert(ctx, dst, done)
	switch {
	case len(left) > 0:
		msg += fmt.Sprintf("; reverting failed, %s left as this run wrote them: %s", plural(len(left), "file"), strings.Join(left, ", "))
	case len(done) > 0:
		msg += "; everything this run wrote was reverted, nothing of it is left"
	default:
		msg += "; nothing was written"
	}
	if interrupted {
		return exitError{code: ExitInterrupted, err: errors.New(msg)}
	}
	if c := topo.CodeOf(firstErr); c == topo.NodeExists || c == topo.BadVersion {
		// Every write is conditional on what the listing showed: this
		// one failed because another writer created or changed the file
		// since, and its write is never overwritten (with --overwrite
		// neither), so the user is told to run again, not to add it.
		msg += fmt.Sprintf("; %s was created or changed in the destination by another writer after it was listed, and a write not seen in the listing is never overwritten (--overwrite included): run again to compare anew", displayPath(failedAt))
	}
	return fmt.Errorf("%s: %w", msg, firstErr)
}

// ancestorDirs returns the directories above the canonical path p,
// parent first, without the root ("").
func ancestorDirs(p string) []string {
	var out []string
	for i := strings.LastIndexByte(p, '/'); i > 0; i = strings.LastIndexByte(p, '/') {
		p = p[:i]
		out = append(out, p)
	}
	return out
}

// absentDirs returns, for each batch bs[i], the directories at or under
// the plan's dir above the files it creates that held no file when the
// destination was listed and that no earlier batch creates a file under:
// the store is told that they are absent (zk2topo.DirectoriesAbsent), so
// that ZooKeeper's multi creates them with the files instead of failing
// for want of them first. It is only a hint: a directory that exists
// after all (an empty one, one holding only lock entries, one another
// client created since) costs the store a failed multi and a round of
// reads, never a wrong write.
func (p *writePlan) absentDirs(bs [][]op) [][]string {
	out := make([][]string, len(bs))
	claimed := map[string]bool{}
	for _, b := range bs {
		for _, w := range b {
			claimed[w.path] = true // a file is written there: not absent
		}
	}
	for i, b := range bs {
		for _, w := range b {
			if w.kind != kindCreate {
				continue
			}
			for _, d := range ancestorDirs(w.path) {
				if !under(d, p.dir) || p.held[d] {
					break
				}
				if !claimed[d] {
					claimed[d] = true
					out[i] = append(out[i], d)
				}
			}
		}
	}
	return out
}

// writeOne makes the single write w on dst.
func writeOne(ctx context.Context, dst topo.Conn, w op) (topo.Version, error) {
	switch w.kind {
	case kindCreate:
		return dst.Create(ctx, w.path, w.value)
	case kindOverwrite:
		return dst.Update(ctx, w.path, w.value, w.old.Version)
	case kindDelete:
		return nil, dst.Delete(ctx, w.path, w.old.Version)
	}
	return nil, fmt.Errorf("unknown write kind %d", w.kind)
}

// txnOps are the transaction ops of the writes b, with the same
// conditions as writeOne's calls: a create fails if the file exists, an
// overwrite and a delete need the version planned.
func txnOps(b []op) []topo.TxnOp {
	ops := make([]topo.TxnOp, len(b))
	for i, w := range b {
		switch w.kind {
		case kindCreate:
			ops[i] = topo.CreateOp(w.path, w.value)
		case kindOverwrite:
			ops[i] = topo.UpdateOp(w.path, w.value, w.old.Version)
		case kindDelete:
			ops[i] = topo.DeleteOp(w.path, w.old.Version)
		}
	}
	return ops
}

// Bounds of one batch of a tree write (see batches). Each backend takes
// more in one transaction (etcd 128 writes and 1.5 MiB, Consul 64
// operations and 512 KiB with values in base64, ZooKeeper 1 MiB); a batch
// that is still refused is written one file at a time.
const (
	// defaultBatch is the most writes of one batch (--batch).
	defaultBatch = 32
	// batchBytes bounds the values of one batch, in bytes; a larger value
	// is written alone.
	batchBytes = 128 << 10
)

// batches splits ops into batches of at most n writes and batchBytes of
// values, in order; n < 2 gives one write per batch.
func batches(ops []op, n int) [][]op {
	var out [][]op
	var cur []op
	size := 0
	for _, w := range ops {
		if n < 2 || len(w.value) > batchBytes {
			out = append(out, []op{w})
			continue
		}
		if len(cur) == n || size+len(w.value) > batchBytes {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, w)
		size += len(w.value)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// revert undoes done (in parallel), each change only if the file still is
// as this run left it: a created file is deleted at the version written, an
// overwritten one gets its old value back, a deleted one is created again.
// A write whose outcome is unknown is first read back: it is undone only
// if the file holds exactly what this run wrote. It returns the display
// paths of the changes it could not undo, sorted.
func (o *options) revert(ctx context.Context, dst topo.Conn, done []undo) []string {
	var mu sync.Mutex
	var left []string
	forEach(done, o.parallel, func() bool { return false }, func(_ int, u undo) {
		wctx, cancel := o.writeCtx(ctx)
		defer cancel()
		err := o.revertOne(wctx, dst, u)
		if err != nil {
			o.log.Warn("revert failed", "path", displayPath(u.op.path), "err", err)
			mu.Lock()
			left = append(left, displayPath(u.op.path)+" ("+o.formatError(err)+")")
			mu.Unlock()
		}
	})
	slices.Sort(left)
	return left
}

func (o *options) revertOne(ctx context.Context, dst topo.Conn, u undo) error {
	v := u.version
	if u.unknown {
		cur, cv, err := dst.Get(ctx, u.op.path)
		switch {
		case u.op.kind == kindDelete:
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
		case !bytes.Equal(cur, u.op.value):
			return nil // not applied (or changed by someone else since)
		case u.op.kind == kindOverwrite && bytes.Equal(cur, u.op.old.Value):
			return nil
		}
		v = cv
	}
	switch u.op.kind {
	case kindCreate:
		return dst.Delete(ctx, u.op.path, v)
	case kindOverwrite:
		_, err := dst.Update(ctx, u.op.path, u.op.old.Value, v)
		return err
	case kindDelete:
		_, err := dst.Create(ctx, u.op.path, u.op.old.Value)
		return err
	}
	return nil
}
