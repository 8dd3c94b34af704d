package memorytopo

import (
	"strings"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// fastPath returns p without its leading "/" and true when p is in the
// common form that topo.CleanFilePath returns unchanged (but for that
// "/") and backendkit.CheckReserved accepts: printable ASCII, no empty,
// "." or ".." segment, no trailing "/", no segment "locks" or "Lock" and
// no first segment "elections". Anything else gets false: the callers
// then run topo's and backendkit's checks, so every result and error is
// theirs (path_test.go compares them).
func fastPath(p string) (string, bool) {
	c := strings.TrimPrefix(p, "/")
	if c == "" || len(c) > topo.MaxPathLength {
		return "", false
	}
	for rest, first := c, true; ; first = false {
		seg, more, found := strings.Cut(rest, "/")
		if seg == "" || seg == "." || seg == ".." || seg == locksDir || seg == "Lock" || (first && seg == electionsDir) {
			return "", false
		}
		for i := 0; i < len(seg); i++ {
			if seg[i] < 0x20 || seg[i] >= 0x7f {
				return "", false
			}
		}
		if !found {
			return c, true
		}
		rest = more
	}
}

// cleanFilePath is topo.CleanFilePath, through fastPath.
func cleanFilePath(p string) (string, error) {
	if c, ok := fastPath(p); ok {
		return c, nil
	}
	return topo.CleanFilePath(p)
}

// checkWrite is backendkit.CheckUpdate (for Create, with a nil version),
// through fastPath.
func checkWrite(filePath string, contents []byte, version topo.Version) (string, int64, error) {
	p, ok := fastPath(filePath)
	if !ok {
		return backendkit.CheckUpdate(filePath, contents, version)
	}
	if err := backendkit.CheckValue(p, contents); err != nil {
		return "", 0, err
	}
	return versionArg(p, version)
}

// checkDelete is backendkit.CheckDelete, through fastPath.
func checkDelete(filePath string, version topo.Version) (string, int64, error) {
	p, ok := fastPath(filePath)
	if !ok {
		return backendkit.CheckDelete(filePath, version)
	}
	return versionArg(p, version)
}

// versionArg returns p with the number of a caller's version for it
// (backendkit.AnyVersion for nil), or VersionNumber's error.
func versionArg(p string, version topo.Version) (string, int64, error) {
	if version == nil {
		return p, backendkit.AnyVersion, nil
	}
	n, err := backendkit.VersionNumber(p, version)
	if err != nil {
		return "", 0, err
	}
	return p, n, nil
}
