package topoctl

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/copy"
)

func newCopyCmd(stores *connector, out *printer) *cobra.Command {
	var from, to string
	var dryRun bool
	var po copy.PlanOptions
	var run *treeRun
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

The source is read once (one List): on etcd, Consul and memory a
snapshot; on ZooKeeper a walk, not a snapshot, so a copy made while others
write the source may hold some files as they were and others as they
became (diff afterwards to check). Only files are copied (lock and
election entries are not). Files that
another tool wrote at reserved paths (a "locks" or "Lock" segment, or a
first segment "elections") cannot be copied: each is named on stderr and
copy exits 1 after copying the rest. A source with no files under PATH is
an error (PATH, or the root, is empty or absent), and so, with --delete, is one that
holds only such reserved files (it would empty the destination).

Everything is checked first, before anything is written: every path against
the reserved-name rule, every size, and the destination. Files the
destination already holds byte for byte are skipped. If a file exists in
the destination with other contents nothing is written (NodeExists) unless
--overwrite. An empty file with files below it cannot be stored on
ZooKeeper (it reads as a directory): copy to ZooKeeper refuses one
(InvalidArgument) before writing anything. --delete also deletes the
destination's files under PATH that the source does not have. A
destination inside the source's tree (the same IMPL:ADDR, its root plus
PATH below the source's) is refused (InvalidArgument), and so, with
--delete, is a source inside the destination's tree. --dry-run prints what would be created,
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
			src, dst, under, err := stores.openPair(ctx, "copy", from, to, args)
			if err != nil {
				return err
			}
			defer src.Close()
			defer dst.Close()
			switch dstInside, srcInside := nested(src, dst, under); {
			case dstInside:
				// Each run would copy the last run's copy again, one level deeper.
				return backendkit.Wrap(topo.InvalidArgument, displayPath(under), fmt.Errorf("the destination %s is inside the source %s under %s: a copy into its own tree; nothing was written", dst.name, src.name, displayPath(under)))
			case srcInside && po.Delete:
				return backendkit.Wrap(topo.InvalidArgument, displayPath(under), fmt.Errorf("the source %s is inside the destination %s under %s: --delete would delete the source's own files; nothing was written", src.name, dst.name, displayPath(under)))
			}

			tl, err := run.list(ctx, src.conn, under)
			if err != nil {
				return fmt.Errorf("reading %s: %w", src.name, err)
			}
			if len(tl.Files) == 0 && !tl.Skipped() {
				return emptyTree(under, src.name)
			}
			if len(tl.Files) == 0 && po.Delete {
				// Only files at reserved paths, which are never copied:
				// --delete would empty the destination under PATH.
				return backendkit.Wrap(topo.NoNode, displayPath(under), fmt.Errorf("no files to copy under %s in %s (only files at reserved paths, which are not copied): with --delete this would delete every file under %s in %s; nothing was written", displayPath(under), src.name, displayPath(under), dst.name))
			}
			plan, err := run.plan(ctx, dst.conn, under, tl.Files, po)
			if err != nil {
				return err
			}
			if dryRun {
				if err := reportPlan(out, plan, underName(src.name, under), underName(dst.name, under)); err != nil {
					return err
				}
				return run.reportSkipped("copied", src.name, under, tl)
			}
			if err := run.execute(ctx, dst.conn, plan, "copying"); err != nil {
				return err
			}
			if err := reportDone(out, "copied", plan, underName(src.name, under), underName(dst.name, under)); err != nil {
				return err
			}
			return run.reportSkipped("copied", src.name, under, tl)
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "source store IMPL:ADDR:ROOT (default: the shared flags)")
	f.StringVar(&to, "to", "", "destination store IMPL:ADDR:ROOT")
	f.BoolVar(&dryRun, "dry-run", false, "print what would be created, overwritten, deleted or skipped; write nothing")
	f.BoolVar(&po.Overwrite, "overwrite", false, "replace files that exist in the destination with other contents")
	f.BoolVar(&po.Delete, "delete", false, "also delete the destination's files under PATH that the source does not have")
	run = newTreeRun(cmd, stores, out)
	return cmd
}

