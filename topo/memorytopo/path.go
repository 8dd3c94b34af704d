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
// through backendkit.CleanPlain.
func checkWrite(filePath string, contents []byte, version topo.Version) (string, int64, error) {
	p, ok := backendkit.CleanPlain(filePath)
	if !ok {
		return backendkit.CheckUpdate(filePath, contents, version)
	}
	if err := backendkit.CheckValue(p, contents); err != nil {
		return "", 0, err
	}
	return versionArg(p, version)
}

// checkDelete is backendkit.CheckDelete, through backendkit.CleanPlain.
func checkDelete(filePath string, version topo.Version) (string, int64, error) {
	p, ok := backendkit.CleanPlain(filePath)
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
