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
