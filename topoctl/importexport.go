package topoctl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/copy"
)

// readDir is copy.ReadDir after checking that dir is a directory (a
// usage error otherwise).
func readDir(dir, under string) ([]topo.KVInfo, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, usageError{err}
	}
	if !info.IsDir() {
		return nil, usagef("%s is not a directory", dir)
	}
	return copy.ReadDir(dir, under)
}

func newImportCmd(stores *connector, out *printer) *cobra.Command {
	var run *treeRun
	var dryRun bool
	var po copy.PlanOptions
	cmd := &cobra.Command{
		Use:   "import DIR [PATH]",
		Short: "Write every file of a local directory into the store",
		Long: `Write every regular file under the local directory DIR into the store, at
PATH/<its path relative to DIR> (PATH defaults to the root), holding the
file's bytes exactly. It is the inverse of export: export then import
round-trips byte for byte.

Everything is checked first, before anything is written: paths (including
the reserved-name rule: no "locks" or "Lock" segment, no first segment
"elections"), sizes up to 512 KiB, symbolic links refused. Files the store
already holds byte for byte are skipped; if a file exists with other
contents nothing is written (NodeExists) unless --overwrite. An empty file
that would have files below it in the store is refused on ZooKeeper, which
cannot store one (it reads as a directory). --delete also
deletes the store's files under PATH that DIR does not have. --dry-run
prints what would be created, overwritten, deleted or skipped. A DIR with
no files in it is an error (exit 1), as copy of an empty source is.

Writes run --parallel at a time, --batch of them (32) in one transaction
(Conn.Txn: all or nothing, with the same conditions as single writes); a
batch the store refuses (a condition failed, too large, no transactions,
or on ZooKeeper lost to concurrent writers with nothing applied) is written
one file at a time instead. On ZooKeeper a batch's transaction also creates
the directories of its files that the destination did not hold when
listed, in the same multi (one request per batch). If a write fails, or on Ctrl-C (exit 130),
no new write starts, the writes in flight finish, and everything this run
wrote is reverted (each file only if nobody changed it since); the error
names any file left written.`,
		Example: `  topoctl import ./vitess-local/global
  topoctl --cell zone1 import --overwrite ./vitess-local/zone1`,
		Args: rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			under, err := topo.CleanDirPath(argOr(args, 1, "/"))
			if err != nil {
				return err
			}
			files, err := readDir(args[0], under)
			if err != nil {
				return err
			}
			if len(files) == 0 {
				// As copy of an empty source: surely not what was meant.
				return fmt.Errorf("no files under %s: nothing to import (an empty directory, or not the one meant?)", args[0])
			}
			ctx := cmd.Context()
			st, err := stores.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			plan, err := run.plan(ctx, st.conn, under, files, po)
			if err != nil {
				return err
			}
			if dryRun {
				return reportPlan(out, plan, args[0], underName(st.name, under))
			}
			if err := run.execute(ctx, st.conn, plan, "importing"); err != nil {
				return err
			}
			return reportDone(out, "imported", plan, args[0], underName(st.name, under))
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be created, overwritten, deleted or skipped; write nothing")
	cmd.Flags().BoolVar(&po.Overwrite, "overwrite", false, "replace files that exist in the store with other contents")
	cmd.Flags().BoolVar(&po.Delete, "delete", false, "also delete the store's files under PATH that DIR does not have")
	run = newTreeRun(cmd, stores, out)
	return cmd
}

func newExportCmd(stores *connector, out *printer) *cobra.Command {
	var run *treeRun
	var overwrite bool
	var decodeMode, protoset string
	cmd := &cobra.Command{
		Use:   "export DIR [PATH]",
		Short: "Write every file under a store path into a local directory",
		Long: `Write every file under PATH (default: the root) into the local directory
DIR, at DIR/<its path relative to PATH>, holding the stored bytes exactly.
Lock and election entries are not files and are not exported.

DIR must be absent or empty unless --overwrite. A store may hold both a file
"a" and a file "a/b", which a file system cannot; export then fails before
writing anything (also when "a" is PATH itself). A PATH that is a lone file
is written at DIR/<its name>. Files at reserved paths (written by another tool) are
not exported: each is named on stderr and export exits 1 after writing the
rest. A PATH with no files under it is an error (it, or the root, is empty or
absent). Files are read in one List and written --parallel at a time.

--decode (bare, or --decode json) writes each record decoded instead, as
readable JSON at DIR/<path>.json, its type chosen by its path as get
--decode chooses it (every record of Vitess's layout is built in; locks',
elections' and metadata files hold text; --protoset adds types, default
$` + envProtoset + `); --decode raw writes protobuf wire dumps at
DIR/<path>.txt. A file that does not decode is written as stored, at its
own path, with a note on stderr saying why. A decoded export is for
reading and diffing with local tools: import takes a plain export only.
For one JSON document per record on stdout, "topoctl get -R --decode -o
json PATH".`,
		Example: `  topoctl export /tmp/global
  topoctl export --decode /tmp/global-decoded
  topoctl -i consul -a 127.0.0.1:8500 --topo-global-root vitess export /tmp/from-consul`,
		Args: rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			under, err := topo.CleanDirPath(argOr(args, 1, "/"))
			if err != nil {
				return err
			}
			dec, err := newRecordDecoder(decodeMode, protoset, stores.getenv)
			if err != nil {
				return err
			}
			dir := args[0]
			if !overwrite {
				ents, err := os.ReadDir(dir)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return usageError{err}
				}
				if len(ents) > 0 {
					return usagef("%s is not empty (use --overwrite to write into it)", dir)
				}
			}
			ctx := cmd.Context()
			st, err := stores.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			tl, err := run.list(ctx, st.conn, under)
			if err != nil {
				return err
			}
			files := tl.Files
			if len(files) == 0 && !tl.Skipped() {
				return emptyTree(under, st.name)
			}
			if dec != nil {
				if files, err = decodeForExport(out, dec, files); err != nil {
					return err
				}
			}
			total, err := copy.Export(ctx, files, under, dir, copy.ExportOptions{Parallel: run.parallel, Progress: run.newProgress(len(files), "exporting")})
			var xe *copy.ExportError
			switch {
			case errors.As(err, &xe) && xe.Interrupted:
				return exitError{code: ExitInterrupted, err: fmt.Errorf("export interrupted after %d of %s, written completely into %s", xe.Written, plural(len(files), "file"), dir)}
			case err != nil:
				return err
			}
			if out.jsonOut() {
				if err := out.printJSON(map[string]any{"exported": len(files), "bytes": total, "from": st.name, "to": dir}); err != nil {
					return err
				}
			} else {
				out.printf("exported %s (%s) from %s to %s\n", plural(len(files), "file"), plural(total, "byte"), underName(st.name, under), dir)
			}
			return run.reportSkipped("exported", st.name, under, tl)
		},
	}
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "write into a non-empty directory, replacing files")
	cmd.Flags().StringVar(&decodeMode, "decode", "", "write each record decoded: json (bare --decode: readable JSON at PATH.json, the type chosen by the path) or raw (protobuf wire dump at PATH.txt)")
	cmd.Flags().Lookup("decode").NoOptDefVal = decodeDefault
	cmd.Flags().StringVar(&protoset, "protoset", "", "FileDescriptorSet file adding message types for --decode json")
	run = newTreeRun(cmd, stores, out)
	return cmd
}

