package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/topokit/topokit/topo"
)

// stdoutIsTerminal reports whether stdout is a terminal (progress bars are
// drawn only then).
func (o *options) stdoutIsTerminal() bool {
	f, ok := o.io.Stdout.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// openFrom opens the store named by a --from/--to flag, or the one named
// by the shared flags (and --cell) when the flag is empty.
func (o *options) openFrom(ctx context.Context, flag, value string) (*store, error) {
	if value == "" {
		return o.open(ctx)
	}
	sp, err := o.parseSpec(flag, value)
	if err != nil {
		return nil, err
	}
	return o.openSpec(ctx, sp, "")
}

// openPair does what copy and diff (named by verb) share before they read:
// it checks --to and the --from/--to specs, cleans the optional PATH
// argument (default: the root) into under, and opens the two stores. On
// error no store is left open.
func (o *options) openPair(ctx context.Context, verb, from, to string, args []string) (src, dst *store, under string, err error) {
	if to == "" {
		return nil, nil, "", usagef("%s needs --to IMPL:ADDR:ROOT", verb)
	}
	if err := o.checkSpecs(from, to); err != nil {
		return nil, nil, "", err
	}
	under, err = topo.CleanDirPath(argOr(args, 0, "/"))
	if err != nil {
		return nil, nil, "", err
	}
	src, err = o.openFrom(ctx, "from", from)
	if err != nil {
		return nil, nil, "", err
	}
	dst, err = o.openFrom(ctx, "to", to)
	if err != nil {
		src.Close()
		return nil, nil, "", err
	}
	return src, dst, under, nil
}

// writePlan is a set of files to write to one store.
type writePlan struct {
	files     []topo.KVInfo
	existing  map[string]topo.KVInfo // destination files that the plan overwrites
	overwrite bool
}

func (p *writePlan) bytes() int {
	n := 0
	for _, f := range p.files {
		n += len(f.Value)
	}
	return n
}

// planWrites checks files (paths and sizes) and the destination before
// anything is written: without overwrite, a file that already exists
// fails the whole plan with NodeExists.
func (o *options) planWrites(ctx context.Context, dst topo.Conn, under string, files []topo.KVInfo, overwrite bool) (*writePlan, error) {
	for _, f := range files {
		if _, err := topo.CleanFilePath(f.Path); err != nil {
			return nil, err
		}
		if err := topo.CheckValue(f.Path, f.Value); err != nil {
			return nil, err
		}
	}
	have, err := o.listTree(ctx, dst, under)
	if err != nil {
		return nil, err
	}
	existing := map[string]topo.KVInfo{}
	for _, kv := range have {
		existing[kv.Path] = kv
	}
	plan := &writePlan{files: files, existing: map[string]topo.KVInfo{}, overwrite: overwrite}
	var clash []string
	for _, f := range files {
		if kv, ok := existing[f.Path]; ok {
			plan.existing[f.Path] = kv
			clash = append(clash, f.Path)
		}
	}
	if len(clash) > 0 && !overwrite {
		return nil, topo.Wrap(topo.NodeExists, clash[0], fmt.Errorf("%d of the %s already exist in the destination; nothing was written (use --overwrite)", len(clash), plural(len(files), "file")))
	}
	return plan, nil
}

// undo is how to revert one write of a failed plan.
type undo struct {
	path    string
	version topo.Version // the version this run wrote
	old     *topo.KVInfo // the value it replaced, nil if it created the file
}

// execute writes the plan in path order, drawing a progress bar when
// stdout is a terminal. On failure it reverts what it wrote (deleting the
// files it created and restoring the ones it overwrote, each only if
// nobody changed it since) and reports how far it got.
func (o *options) execute(ctx context.Context, dst topo.Conn, plan *writePlan, what string) error {
	var bar *progressbar.ProgressBar
	if o.stdoutIsTerminal() && len(plan.files) > 0 {
		bar = progressbar.NewOptions(len(plan.files),
			progressbar.OptionSetWriter(o.io.Stdout),
			progressbar.OptionSetDescription(what),
			progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish())
		defer bar.Close()
	}
	var done []undo
	for i, f := range plan.files {
		cctx, cancel := o.callCtx(ctx)
		var v topo.Version
		var err error
		old, replaced := plan.existing[f.Path]
		if replaced {
			v, err = dst.Update(cctx, f.Path, f.Value, nil)
		} else {
			v, err = dst.Create(cctx, f.Path, f.Value)
		}
		cancel()
		if err != nil {
			if bar != nil {
				_ = bar.Exit()
				o.printf("\n")
			}
			msg := fmt.Sprintf("%s stopped at file %d of %d (%d written)", what, i+1, len(plan.files), i)
			if rerr := o.revert(ctx, dst, done); rerr != nil {
				msg += fmt.Sprintf("; reverting them failed, the destination is partially written: %v", rerr)
			} else if i > 0 {
				msg += "; they were reverted, nothing is left written"
			}
			return fmt.Errorf("%s: %w", msg, err)
		}
		u := undo{path: f.Path, version: v}
		if replaced {
			u.old = &old
		}
		done = append(done, u)
		if bar != nil {
			_ = bar.Add(1)
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	return nil
}

func (o *options) revert(ctx context.Context, dst topo.Conn, done []undo) error {
	ctx = context.WithoutCancel(ctx)
	var firstErr error
	for _, u := range slices.Backward(done) {
		cctx, cancel := context.WithTimeout(ctx, unlockTimeout(o.timeout))
		var err error
		if u.old == nil {
			err = dst.Delete(cctx, u.path, u.version)
		} else {
			_, err = dst.Update(cctx, u.path, u.old.Value, u.version)
		}
		cancel()
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

func newCopyCmd(o *options) *cobra.Command {
	var from, to string
	var dryRun, overwrite bool
	cmd := &cobra.Command{
		Use:   "copy [--from IMPL:ADDR:ROOT] --to IMPL:ADDR:ROOT [PATH]",
		Short: "Copy a whole tree between two stores (any two backends)",
		Long: `Copy every file under PATH (default: everything under the root) from one
store to another, byte for byte, at the same paths. A store is named
IMPL:ADDR:ROOT: the implementation ends at the first ':' and the root starts
after the last one, so the address may hold host:port pairs, e.g.
  etcd2:127.0.0.1:2379:/vitess   zk2:127.0.0.1:2181,127.0.0.1:2182:/vitess
  consul:127.0.0.1:8500:/vitess  memory:test:/
--from defaults to the store named by the shared flags (and --cell). An
empty etcd2 address means the embedded etcd's.

Only files are copied (lock and election entries are not). Everything is
checked first: if a file already exists in the destination nothing is
written (NodeExists) unless --overwrite. If a write fails, copy reports how
far it got and reverts what it wrote. --dry-run prints what would be copied.
A progress bar is drawn when stdout is a terminal.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			src, dst, under, err := o.openPair(ctx, "copy", from, to, args)
			if err != nil {
				return err
			}
			defer src.Close()
			defer dst.Close()

			files, err := o.listTree(ctx, src.conn, under)
			if err != nil {
				return fmt.Errorf("reading %s: %w", src.name, err)
			}
			if len(files) == 0 {
				o.eprintf("note: no files under %s in %s\n", displayPath(under), src.name)
			}
			plan, err := o.planWrites(ctx, dst.conn, under, files, overwrite)
			if err != nil {
				return err
			}
			if dryRun {
				return o.reportPlan(plan, src.name, dst.name)
			}
			if err := o.execute(ctx, dst.conn, plan, "copying"); err != nil {
				return err
			}
			return o.reportDone("copied", plan, src.name, dst.name)
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "source store IMPL:ADDR:ROOT (default: the shared flags)")
	f.StringVar(&to, "to", "", "destination store IMPL:ADDR:ROOT")
	f.BoolVar(&dryRun, "dry-run", false, "print what would be copied, write nothing")
	f.BoolVar(&overwrite, "overwrite", false, "replace files that exist in the destination")
	return cmd
}

// reportPlan prints a dry run: one line per file, then a summary.
func (o *options) reportPlan(plan *writePlan, from, to string) error {
	type item struct {
		Path      string `json:"path"`
		Bytes     int    `json:"bytes"`
		Overwrite bool   `json:"overwrite,omitempty"`
	}
	items := make([]item, len(plan.files))
	for i, f := range plan.files {
		_, ow := plan.existing[f.Path]
		items[i] = item{displayPath(f.Path), len(f.Value), ow}
	}
	if o.jsonOut() {
		return o.printJSON(map[string]any{"dry_run": true, "from": from, "to": to, "files": items, "bytes": plan.bytes()})
	}
	for _, it := range items {
		note := ""
		if it.Overwrite {
			note = " (overwrite)"
		}
		o.printf("would write %s (%s)%s\n", it.Path, plural(it.Bytes, "byte"), note)
	}
	o.printf("dry run: %s, %s from %s to %s; nothing written\n", plural(len(items), "file"), plural(plan.bytes(), "byte"), from, to)
	return nil
}

func (o *options) reportDone(verb string, plan *writePlan, from, to string) error {
	if o.jsonOut() {
		return o.printJSON(map[string]any{verb: len(plan.files), "bytes": plan.bytes(), "from": from, "to": to})
	}
	o.printf("%s %s (%s) from %s to %s\n", verb, plural(len(plan.files), "file"), plural(plan.bytes(), "byte"), from, to)
	return nil
}

// difference is one line of diff output.
type difference struct {
	Path string `json:"path"`
	// Kind is "only-in-from", "only-in-to" or "differs".
	Kind      string `json:"kind"`
	FromBytes int    `json:"from_bytes,omitempty"`
	ToBytes   int    `json:"to_bytes,omitempty"`
}

func compareTrees(a, b []topo.KVInfo) []difference {
	var out []difference
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].Path < b[j].Path):
			out = append(out, difference{Path: displayPath(a[i].Path), Kind: "only-in-from", FromBytes: len(a[i].Value)})
			i++
		case i == len(a) || b[j].Path < a[i].Path:
			out = append(out, difference{Path: displayPath(b[j].Path), Kind: "only-in-to", ToBytes: len(b[j].Value)})
			j++
		default:
			if !bytes.Equal(a[i].Value, b[j].Value) {
				out = append(out, difference{Path: displayPath(a[i].Path), Kind: "differs", FromBytes: len(a[i].Value), ToBytes: len(b[j].Value)})
			}
			i++
			j++
		}
	}
	return out
}

func sortByPath(kvs []topo.KVInfo) {
	slices.SortFunc(kvs, func(a, b topo.KVInfo) int {
		switch {
		case a.Path < b.Path:
			return -1
		case a.Path > b.Path:
			return 1
		}
		return 0
	})
}

func newDiffCmd(o *options) *cobra.Command {
	var from, to string
	cmd := &cobra.Command{
		Use:   "diff [--from IMPL:ADDR:ROOT] --to IMPL:ADDR:ROOT [PATH]",
		Short: "Compare two trees file by file; exit 1 when they differ",
		Long: `Compare every file under PATH (default: the whole root) in two stores,
named like copy's (--from defaults to the shared flags). It prints one line
per difference: "only in from: PATH", "only in to: PATH" or "differs: PATH
(N bytes vs M bytes)", and exits 1 when there is any, 0 when the trees hold
the same files with the same bytes. Versions are not compared (each store
numbers its own). With --output json it prints {"identical","files",
"differences"}.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			a, b, under, err := o.openPair(ctx, "diff", from, to, args)
			if err != nil {
				return err
			}
			defer a.Close()
			defer b.Close()
			af, err := o.listTree(ctx, a.conn, under)
			if err != nil {
				return fmt.Errorf("reading %s: %w", a.name, err)
			}
			bf, err := o.listTree(ctx, b.conn, under)
			if err != nil {
				return fmt.Errorf("reading %s: %w", b.name, err)
			}
			sortByPath(af)
			sortByPath(bf)
			diffs := compareTrees(af, bf)
			if o.jsonOut() {
				if diffs == nil {
					diffs = []difference{}
				}
				if err := o.printJSON(map[string]any{"identical": len(diffs) == 0, "from": a.name, "to": b.name,
					"from_files": len(af), "to_files": len(bf), "differences": diffs}); err != nil {
					return err
				}
			} else {
				for _, d := range diffs {
					switch d.Kind {
					case "only-in-from":
						o.printf("only in from: %s\n", d.Path)
					case "only-in-to":
						o.printf("only in to: %s\n", d.Path)
					default:
						o.printf("differs: %s (%s vs %s)\n", d.Path, plural(d.FromBytes, "byte"), plural(d.ToBytes, "byte"))
					}
				}
				if len(diffs) == 0 {
					o.printf("identical: %s under %s in %s and %s\n", plural(len(af), "file"), displayPath(under), a.name, b.name)
				}
			}
			if len(diffs) > 0 {
				return exitError{code: ExitFailure}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "first store IMPL:ADDR:ROOT (default: the shared flags)")
	f.StringVar(&to, "to", "", "second store IMPL:ADDR:ROOT")
	return cmd
}

// checkSpecs parses the --from and --to values before anything is opened,
// so that a malformed one is reported as a usage error first.
func (o *options) checkSpecs(from, to string) error {
	if from != "" {
		if _, err := o.parseSpec("from", from); err != nil {
			return err
		}
	}
	_, err := o.parseSpec("to", to)
	return err
}
