package backendkit

import (
	"errors"
	"fmt"
	"time"

	"github.com/topokit/topokit/topo"
)

// The places of Vitess's layout that hold locks and elections next to
// files. topo.IsReserved refuses exactly these names.

// LocksDirName is the name of the directory that holds a directory's lock
// entries on etcd and ZooKeeper (<dir>/locks/<entry>), and of the one that
// holds an election's candidates on etcd (elections/<name>/locks/<entry>).
// It is reserved at any depth.
const LocksDirName = "locks"

// ConsulLockName is the name of the key that holds a directory's lock on
// Consul (<dir>/Lock). It is reserved at any depth, on every backend.
const ConsulLockName = "Lock"

// ElectionsDirName is the top-level directory under which every backend
// keeps its leader elections. It is reserved as the first segment of a path.
const ElectionsDirName = "elections"

var errReserved = errors.New(`reserved name: a path must not contain a "locks" or "Lock" segment ` +
	`nor start with "elections" (those places hold locks and elections in the store)`)

// CheckReserved returns an InvalidPath *topo.Error for p (a canonical
// path) when topo.IsReserved(p), naming the rule, and nil otherwise.
func CheckReserved(p string) error {
	if !topo.IsReserved(p) {
		return nil
	}
	return Wrap(topo.InvalidPath, p, errReserved)
}

// CleanPlain returns p without its leading "/" and true when p is in the
// plain form that topo.CleanFilePath and topo.CleanDirPath return
// unchanged (but for that "/") and CheckReserved accepts: printable
// ASCII, not empty, no empty, "." or ".." segment, no trailing "/", no
// segment "locks" or "Lock" and no first segment "elections". Anything
// else gets false, also some valid paths: the caller then runs the full
// checks, which give every result and error. It is the one pass that
// the checks of a common path need.
func CleanPlain(p string) (string, bool) {
	c := p
	if len(c) > 0 && c[0] == '/' {
		c = c[1:]
	}
	if c == "" || len(c) > topo.MaxPathLength {
		return "", false
	}
	start := 0
	for i := 0; i <= len(c); i++ {
		if i < len(c) {
			if b := c[i]; b != '/' {
				if b < 0x20 || b >= 0x7f {
					return "", false
				}
				continue
			}
		}
		// c[start:i] is a segment: only a few lengths can be refused.
		switch seg := c[start:i]; len(seg) {
		case 0:
			return "", false
		case 1, 2:
			if seg == "." || seg == ".." {
				return "", false
			}
		case len(ConsulLockName), len(LocksDirName):
			if seg == ConsulLockName || seg == LocksDirName {
				return "", false
			}
		case len(ElectionsDirName):
			if start == 0 && seg == ElectionsDirName {
				return "", false
			}
		}
		start = i + 1
	}
	return c, true
}

// CheckLockPath validates the directory of Lock, TryLock, LockWithTTL and
// LockName and returns it in canonical form ("" for the cell root). It
// returns the InvalidPath *topo.Error of topo.CleanDirPath for a malformed
// path, and the one of CheckReserved for a reserved one.
func CheckLockPath(dirPath string) (string, error) {
	if d, ok := CleanPlain(dirPath); ok {
		return d, nil
	}
	d, err := topo.CleanDirPath(dirPath)
	if err != nil {
		return "", err
	}
	if err := CheckReserved(d); err != nil {
		return "", err
	}
	return d, nil
}

// CheckLock validates the arguments of Lock, TryLock and LockName and
// returns the canonical directory ("" for the cell root): the InvalidPath
// *topo.Error of CheckLockPath for a malformed or reserved dirPath, then
// the InvalidArgument *topo.Error of CheckValue when contents is larger
// than topo.MaxValueSize.
func CheckLock(dirPath, contents string) (string, error) {
	d, err := CheckLockPath(dirPath)
	if err != nil {
		return "", err
	}
	if err := CheckValue(d, []byte(contents)); err != nil {
		return "", err
	}
	return d, nil
}

// CheckLockWithTTL validates the arguments of LockWithTTL and returns the
// canonical directory: the errors of CheckLock, in its order, then an
// InvalidArgument *topo.Error for the directory when ttl is not positive.
// How a backend rounds a positive ttl (to whole seconds, to its store's
// minimum) is its own.
func CheckLockWithTTL(dirPath, contents string, ttl time.Duration) (string, error) {
	d, err := CheckLock(dirPath, contents)
	if err != nil {
		return "", err
	}
	if ttl <= 0 {
		return "", Wrap(topo.InvalidArgument, d, fmt.Errorf("lock TTL %v is not positive", ttl))
	}
	return d, nil
}

// ReservedFiles returns the PartialResult *topo.Error for prefix that List
// returns, wrapping a *topo.ReservedFilesError, when paths (canonical,
// sorted) are files at reserved paths that another tool wrote; it returns
// nil when paths is empty.
func ReservedFiles(prefix string, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	return Wrap(topo.PartialResult, prefix, &topo.ReservedFilesError{Paths: paths})
}
