package inspect

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// LockHolderReader is implemented by a backend's Conn whose lock entries
// cannot be read through Get and ListDir (zk2topo: ephemeral znodes are
// not files). LockHolder uses it on a Conn that is no QueueReader. LockHolder returns the contents of the entry that holds the
// lock on dir, NoNode when there is none.
type LockHolderReader interface {
	LockHolder(ctx context.Context, dir string) (string, error)
}

// LockHolder returns the contents of the lock entry that holds the lock on
// the directory dir (the description its holder gave Lock, e.g. topoctl's
// "topoctl lock on HOST pid N: COMMAND"; "" when the holder gave none), as
// far as the store shows it: the holder of the lock's queue as the Conn's
// QueueReader reads it (every built-in backend: the oldest entry under
// <dir>/locks on etcd, ZooKeeper and memory, the key <dir>/Lock on
// Consul; never one of the contenders waiting behind it, as LockOf). On a
// Conn without one, a LockHolderReader's answer; on a Conn with neither
// (a custom backend), the entry under <dir>/locks with the lowest
// version, or the key <dir>/Lock when there is none. It returns NoNode
// when nobody holds the lock or the holder's entry cannot be read,
// InvalidPath for a bad dir, and the store's errors (Timeout, Interrupted,
// Unavailable, ...).
func LockHolder(ctx context.Context, conn topo.Conn, dir string) (string, error) {
	d, err := topo.CleanDirPath(dir)
	if err != nil {
		return "", err
	}
	if r, ok := topo.ConnAs[QueueReader](conn); ok {
		st, err := r.Inspect(ctx, claims.Queue{Path: d})
		if err != nil {
			return "", err
		}
		if !st.Held {
			return "", errNoHolder(d)
		}
		return st.Holder.Contents, nil
	}
	if r, ok := topo.ConnAs[LockHolderReader](conn); ok {
		return r.LockHolder(ctx, d)
	}
	locks := backendkit.JoinPath(d, backendkit.LocksDirName)
	des, err := conn.ListDir(ctx, locks, false)
	if err != nil && !topo.IsErrType(err, topo.NoNode) {
		return "", err
	}
	// The holder is the oldest entry: the lowest version (names sort in
	// the same order on the built-in layouts). An entry that vanished
	// meanwhile is skipped; one whose version is not a number comes after
	// the others, in name order. Its contents may be empty: it still
	// holds the lock.
	slices.SortFunc(des, func(a, b topo.DirEntry) int { return strings.Compare(a.Name, b.Name) })
	best, bestVer, found := "", int64(math.MaxInt64), false
	for _, de := range des {
		b, v, err := conn.Get(ctx, backendkit.JoinPath(locks, de.Name))
		if err != nil {
			continue
		}
		n, perr := strconv.ParseInt(v.String(), 10, 64)
		if perr != nil {
			n = math.MaxInt64
		}
		if !found || n < bestVer {
			best, bestVer, found = string(b), n, true
		}
	}
	if found {
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
	return "", errNoHolder(d)
}

func errNoHolder(d string) error {
	return &topo.Error{Code: topo.NoNode, Path: d, Err: errors.New("nobody holds the lock, or its holder cannot be read")}
}
