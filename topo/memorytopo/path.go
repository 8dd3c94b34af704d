package memorytopo

import (
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// cleanFilePath is topo.CleanFilePath with a fast path for the common
// case: a path of printable ASCII with no empty, "." or ".." segment and
// no trailing "/" is already canonical but for one leading "/", which is
// all topo.CleanFilePath would check and strip. Anything else goes to
// topo.CleanFilePath, so the result and every error are its own
// (TestCleanFilePathMatchesTopo).
func cleanFilePath(p string) (string, error) {
	if c, ok := cleanFast(p); ok {
		return c, nil
	}
	return topo.CleanFilePath(p)
}

// cleanFast returns p without its leading "/" and true when p is in the
// subset described at cleanFilePath; false otherwise.
func cleanFast(p string) (string, bool) {
	c := p
	if len(c) > 0 && c[0] == '/' {
		c = c[1:]
	}
	if len(c) == 0 || len(c) > topo.MaxPathLength {
		return "", false
	}
	seg, dots := 0, 0 // length of the current segment, and its dots
	for i := 0; i < len(c); i++ {
		switch b := c[i]; {
		case b == '/':
			if seg == 0 || (seg == dots && dots <= 2) {
				return "", false
			}
			seg, dots = 0, 0
		case b < 0x20 || b >= 0x7f:
			return "", false
		case b == '.':
			seg++
			dots++
		default:
			seg++
		}
	}
	if seg == 0 || (seg == dots && dots <= 2) {
		return "", false
	}
	return c, true
}

// checkWrite is backendkit.CheckUpdate (for Create, with a nil version)
// with a fast path: a path cleanFast accepts and reservedFast clears needs
// only the value and version checks, in backendkit's order. Anything else
// goes to backendkit.CheckUpdate, so the result and every error are its
// own (TestCheckWriteMatchesBackendkit).
func checkWrite(filePath string, contents []byte, version topo.Version) (string, int64, error) {
	p, ok := cleanFast(filePath)
	if !ok || reservedFast(p) {
		return backendkit.CheckUpdate(filePath, contents, version)
	}
	if err := backendkit.CheckValue(p, contents); err != nil {
		return "", 0, err
	}
	if version == nil {
		return p, backendkit.AnyVersion, nil
	}
	n, err := backendkit.VersionNumber(p, version)
	if err != nil {
		return "", 0, err
	}
	return p, n, nil
}

// reservedFast is topo.IsReserved for a canonical path, without building
// an iterator: a segment "locks" or "Lock", or "elections" first.
func reservedFast(p string) bool {
	start := 0
	for i := 0; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		switch seg := p[start:i]; seg {
		case "locks", "Lock":
			return true
		case "elections":
			if start == 0 {
				return true
			}
		}
		start = i + 1
	}
	return false
}
