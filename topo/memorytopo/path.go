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
	c, ok, _ := cleanScan(p)
	return c, ok
}

// cleanScan is cleanFast that also reports, from the same pass, whether
// the path may be reserved (reservedFast's rule, on its own segments).
func cleanScan(p string) (c string, ok, reserved bool) {
	c = p
	if len(c) > 0 && c[0] == '/' {
		c = c[1:]
	}
	if len(c) == 0 || len(c) > topo.MaxPathLength {
		return "", false, false
	}
	seg, dots := 0, 0 // length of the current segment, and its dots
	for i := 0; i < len(c); i++ {
		switch b := c[i]; {
		case b > '/' && b < 0x7f: // letters, digits and most punctuation
			seg++
		case b == '/':
			if seg == 0 || (seg == dots && dots <= 2) {
				return "", false, false
			}
			if seg == 4 || seg == 5 || seg == 9 {
				reserved = reserved || reservedSeg(c[i-seg:i], i == seg)
			}
			seg, dots = 0, 0
		case b < 0x20 || b >= 0x7f:
			return "", false, false
		case b == '.':
			seg++
			dots++
		default:
			seg++
		}
	}
	if seg == 0 || (seg == dots && dots <= 2) {
		return "", false, false
	}
	if seg == 4 || seg == 5 || seg == 9 {
		reserved = reserved || reservedSeg(c[len(c)-seg:], len(c) == seg)
	}
	return c, true, reserved
}

// reservedSeg reports whether seg is a reserved segment ("locks", "Lock",
// or "elections" when first).
func reservedSeg(seg string, first bool) bool {
	return seg == "locks" || seg == "Lock" || (first && seg == "elections")
}

// checkWrite is backendkit.CheckUpdate (for Create, with a nil version)
// with a fast path: a path cleanScan accepts and finds not reserved needs
// only the value and version checks, in backendkit's order. Anything else
// goes to backendkit.CheckUpdate, so the result and every error are its
// own (TestCheckWriteMatchesBackendkit).
func checkWrite(filePath string, contents []byte, version topo.Version) (string, int64, error) {
	p, ok, reserved := cleanScan(filePath)
	if !ok || reserved {
		return backendkit.CheckUpdate(filePath, contents, version)
	}
	if err := backendkit.CheckValue(p, contents); err != nil {
		return "", 0, err
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

// clone returns a copy of b (nil for nil), the way callers' values are
// kept from the store and the store's from callers.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// checkDelete is backendkit.CheckDelete with checkWrite's fast path: a
// path cleanScan accepts and finds not reserved needs only the version
// check. Anything else goes to backendkit.CheckDelete, so the result and
// every error are its own (TestCheckDeleteMatchesBackendkit).
func checkDelete(filePath string, version topo.Version) (string, int64, error) {
	p, ok, reserved := cleanScan(filePath)
	if !ok || reserved {
		return backendkit.CheckDelete(filePath, version)
	}
	return versionArg(p, version)
}
