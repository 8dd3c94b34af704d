package topoctl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// readDir reads every regular file under dir as a store file at
// under/<relative path>. Symbolic links and other special files are
// refused, and every path and size is checked before anything is written.
func readDir(dir, under string) ([]topo.KVInfo, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, usageError{err}
	}
	if !info.IsDir() {
		return nil, usagef("%s is not a directory", dir)
	}
	var files []topo.KVInfo
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s: not a regular file (symbolic links and special files are not imported)", p)
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		sp, err := topo.CleanFilePath(backendkit.JoinPath(under, filepath.ToSlash(rel)))
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := backendkit.CheckReserved(sp); err != nil {
			return fmt.Errorf("%s: nothing was written: %w", p, at(err, sp))
		}
		if err := checkValue(sp, b); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		files = append(files, topo.KVInfo{Path: sp, Value: b})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortByPath(files)
	return files, nil
}

func newImportCmd(o *options) *cobra.Command {
	var dryRun bool
	var po planOpts
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
contents nothing is written (NodeExists) unless --overwrite. --delete also
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
			st, err := o.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			plan, err := o.planWrites(ctx, st.conn, under, files, po)
			if err != nil {
				return err
			}
			if dryRun {
				return o.reportPlan(plan, args[0], underName(st.name, under))
			}
			if err := o.execute(ctx, st.conn, plan, "importing"); err != nil {
				return err
			}
			return o.reportDone("imported", plan, args[0], underName(st.name, under))
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be created, overwritten, deleted or skipped; write nothing")
	cmd.Flags().BoolVar(&po.overwrite, "overwrite", false, "replace files that exist in the store with other contents")
	cmd.Flags().BoolVar(&po.delete, "delete", false, "also delete the store's files under PATH that DIR does not have")
	o.treeFlags(cmd)
	return cmd
}

func newExportCmd(o *options) *cobra.Command {
	var overwrite bool
	cmd := &cobra.Command{
		Use:   "export DIR [PATH]",
		Short: "Write every file under a store path into a local directory",
		Long: `Write every file under PATH (default: the root) into the local directory
DIR, at DIR/<its path relative to PATH>, holding the stored bytes exactly.
Lock and election entries are not files and are not exported.

DIR must be absent or empty unless --overwrite. A store may hold both a file
"a" and a file "a/b", which a file system cannot; export then fails before
writing anything. Files at reserved paths (written by another tool) are
not exported: each is named on stderr and export exits 1 after writing the
rest. A PATH with no files under it is an error (the root is empty or
absent). Files are read in one List and written --parallel at a time.`,
		Example: `  topoctl export /tmp/global
  topoctl -i consul -a 127.0.0.1:8500 --topo-global-root vitess export /tmp/from-consul`,
		Args: rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			under, err := topo.CleanDirPath(argOr(args, 1, "/"))
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
			st, err := o.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			tl, err := o.listTree(ctx, st.conn, under)
			if err != nil {
				return err
			}
			files := tl.files
			if len(files) == 0 && !tl.skipped() {
				return emptyTree(under, st.name)
			}
			// Map every file to its local path and refuse file/directory
			// clashes before writing.
			rels := make([]string, len(files))
			isFile := map[string]bool{}
			for i, f := range files {
				rel := strings.TrimPrefix(f.Path, under+"/")
				if under == "" {
					rel = f.Path
				} else if f.Path == under {
					rel = path.Base(f.Path)
				}
				rels[i] = rel
				isFile[rel] = true
			}
			for _, rel := range rels {
				for d := path.Dir(rel); d != "."; d = path.Dir(d) {
					if isFile[d] {
						return backendkit.Wrap(topo.InvalidPath, backendkit.JoinPath(under, d), fmt.Errorf("is both a file and a directory in the store; nothing was exported"))
					}
				}
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			var (
				mu       sync.Mutex
				total    int
				n        int
				firstErr error
			)
			bar := o.newProgress(len(files), "exporting")
			forEach(files, o.parallel, func() bool {
				mu.Lock()
				defer mu.Unlock()
				return firstErr != nil || ctx.Err() != nil
			}, func(i int, f topo.KVInfo) {
				lp := filepath.Join(dir, filepath.FromSlash(rels[i]))
				err := os.MkdirAll(filepath.Dir(lp), 0o755)
				if err == nil {
					err = os.WriteFile(lp, f.Value, 0o644)
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					return
				}
				n++
				total += len(f.Value)
				bar.add()
			})
			bar.finish(firstErr == nil && ctx.Err() == nil)
			if firstErr != nil {
				return fmt.Errorf("exported %d of %s: %w", n, plural(len(files), "file"), firstErr)
			}
			if ctx.Err() != nil {
				return exitError{code: ExitInterrupted, err: fmt.Errorf("export interrupted after %d of %s, written completely into %s", n, plural(len(files), "file"), dir)}
			}
			if o.jsonOut() {
				if err := o.printJSON(map[string]any{"exported": len(files), "bytes": total, "from": st.name, "to": dir}); err != nil {
					return err
				}
			} else {
				o.printf("exported %s (%s) from %s to %s\n", plural(len(files), "file"), plural(total, "byte"), underName(st.name, under), dir)
			}
			return o.reportSkipped("exported", st.name, under, tl)
		},
	}
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "write into a non-empty directory, replacing files")
	o.treeFlags(cmd)
	return cmd
}
