package topoctl

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// stdoutIsTerminal reports whether stdout is a terminal (progress bars are
// drawn only then; see streams.StdoutIsTerminal).
func (o *options) stdoutIsTerminal() bool {
	if o.io.StdoutIsTerminal != nil {
		return o.io.StdoutIsTerminal()
	}
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

func newCopyCmd(o *options) *cobra.Command {
	var from, to string
	var dryRun bool
	var po planOpts
	cmd := &cobra.Command{
		Use:   "copy [--from IMPL:ADDR:ROOT] --to IMPL:ADDR:ROOT [PATH]",
		Short: "Copy a whole tree between two stores (any two backends)",
		Long: `Copy every file under PATH (default: everything under the root) from one
store to another, byte for byte, at the same paths. A store is named
IMPL:ADDR:ROOT: the implementation ends at the first ':' and the root starts
after the last one, so the address may hold host:port pairs, e.g.
  etcd2:127.0.0.1:2379:/vitess   zk2:127.0.0.1:2181,127.0.0.1:2182:/vitess
  consul:127.0.0.1:8500:vitess   memory:test:/
--from defaults to the store named by the shared flags (and --cell). An
empty etcd2 address means the embedded etcd's.

Only files are copied (lock and election entries are not). Files that
another tool wrote at reserved paths (a "locks" or "Lock" segment, or a
first segment "elections") cannot be copied: each is named on stderr and
copy exits 1 after copying the rest. A source with no files under PATH is
an error (the root is empty or absent).

Everything is checked first, before anything is written: every path against
the reserved-name rule, every size, and the destination. Files the
destination already holds byte for byte are skipped. If a file exists in
the destination with other contents nothing is written (NodeExists) unless
--overwrite. --delete also deletes the destination's files under PATH that
the source does not have. --dry-run prints what would be created,
overwritten, deleted or skipped as identical, and writes nothing.

Writes run --parallel at a time, --batch of them (32) in one transaction
(Conn.Txn: all or nothing, with the same conditions as single writes); a
batch the store refuses (a condition failed, too large, no transactions,
or on ZooKeeper lost to concurrent writers with nothing applied) is written
one file at a time instead. On ZooKeeper a batch's transaction also creates
the directories of its files that the destination did not hold when
listed, in the same multi (one request per batch). If a write fails, or on Ctrl-C (exit 130),
no new write starts, the writes in flight finish, and everything this run
wrote is reverted (each file only if nobody changed it since); the error
names any file left written. A progress bar is drawn on stderr when stdout
is a terminal, or with --progress.`,
		Example: `  topoctl copy --from etcd2:127.0.0.1:2379:/vitess --to zk2:127.0.0.1:2181:/vitess
  topoctl copy --to consul:127.0.0.1:8500:vitess --overwrite --delete --dry-run /keyspaces`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			src, dst, under, err := o.openPair(ctx, "copy", from, to, args)
			if err != nil {
				return err
			}
			defer src.Close()
			defer dst.Close()

			tl, err := o.listTree(ctx, src.conn, under)
			if err != nil {
				return fmt.Errorf("reading %s: %w", src.name, err)
			}
			if len(tl.files) == 0 && !tl.skipped() {
				return emptyTree(under, src.name)
			}
			plan, err := o.planWrites(ctx, dst.conn, under, tl.files, po)
			if err != nil {
				return err
			}
			if dryRun {
				if err := o.reportPlan(plan, underName(src.name, under), underName(dst.name, under)); err != nil {
					return err
				}
				return o.reportSkipped("copied", src.name, under, tl)
			}
			if err := o.execute(ctx, dst.conn, plan, "copying"); err != nil {
				return err
			}
			if err := o.reportDone("copied", plan, underName(src.name, under), underName(dst.name, under)); err != nil {
				return err
			}
			return o.reportSkipped("copied", src.name, under, tl)
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "source store IMPL:ADDR:ROOT (default: the shared flags)")
	f.StringVar(&to, "to", "", "destination store IMPL:ADDR:ROOT")
	f.BoolVar(&dryRun, "dry-run", false, "print what would be created, overwritten, deleted or skipped; write nothing")
	f.BoolVar(&po.overwrite, "overwrite", false, "replace files that exist in the destination with other contents")
	f.BoolVar(&po.delete, "delete", false, "also delete the destination's files under PATH that the source does not have")
	o.treeFlags(cmd)
	return cmd
}

// treeFlags adds --parallel and --progress to a tree command.
func (o *options) treeFlags(cmd *cobra.Command) {
	cmd.Flags().IntVar(&o.parallel, "parallel", defaultParallel, "how many store requests to keep in flight")
	if n := cmd.Name(); n == "copy" || n == "import" || n == "rm" {
		cmd.Flags().IntVar(&o.batch, "batch", defaultBatch, "how many writes (rm -R: deletes) to send in one transaction (1: one request per file)")
	}
	cmd.Flags().BoolVar(&o.progress, "progress", false, "draw a progress bar on stderr even when stdout is not a terminal")
}

// reportPlan prints a dry run: one line per file that would be written or
// deleted, then a summary that counts the identical ones too (-o json
// lists every file).
func (o *options) reportPlan(plan *writePlan, from, to string) error {
	type item struct {
		Path   string `json:"path"`
		Bytes  int    `json:"bytes"`
		Action string `json:"action"`
	}
	items := make([]item, len(plan.ops))
	for i, w := range plan.ops {
		items[i] = item{displayPath(w.path), len(w.value), w.kind.String()}
	}
	if o.jsonOut() {
		return o.printJSON(map[string]any{"dry_run": true, "from": from, "to": to, "files": items, "bytes": plan.bytes(),
			"create": plan.count(kindCreate), "overwrite": plan.count(kindOverwrite), "identical": plan.count(kindIdentical), "delete": plan.count(kindDelete)})
	}
	for _, it := range items {
		switch it.Action {
		case "create":
			o.printf("would write %s (%s)\n", it.Path, plural(it.Bytes, "byte"))
		case "overwrite":
			o.printf("would write %s (%s) (overwrite)\n", it.Path, plural(it.Bytes, "byte"))
		case "identical":
			// Counted in the summary: a second run would otherwise list
			// every file of the tree.
		case "delete":
			o.printf("would delete %s\n", it.Path)
		}
	}
	// Every file of the plan, by what would happen to it; then what would
	// be written, counted as reportDone counts it.
	o.printf("dry run: %s (%d new, %d overwritten, %d identical, %d deleted) from %s to %s; would write %s (%s); nothing written\n",
		plural(len(items), "file"), plan.count(kindCreate), plan.count(kindOverwrite), plan.count(kindIdentical), plan.count(kindDelete),
		from, to, plural(plan.count(kindCreate)+plan.count(kindOverwrite), "file"), plural(plan.bytes(), "byte"))
	return nil
}

// underName names the tree under dir (canonical; "" is the root) of the
// store named store, for the summaries: "STORE" for the root, "STORE
// under /PATH" otherwise.
func underName(store, dir string) string {
	if dir == "" {
		return store
	}
	return store + " under " + displayPath(dir)
}

func (o *options) reportDone(verb string, plan *writePlan, from, to string) error {
	written := plan.count(kindCreate) + plan.count(kindOverwrite)
	if o.jsonOut() {
		return o.printJSON(map[string]any{verb: written, "bytes": plan.bytes(), "from": from, "to": to,
			"identical": plan.count(kindIdentical), "deleted": plan.count(kindDelete)})
	}
	extra := ""
	if n := plan.count(kindIdentical); n > 0 {
		extra += fmt.Sprintf(", %s already identical", plural(n, "file"))
	}
	if n := plan.count(kindDelete); n > 0 {
		extra += fmt.Sprintf(", %s deleted", plural(n, "file"))
	}
	o.printf("%s %s (%s) from %s to %s%s\n", verb, plural(written, "file"), plural(plan.bytes(), "byte"), from, to, extra)
	return nil
}

// difference is one line of diff output.
type difference struct {
	Path string `json:"path"`
	// Kind is "only-in-from", "only-in-to" or "differs".
	Kind string `json:"kind"`
	// FromBytes and ToBytes are the sizes on each side that has the file.
	FromBytes *int `json:"from_bytes,omitempty"`
	ToBytes   *int `json:"to_bytes,omitempty"`
}

func compareTrees(a, b []topo.KVInfo) []difference {
	var out []difference
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].Path < b[j].Path):
			out = append(out, difference{Path: displayPath(a[i].Path), Kind: "only-in-from", FromBytes: new(len(a[i].Value))})
			i++
		case i == len(a) || b[j].Path < a[i].Path:
			out = append(out, difference{Path: displayPath(b[j].Path), Kind: "only-in-to", ToBytes: new(len(b[j].Value))})
			j++
		default:
			if !bytes.Equal(a[i].Value, b[j].Value) {
				out = append(out, difference{Path: displayPath(a[i].Path), Kind: "differs", FromBytes: new(len(a[i].Value)), ToBytes: new(len(b[j].Value))})
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
		Use: "diff [--from IMPL:ADDR:ROOT] --to IMPL:ADDR:ROOT [PATH]",
		Example: `  topoctl diff --from etcd2:127.0.0.1:2379:/vitess --to zk2:127.0.0.1:2181:/vitess
  topoctl diff --to consul:127.0.0.1:8500:vitess/global -o json /keyspaces`,
		Short: "Compare two trees file by file; exit 1 when they differ",
		Long: `Compare every file under PATH (default: the whole root) in two stores,
named like copy's (--from defaults to the shared flags). It prints one line
per difference: "only in from: PATH", "only in to: PATH" or "differs: PATH
(N bytes vs M bytes)", and exits 1 when there is any, 0 when the trees hold
the same files with the same bytes. Versions are not compared (each store
numbers its own). Files at reserved paths (written by another tool) cannot
be compared: each is named on stderr and diff exits 1. Two trees with no
files at all under PATH are an error (exit 1): the roots are empty or absent. With --output json it prints {"identical","files",
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
			ta, err := o.listTree(ctx, a.conn, under)
			if err != nil {
				return fmt.Errorf("reading %s: %w", a.name, err)
			}
			tb, err := o.listTree(ctx, b.conn, under)
			if err != nil {
				return fmt.Errorf("reading %s: %w", b.name, err)
			}
			af, bf := ta.files, tb.files
			if len(af)+len(bf)+len(ta.reserved)+len(tb.reserved)+len(ta.odd)+len(tb.odd) == 0 {
				return backendkit.Wrap(topo.NoNode, displayPath(under), fmt.Errorf("no files under %s in either %s or %s: both roots are empty or absent (check the roots and addresses)", displayPath(under), a.name, b.name))
			}
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
						o.printf("differs: %s (%s vs %s)\n", d.Path, plural(*d.FromBytes, "byte"), plural(*d.ToBytes, "byte"))
					}
				}
				if len(diffs) == 0 {
					o.printf("identical: %s under %s in %s and %s\n", plural(len(af), "file"), displayPath(under), a.name, b.name)
				}
			}
			rerr := o.reportSkipped("compared", a.name, under, ta)
			if e := o.reportSkipped("compared", b.name, under, tb); e != nil {
				rerr = e
			}
			if rerr != nil {
				return rerr
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