// reportPlan prints a dry run: one line per file that would be written or
// deleted, then a summary that counts the identical ones too (-o json
// lists every file).
func reportPlan(out *printer, plan *copy.Plan, from, to string) error {
	type item struct {
		Path   string `json:"path"`
		Bytes  int    `json:"bytes"`
		Action string `json:"action"`
	}
	items := make([]item, len(plan.Ops))
	for i, w := range plan.Ops {
		items[i] = item{displayPath(w.Path), len(w.Value), w.Kind.String()}
	}
	if out.jsonOut() {
		return out.printJSON(map[string]any{"dry_run": true, "from": from, "to": to, "files": items, "bytes": plan.Bytes(),
			"create": plan.Count(copy.Create), "overwrite": plan.Count(copy.Overwrite), "identical": plan.Count(copy.Identical), "delete": plan.Count(copy.Delete)})
	}
	for _, it := range items {
		switch it.Action {
		case "create":
			out.printf("would write %s (%s)\n", it.Path, plural(it.Bytes, "byte"))
		case "overwrite":
			out.printf("would write %s (%s) (overwrite)\n", it.Path, plural(it.Bytes, "byte"))
		case "identical":
			// Counted in the summary: a second run would otherwise list
			// every file of the tree.
		case "delete":
			out.printf("would delete %s\n", it.Path)
		}
	}
	// Every file of the plan, by what would happen to it; then what would
	// be written, counted as reportDone counts it.
	out.printf("dry run: %s (%d new, %d overwritten, %d identical, %d deleted) from %s to %s; would write %s (%s); nothing written\n",
		plural(len(items), "file"), plan.Count(copy.Create), plan.Count(copy.Overwrite), plan.Count(copy.Identical), plan.Count(copy.Delete),
		from, to, plural(plan.Count(copy.Create)+plan.Count(copy.Overwrite), "file"), plural(plan.Bytes(), "byte"))
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

func reportDone(out *printer, verb string, plan *copy.Plan, from, to string) error {
	written := plan.Count(copy.Create) + plan.Count(copy.Overwrite)
	if out.jsonOut() {
		return out.printJSON(map[string]any{verb: written, "bytes": plan.Bytes(), "from": from, "to": to,
			"identical": plan.Count(copy.Identical), "deleted": plan.Count(copy.Delete)})
	}
	extra := ""
	if n := plan.Count(copy.Identical); n > 0 {
		extra += fmt.Sprintf(", %s already identical", plural(n, "file"))
	}
	if n := plan.Count(copy.Delete); n > 0 {
		extra += fmt.Sprintf(", %s deleted", plural(n, "file"))
	}
	out.printf("%s %s (%s) from %s to %s%s\n", verb, plural(written, "file"), plural(plan.Bytes(), "byte"), from, to, extra)
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
	// decodedDifference is diff --decode's, for a file that differs.
	*decodedDifference
}

// differences are copy.Compare's differences of a and b as diff shows
// them.
func differences(a, b []topo.KVInfo) []difference {
	var out []difference
	for _, d := range copy.Compare(a, b) {
		e := difference{Path: displayPath(d.Path), Kind: d.Kind.String()}
		if d.Kind != copy.OnlyInTo {
			e.FromBytes = new(d.FromBytes)
		}
		if d.Kind != copy.OnlyInFrom {
			e.ToBytes = new(d.ToBytes)
		}
		out = append(out, e)
	}
	return out
}

func newDiffCmd(stores *connector, out *printer) *cobra.Command {
	var from, to, decode, protoset string
	run := &treeRun{stores: stores, out: out}
	cmd := &cobra.Command{
		Use: "diff [--from IMPL:ADDR:ROOT] --to IMPL:ADDR:ROOT [--decode] [PATH]",
		Example: `  topoctl diff --from etcd2:127.0.0.1:2379:/vitess --to zk2:127.0.0.1:2181:/vitess
  topoctl diff --to consul:127.0.0.1:8500:vitess/global -o json /keyspaces
  topoctl diff --to zk2:127.0.0.1:2181:/vitess/global --decode /keyspaces`,
		Short: "Compare two trees file by file; exit 1 when they differ",
		Long: `Compare every file under PATH (default: the whole root) in two stores,
named like copy's (--from defaults to the shared flags). It prints one line
per difference: "only in from: PATH", "only in to: PATH" or "differs: PATH
(N bytes vs M bytes)", and exits 1 when there is any, 0 when the trees hold
the same files with the same bytes. Versions are not compared (each store
numbers its own). Files at reserved paths (written by another tool) cannot
be compared: each is named on stderr and diff exits 1. Two trees with no
files at all under PATH are an error (exit 1): the roots are empty or absent. With --output json it prints {"identical", "from", "to",
"from_files", "to_files", "differences", "not_compared"}: "identical" is
true only when nothing differs and every file was compared;
"not_compared" lists the skipped paths.

--decode (bare, or --decode json) shows what differs in a file that
differs: both values decoded as get --decode shows them (the type chosen
by the file's path; every record of Vitess's layout is built in,
--protoset adds types), as a unified diff of their lines below the
"differs:" line, or why they do not decode; --decode raw diffs protobuf
wire dumps. With --output json such a difference gets "from_decoded" and
"to_decoded" (or "decode_error"). Files are still compared byte for byte.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			dec, err := newRecordDecoder(decode, protoset, stores.getenv)
			if err != nil {
				return err
			}
			a, b, under, err := stores.openPair(ctx, "diff", from, to, args)
			if err != nil {
				return err
			}
			defer a.Close()
			defer b.Close()
			ta, err := run.list(ctx, a.conn, under)
			if err != nil {
				return fmt.Errorf("reading %s: %w", a.name, err)
			}
			tb, err := run.list(ctx, b.conn, under)
			if err != nil {
				return fmt.Errorf("reading %s: %w", b.name, err)
			}
			af, bf := ta.Files, tb.Files
			if len(af)+len(bf)+len(ta.Reserved)+len(tb.Reserved)+len(ta.Odd)+len(tb.Odd) == 0 {
				what := "both roots are empty or absent (check the roots and addresses)"
				if d := strings.Trim(under, "/"); d != "" {
					what = fmt.Sprintf("%s is empty or absent in both (check the path, the roots and addresses)", displayPath(d))
				}
				return backendkit.Wrap(topo.NoNode, displayPath(under), fmt.Errorf("no files under %s in either %s or %s: %s", displayPath(under), a.name, b.name, what))
			}
			diffs := differences(af, bf)
			if dec != nil {
				decodeDifferences(dec, diffs, af, bf, !out.jsonOut())
			}
			if out.jsonOut() {
				if diffs == nil {
					diffs = []difference{}
				}
				skipped := slices.Concat(ta.Reserved, ta.Odd, tb.Reserved, tb.Odd)
				notCompared := make([]string, 0, len(skipped))
				for _, p := range skipped {
					notCompared = append(notCompared, displayPath(p))
				}
				if err := out.printJSON(map[string]any{"identical": len(diffs) == 0 && len(notCompared) == 0, "from": a.name, "to": b.name,
					"from_files": len(af), "to_files": len(bf), "differences": diffs, "not_compared": notCompared}); err != nil {
					return err
				}
			} else {
				for _, d := range diffs {
					switch d.Kind {
					case "only-in-from":
						out.printf("only in from: %s\n", d.Path)
					case "only-in-to":
						out.printf("only in to: %s\n", d.Path)
					default:
						out.printf("differs: %s (%s vs %s)\n", d.Path, plural(*d.FromBytes, "byte"), plural(*d.ToBytes, "byte"))
						if d.decodedDifference != nil {
							out.printf("%s", d.text(d.Path))
						}
					}
				}
				if len(diffs) == 0 {
					out.printf("identical: %s under %s in %s and %s\n", plural(len(af), "file"), displayPath(under), a.name, b.name)
				}
			}
			rerr := run.reportSkipped("compared", a.name, under, ta)
			if e := run.reportSkipped("compared", b.name, under, tb); e != nil {
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
	f.StringVar(&decode, "decode", "", "show each file that differs decoded, as a line diff: json (bare --decode: readable JSON, the type chosen by the path) or raw (protobuf wire dump)")
	f.Lookup("decode").NoOptDefVal = decodeDefault
	f.StringVar(&protoset, "protoset", "", "FileDescriptorSet file adding message types for --decode json")
	return cmd
}
