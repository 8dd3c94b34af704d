package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
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
		sp, err := topo.CleanFilePath(topo.JoinPath(under, filepath.ToSlash(rel)))
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := topo.CheckValue(sp, b); err != nil {
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
	var dryRun, overwrite bool
	cmd := &cobra.Command{
		Use:   "import DIR [PATH]",
		Short: "Write every file of a local directory into the store",
		Long: `Write every regular file under the local directory DIR into the store, at
PATH/<its path relative to DIR> (PATH defaults to the root), holding the
file's bytes exactly. It is the inverse of export: export then import
round-trips byte for byte.

Everything is checked first (paths, sizes up to 512 KiB, symbolic links
refused); if a file already exists in the store nothing is written
(NodeExists) unless --overwrite. If a write fails, import reports how far it
got and reverts what it wrote. --dry-run prints what would be written.`,
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
			ctx := cmd.Context()
			st, err := o.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			plan, err := o.planWrites(ctx, st.conn, under, files, overwrite)
			if err != nil {
				return err
			}
			if dryRun {
				return o.reportPlan(plan, args[0], st.name)
			}
			if err := o.execute(ctx, st.conn, plan, "importing"); err != nil {
				return err
			}
			return o.reportDone("imported", plan, args[0], st.name)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be written, write nothing")
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "replace files that exist in the store")
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
writing anything.`,
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
			files, err := o.listTree(ctx, st.conn, under)
			if err != nil {
				return err
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
						return topo.Wrap(topo.InvalidPath, topo.JoinPath(under, d), fmt.Errorf("is both a file and a directory in the store; nothing was exported"))
					}
				}
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			var total int
			for i, f := range files {
				lp := filepath.Join(dir, filepath.FromSlash(rels[i]))
				if err := os.MkdirAll(filepath.Dir(lp), 0o755); err != nil {
					return fmt.Errorf("exported %d of %s: %w", i, plural(len(files), "file"), err)
				}
				if err := os.WriteFile(lp, f.Value, 0o644); err != nil {
					return fmt.Errorf("exported %d of %s: %w", i, plural(len(files), "file"), err)
				}
				total += len(f.Value)
			}
			if o.jsonOut() {
				return o.printJSON(map[string]any{"exported": len(files), "bytes": total, "from": st.name, "to": dir})
			}
			o.printf("exported %s (%s) from %s to %s\n", plural(len(files), "file"), plural(total, "byte"), st.name, dir)
			return nil
		},
	}
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "write into a non-empty directory, replacing files")
	return cmd
}
