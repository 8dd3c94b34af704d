package topo

import (
	"errors"
	"strconv"
)

// The reserved-name rule. Locks and elections live in the store next to
// files, in Vitess's layout: etcd and ZooKeeper keep a directory's lock
// entries under <dir>/locks/, Consul keeps a directory's lock in the key
// <dir>/Lock, and every backend keeps leader elections under the top-level
// elections/ directory. A file at one of those places would be taken for a
// lock or a candidate (or be overwritten, or deleted, by one), so every
// backend refuses the same paths, with the same InvalidPath *Error, before
// it touches its store. A tree that one backend accepts, every backend
// accepts, and copying it between backends never fails halfway.
//
// A canonical path is reserved when
//   - any of its segments is "locks" or "Lock", or
//   - its first segment is "elections".
//
// The rule applies to what a call writes or claims: the file paths of
// Create, Update and Delete, the directory of Lock, TryLock, LockWithTTL
// and LockName, and (without the first-segment part, since an election's
// name is already below elections/) the names of elections. Reads (Get,
// GetVersion, Watch, ListDir) and prefixes (List, WatchRecursive) are not
// refused, so that what other tools wrote can still be inspected.

// locksDirName is the name of the directory that holds a directory's lock
// entries on etcd and ZooKeeper (<dir>/locks/<entry>), and of the one that
// holds an election's candidates on etcd (elections/<name>/locks/<entry>).
// It is reserved at any depth.
const locksDirName = "locks"

// consulLockName is the name of the key that holds a directory's lock on
// Consul (<dir>/Lock). It is reserved at any depth, on every backend.
const consulLockName = "Lock"

// electionsDirName is the top-level directory under which every backend
// keeps its leader elections. It is reserved as the first segment of a path.
const electionsDirName = "elections"

// IsReserved reports whether the canonical path p (as returned by
// CleanFilePath or CleanDirPath) breaks the reserved-name rule: a segment
// "locks" or "Lock" anywhere, or "elections" as the first segment. The root
// ("") is not reserved. It is safe for concurrent use.
func IsReserved(p string) bool {
	// One pass over the bytes: every claim call and most file calls
	// check their path here.
	start := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		switch p[start:i] {
		case locksDirName, consulLockName:
			return true
		case electionsDirName:
			if start == 0 {
				return true
			}
		}
		start = i + 1
	}
	return false
}

// checkReserved returns an InvalidPath *Error for p (a canonical path)
// when IsReserved(p), naming the rule, and nil otherwise.
func checkReserved(p string) error {
	if !IsReserved(p) {
		return nil
	}
	return &Error{Code: InvalidPath, Path: p, Err: errReserved}
}

var errReserved = errors.New(`reserved name: a path must not contain a "locks" or "Lock" segment ` +
	`nor start with "elections" (those places hold locks and elections in the store)`)

// ReservedFilesError is the cause of the PartialResult *Error that List
// returns, together with every other matching file, when the store holds
// files at reserved paths that another tool wrote (see IsReserved): a
// backend never skips them silently, and never takes them for locks or
// candidates. Callers that copy or export a tree use it to name what they
// cannot carry over:
//
//	kvs, err := conn.List(ctx, prefix)
//	var rf *topo.ReservedFilesError
//	if errors.As(err, &rf) { /* kvs holds the rest; rf.Paths the others */ }
type ReservedFilesError struct {
	// Paths are the reserved files' canonical paths, sorted.
	Paths []string
}

// Error names how many reserved files there are and the first of them.
func (e *ReservedFilesError) Error() string {
	switch len(e.Paths) {
	case 0:
		return "no files at reserved paths"
	case 1:
		return "1 file at a reserved path, not listed: " + e.Paths[0]
	}
	return strconv.Itoa(len(e.Paths)) + " files at reserved paths, not listed, the first: " + e.Paths[0]
}
