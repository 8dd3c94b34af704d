package copy

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/tree"
)

// ReadDir reads every regular file under the local directory dir as a
// store file at under/<relative path> (under canonical, "" the root),
// sorted by path, for PlanWrites. Symbolic links and other special files
// are refused, and every path (InvalidPath, reserved names included) and
// size (InvalidArgument) is checked; errors name the local file. dir must
// be a directory (the caller checks, to say so in its own words).
func ReadDir(dir, under string) ([]topo.KVInfo, error) {
	var files []topo.KVInfo
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
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
			return fmt.Errorf("%s: nothing was written: %w", p, tree.WithPath(err, sp))
		}
		if err := CheckValue(sp, b); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		files = append(files, topo.KVInfo{Path: sp, Value: b})
		return nil
	})
	if err != nil {
		return nil, err
	}
	tree.SortByPath(files)
	return files, nil
}

// ExportOptions are the choices of Export.
type ExportOptions struct {
	// Parallel is how many files to write at once (below 1: one).
	Parallel int
	// Progress is told of each file written (may be nil).
	Progress Progress
}

// ExportError is the error of an Export that did not complete.
type ExportError struct {
	// Written and Total count the files written completely and to write.
	Written, Total int
	// Interrupted is set when ctx ended (Err is nil then).
	Interrupted bool
	// Err is the first local write's error.
	Err error
}

// Error says how far the export got.
func (e *ExportError) Error() string {
	if e.Interrupted {
		return fmt.Sprintf("export interrupted after %d of %s", e.Written, plural(e.Total, "file"))
	}
	return fmt.Sprintf("exported %d of %s: %v", e.Written, plural(e.Total, "file"), e.Err)
}

// Unwrap returns the local write's error.
func (e *ExportError) Unwrap() error { return e.Err }

// Export writes files (read under the canonical directory under, as
// tree.List returns them) into the local directory dir, at
// dir/<path relative to under>, holding their bytes exactly, and returns
// how many bytes it wrote. A store may hold both a file "a" and a file
// "a/b", which a file system cannot: Export then fails with InvalidPath
// before writing anything (also when "a" is under itself and files are
// below it). A lone file at under is written at dir/<its last segment>. When a write fails or ctx ends, no new write
// starts and *ExportError says how many files were written completely.
func Export(ctx context.Context, files []topo.KVInfo, under, dir string, opts ExportOptions) (int, error) {
	rels := make([]string, len(files))
	isFile := map[string]bool{}
	for i, f := range files {
		rel := strings.TrimPrefix(f.Path, under+"/")
		if under == "" {
			rel = f.Path
		} else if f.Path == under {
			if len(files) > 1 {
				// Its files would land beside it: under/x at dir/x and
				// under itself at dir/<base>, the same place as
				// under/<base>.
				return 0, backendkit.Wrap(topo.InvalidPath, under, fmt.Errorf("is both a file and a directory in the store; nothing was exported"))
			}
			rel = path.Base(f.Path)
		}
		if isFile[rel] {
			return 0, backendkit.Wrap(topo.InvalidPath, f.Path, fmt.Errorf("would be exported at %s, as another file is; nothing was exported", rel))
		}
		rels[i] = rel
		isFile[rel] = true
	}
	for _, rel := range rels {
		for d := path.Dir(rel); d != "."; d = path.Dir(d) {
			if isFile[d] {
				return 0, backendkit.Wrap(topo.InvalidPath, backendkit.JoinPath(under, d), fmt.Errorf("is both a file and a directory in the store; nothing was exported"))
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	var (
		mu       sync.Mutex
		total    int
		n        int
		firstErr error
	)
	eo := ExecOptions{Progress: opts.Progress}
	forEach(files, opts.Parallel, func() bool {
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
		eo.step()
	})
	eo.done(firstErr == nil && ctx.Err() == nil)
	if firstErr != nil {
		return total, &ExportError{Written: n, Total: len(files), Err: firstErr}
	}
	if ctx.Err() != nil {
		return total, &ExportError{Written: n, Total: len(files), Interrupted: true}
	}
	return total, nil
}
