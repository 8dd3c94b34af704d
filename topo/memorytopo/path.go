package memorytopo

import (
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// cleanFilePath is topo.CleanFilePath, through backendkit.CleanPlain.
func cleanFilePath(p string) (string, error) {
	if c, ok := backendkit.CleanPlain(p); ok {
		return c, nil
	}
	return topo.CleanFilePath(p)
}

// checkWrite is backendkit.CheckUpdate (for Create, with a nil version),
// or CheckDelete for a delete (del, contents nil), through
// backendkit.CleanPlain.
func checkWrite(del bool, filePath string, contents []byte, version topo.Version) (string, int64, error) {
	p, ok := backendkit.CleanPlain(filePath)
	switch {
	case !ok && del:
		return backendkit.CheckDelete(filePath, version)
	case !ok:
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