// decodeForExport returns files with each value decoded by dec, as export
// --decode writes them: at PATH.json (PATH.txt for a wire dump) holding
// the readable form; a file that does not decode keeps its path and bytes,
// with a note on stderr. Two files that would land on one path (a file
// "a.json" beside a decoded "a") fail with InvalidPath, nothing written.
func decodeForExport(out *printer, dec *recordDecoder, files []topo.KVInfo) ([]topo.KVInfo, error) {
	ext := ".json"
	if dec.raw {
		ext = ".txt"
	}
	decoded := make([]topo.KVInfo, 0, len(files))
	from := map[string]string{}
	for _, f := range files {
		d := f
		if _, text, err := dec.decode(f.Path, f.Value, true); err == nil {
			d.Path, d.Value = f.Path+ext, []byte(text)
		} else {
			out.eprintf("note: %s is exported as stored: %v\n", displayPath(f.Path), err)
		}
		if other, ok := from[d.Path]; ok {
			return nil, backendkit.Wrap(topo.InvalidPath, displayPath(d.Path), fmt.Errorf("export --decode would write %s and %s both at %s: nothing written (export without --decode)", displayPath(other), displayPath(f.Path), displayPath(d.Path)))
		}
		from[d.Path] = f.Path
		decoded = append(decoded, d)
	}
	return decoded, nil
}
