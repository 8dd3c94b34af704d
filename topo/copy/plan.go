package copy

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/tree"
	"github.com/topokit/topokit/topo/zk2topo"
)

// Kind is what a plan does to one path.
type Kind int

const (
	// Create writes a file the destination does not have.
	Create Kind = iota
	// Overwrite replaces a file that holds other bytes.
	Overwrite
	// Identical is a file the destination already holds byte for byte:
	// nothing to do.
	Identical
	// Delete removes a file only the destination has (PlanOptions.Delete).
	Delete
)

// String returns "create", "overwrite", "identical" or "delete".
func (k Kind) String() string {
	return [...]string{"create", "overwrite", "identical", "delete"}[k]
}

// Op is one step of a plan.
type Op struct {
	Kind Kind
	// Path is the file's canonical path.
	Path string
	// Value is what to write (Create, Overwrite; Identical: the bytes
	// already there).
	Value []byte
	// Old is what the destination held (Overwrite, Identical, Delete).
	Old *topo.KVInfo
}

// Plan is a set of changes to one store, checked before any is made.
type Plan struct {
	// Ops are the steps, files to write in the order given, then deletes.
	Ops []Op
	// dir is the directory the destination was listed under ("" for the
	// root); held are the directories at or under it that held a file
	// then (the ancestors of the files listed).
	dir  string
	held map[string]bool
}

// Count returns how many ops are of kind k.
func (p *Plan) Count(k Kind) int {
	n := 0
	for _, o := range p.Ops {
		if o.Kind == k {
			n++
		}
	}
	return n
}

// Writes returns the ops that change the store (all but Identical).
func (p *Plan) Writes() []Op {
	var out []Op
	for _, o := range p.Ops {
		if o.Kind != Identical {
			out = append(out, o)
		}
	}
	return out
}

// Bytes is the number of bytes the plan writes (Create and Overwrite).
func (p *Plan) Bytes() int {
	n := 0
	for _, o := range p.Ops {
		if o.Kind == Create || o.Kind == Overwrite {
			n += len(o.Value)
		}
	}
	return n
}

// PlanOptions are the choices of PlanWrites.
type PlanOptions struct {
	// Overwrite replaces destination files that hold other bytes; without
	// it such a file fails the plan with NodeExists.
	Overwrite bool
	// Delete also deletes the destination's files under the directory
	// that files does not have.
	Delete bool
	// CallTimeout bounds the listing of the destination (0: ctx only).
	CallTimeout time.Duration
}

// PlanWrites checks files, meant for dst under dir (canonical; "" the
// root), before anything is written: every path must be a valid file path
// (InvalidPath) outside the reserved names (topo.IsReserved, the rule
// every backend applies: InvalidPath, saying nothing was written), every
// value at most topo.MaxValueSize (InvalidArgument, see CheckValue);
// without opts.Overwrite, a destination file that differs fails the whole
// plan with NodeExists (wrapping a *ClashError). Files dst already holds byte for byte become
// Identical ops. On ZooKeeper, an empty file that has files below it (in
// files, or in dst) fails the plan with InvalidArgument naming it:
// ZooKeeper cannot store one (the znode reads as a directory), and the
// write would succeed without the file being there. It reads dst (one
// List) and writes nothing.
func PlanWrites(ctx context.Context, dst topo.Conn, dir string, files []topo.KVInfo, opts PlanOptions) (*Plan, error) {
	for _, f := range files {
		p, err := topo.CleanFilePath(f.Path)
		if err != nil {
			return nil, err
		}
		if err := backendkit.CheckReserved(p); err != nil {
			return nil, fmt.Errorf("nothing was written: %w", tree.WithPath(err, p))
		}
		if err := CheckValue(p, f.Value); err != nil {
			return nil, err
		}
	}
	lctx, cancel := callCtx(ctx, opts.CallTimeout)
	have, err := tree.List(lctx, dst, dir)
	cancel()
	if err != nil {
		return nil, err
	}
	existing := make(map[string]topo.KVInfo, len(have.Files))
	for _, kv := range have.Files {
		existing[kv.Path] = kv
	}
	plan := &Plan{dir: dir, held: map[string]bool{}}
	for _, kv := range have.Files {
		for _, d := range tree.AncestorDirs(kv.Path) {
			plan.held[d] = true
		}
	}
	for _, p := range have.Reserved {
		for _, d := range tree.AncestorDirs(p) {
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
			plan.Ops = append(plan.Ops, Op{Kind: Create, Path: f.Path, Value: f.Value})
		case bytes.Equal(kv.Value, f.Value):
			plan.Ops = append(plan.Ops, Op{Kind: Identical, Path: f.Path, Value: f.Value, Old: &kv})
		default:
			clash = append(clash, f.Path)
			plan.Ops = append(plan.Ops, Op{Kind: Overwrite, Path: f.Path, Value: f.Value, Old: &kv})
		}
	}
	if opts.Delete {
		for _, kv := range have.Files {
			if !want[kv.Path] {
				plan.Ops = append(plan.Ops, Op{Kind: Delete, Path: kv.Path, Old: &kv})
			}
		}
	}
	if err := plan.checkEmptyParents(dst, have.Files); err != nil {
		return nil, err
	}
	if len(clash) > 0 && !opts.Overwrite {
		return nil, backendkit.Wrap(topo.NodeExists, "/"+clash[0], &ClashError{Paths: clash, Files: len(files)})
	}
	return plan, nil
}

