package inspect

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// LockHolderReader is implemented by a backend's Conn whose lock entries
// cannot be read through Get and ListDir (zk2topo: ephemeral znodes are
// not files). LockHolder returns the contents of the entry that holds the
// lock on dir, NoNode when there is none.
type LockHolderReader interface {
	LockHolder(ctx context.Context, dir string) (string, error)
}

// LockHolder returns the contents of the lock entry that holds the lock on
// the directory dir (the description its holder gave Lock, e.g. topoctl's
// "topoctl lock on HOST pid N: COMMAND"), as far as the store shows it:
// the oldest entry under <dir>/locks (lowest version) on etcd and memory,
// read by the backend itself on ZooKeeper (LockHolderReader), the key
// <dir>/Lock on Consul. It returns NoNode when nobody holds the lock or
// the holder's entry cannot be read, InvalidPath for a bad dir, and the
// store's errors (Timeout, Interrupted, Unavailable, ...).
func LockHolder(ctx context.Context, conn topo.Conn, dir string) (string, error) {
	d, err := topo.CleanDirPath(dir)
	if err != nil {
		return "", err
	}
	if r, ok := topo.ConnAs[LockHolderReader](conn); ok {
		return r.LockHolder(ctx, d)
	}
	locks := backendkit.JoinPath(d, backendkit.LocksDirName)
	des, err := conn.ListDir(ctx, locks, false)
	if err != nil && !topo.IsErrType(err, topo.NoNode) {
		return "", err
	}
	// The holder is the oldest entry: the lowest version (etcd's
	// ModRevision; names sort in the same order).
	slices.SortFunc(des, func(a, b topo.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	best, bestVer := "", int64(-1)
	for _, de := range des {
		b, v, err := conn.Get(ctx, backendkit.JoinPath(locks, de.Name))
		if err != nil || len(b) == 0 {
			continue
		}
		n, perr := strconv.ParseInt(v.String(), 10, 64)
		if best == "" || (perr == nil && n < bestVer) {
			best, bestVer = string(b), n
		}
	}
	if best != "" {
		return best, nil
	}
	lock := backendkit.JoinPath(d, backendkit.ConsulLockName)
	b, _, err := conn.Get(ctx, lock)
	switch {
	case err == nil && len(b) > 0:
		return string(b), nil
	case err != nil && !topo.IsErrType(err, topo.NoNode):
		return "", err
	}
	return "", &topo.Error{Code: topo.NoNode, Path: d, Err: errors.New("nobody holds the lock, or its holder cannot be read")}
}
