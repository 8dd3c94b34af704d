package backendkit

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/topokit/topokit/topo"
)

// JoinPath joins a canonical directory (possibly "", the cell root) and a
// name.
func JoinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// CheckValue returns an InvalidArgument *topo.Error for path when contents
// is larger than topo.MaxValueSize (in bytes), and nil otherwise.
func CheckValue(path string, contents []byte) error {
	if len(contents) > topo.MaxValueSize {
		return Wrap(topo.InvalidArgument, path, errors.New("value larger than MaxValueSize"))
	}
	return nil
}

// CheckContext returns nil while ctx is live, and otherwise the
// *topo.Error that FromContext gives. Backends call it before writing
// anything.
func CheckContext(ctx context.Context, path string) error {
	if ctx.Err() == nil {
		return nil
	}
	return FromContext(ctx, path)
}

// FromContext maps a finished context onto a typed error for path: Timeout
// when its deadline passed, Interrupted when it was cancelled. It returns
// nil while ctx is live.
func FromContext(ctx context.Context, path string) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	return Wrap(contextCode(err), path, err)
}

// contextCode is the code of a finished context's error: Timeout for a
// passed deadline, Interrupted for a cancellation.
func contextCode(err error) topo.ErrorCode {
	if errors.Is(err, context.DeadlineExceeded) {
		return topo.Timeout
	}
	return topo.Interrupted
}

// Ready runs the first and the last of backendkit's checks, for a call
// whose arguments need no check or were checked already: CheckContext
// (Timeout, Interrupted), then a Closed *topo.Error naming path when
// closed reports the Conn closed. etcd2topo, zk2topo and consultopo use
// it.
func Ready(ctx context.Context, path string, closed func() bool) error {
	if err := CheckContext(ctx, path); err != nil {
		return err
	}
	if closed() {
		return topo.NewError(topo.Closed, path)
	}
	return nil
}

// Begin runs the checks that open a Conn method taking one path, in
// backendkit's order: CheckContext (Timeout, Interrupted), then check on
// path (its InvalidPath or InvalidArgument *topo.Error; topo.CleanFilePath,
// topo.CleanDirPath, topo.CleanPrefix or a closure over CheckCreate and the
// like), then a Closed *topo.Error naming the checked path when closed
// reports the Conn closed. It returns the checked path. etcd2topo uses it;
// zk2topo, consultopo and memorytopo open their methods the same way.
func Begin(ctx context.Context, path string, check func(string) (string, error), closed func() bool) (string, error) {
	if err := CheckContext(ctx, path); err != nil {
		return "", err
	}
	p, err := check(path)
	if err != nil {
		return "", err
	}
	if closed() {
		return "", topo.NewError(topo.Closed, p)
	}
	return p, nil
}

// BeginVersioned is Begin for Update and Delete, whose check (a closure
// over CheckUpdate or CheckDelete) also returns the version number: it
// returns the checked path and that number. etcd2topo, zk2topo and
// consultopo use it.
func BeginVersioned(ctx context.Context, path string, check func(string) (string, int64, error), closed func() bool) (string, int64, error) {
	var n int64
	p, err := Begin(ctx, path, func(path string) (p string, err error) {
		p, n, err = check(path)
		return p, err
	}, closed)
	return p, n, err
}

// NoHistory is GetVersion of a store that keeps no history of a file's
// values: after Begin's checks with CheckGetVersion (Timeout, Interrupted,
// InvalidPath, InvalidArgument, Closed) it returns a NoImplementation
// *topo.Error naming the path and wrapping why. zk2topo and consultopo use
// it.
func NoHistory(ctx context.Context, filePath string, version int64, closed func() bool, why string) error {
	p, err := Begin(ctx, filePath, func(p string) (string, error) { return CheckGetVersion(p, version) }, closed)
	if err != nil {
		return err
	}
	return Wrap(topo.NoImplementation, p, errors.New(why))
}

// MergeEntries sorts the entries of one directory listing by name (stably)
// and makes the entries of each name one: a directory when any of them is
// one (a store of flat keys can hold a file "n" and keys below "n/"),
// Ephemeral only when all of them are. etcd2topo and consultopo list
// directories with it.
func MergeEntries(entries []topo.DirEntry) []topo.DirEntry {
	slices.SortStableFunc(entries, func(a, b topo.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	out := entries[:0]
	for _, e := range entries {
		if n := len(out); n > 0 && out[n-1].Name == e.Name {
			if e.Type == topo.TypeDirectory {
				out[n-1].Type = topo.TypeDirectory
			}
			out[n-1].Ephemeral = out[n-1].Ephemeral && e.Ephemeral
			continue
		}
		out = append(out, e)
	}
	return out
}