// checkEmptyParents returns the InvalidArgument error of PlanWrites when
// dst is a ZooKeeper store (through any Unwrap() topo.Conn decorators) and
// the plan writes an empty file that has files below it, in the plan or
// in the destination when listed (also files the plan deletes: the
// deletes may land after the write, and the last one removes the emptied
// directory with it). ZooKeeper cannot hold such a file -- an empty znode
// with children is only a directory (docs/layout-zookeeper.md) -- so its
// write would succeed and the file would not be there.
func (p *Plan) checkEmptyParents(dst topo.Conn, have []topo.KVInfo) error {
	if !isZooKeeper(dst) {
		return nil
	}
	parents := map[string]bool{}
	for _, o := range p.Ops {
		for _, d := range tree.AncestorDirs(o.Path) {
			parents[d] = true
		}
	}
	for _, kv := range have {
		for _, d := range tree.AncestorDirs(kv.Path) {
			parents[d] = true
		}
	}
	for _, o := range p.Ops {
		if (o.Kind == Create || o.Kind == Overwrite) && len(o.Value) == 0 && parents[o.Path] {
			return backendkit.Wrap(topo.InvalidArgument, "/"+o.Path, fmt.Errorf("an empty file with files below it cannot be stored on ZooKeeper, where it reads as a directory (docs/layout-zookeeper.md); nothing was written"))
		}
	}
	return nil
}

// isZooKeeper reports whether c is a zk2topo Conn, directly or under
// decorators that return the Conn they wrap from Unwrap() topo.Conn.
func isZooKeeper(c topo.Conn) bool {
	for c != nil {
		if _, ok := c.(*zk2topo.Conn); ok {
			return true
		}
		u, ok := c.(interface{ Unwrap() topo.Conn })
		if !ok {
			return false
		}
		c = u.Unwrap()
	}
	return false
}

// ClashError is PlanWrites's error (wrapped in a NodeExists *topo.Error
// naming the first path) when destination files hold other bytes and
// PlanOptions.Overwrite is not set.
type ClashError struct {
	// Paths are the canonical paths of the files that differ, in the
	// order given; Files is how many files the plan was for.
	Paths []string
	Files int
}

// Error says how many files differ, and that nothing was written.
func (e *ClashError) Error() string {
	verb := "exist"
	if len(e.Paths) == 1 {
		verb = "exists"
	}
	return fmt.Sprintf("%d of the %s already %s in the destination with other contents; nothing was written (PlanOptions.Overwrite replaces them)", len(e.Paths), plural(e.Files, "file"), verb)
}

// CheckValue returns an InvalidArgument error naming the file p
// (canonical) and the sizes when v is larger than topo.MaxValueSize, nil
// otherwise.
func CheckValue(p string, v []byte) error {
	if len(v) > topo.MaxValueSize {
		return backendkit.Wrap(topo.InvalidArgument, "/"+p, fmt.Errorf("value is %d bytes, more than the %d bytes (%d KiB) a file may hold", len(v), topo.MaxValueSize, topo.MaxValueSize/1024))
	}
	return nil
}

// plural returns "1 file", "2 files".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// callCtx bounds one store call by d (no bound when d is 0).
func callCtx(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
