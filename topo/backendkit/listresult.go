package backendkit

import "github.com/topokit/topokit/topo"

// ListResult is what a backend's List returns for prefix once it has
// collected the files it lists (files, sorted by path) and the paths of
// the files at reserved paths that another tool wrote (reserved, sorted):
// NoNode when both are empty; files with the PartialResult error of
// ReservedFiles when reserved is not empty; files and nil otherwise.
// zk2topo, etcd2topo and consultopo end their List with it.
func ListResult(prefix string, files []topo.KVInfo, reserved []string) ([]topo.KVInfo, error) {
	if len(files) == 0 && len(reserved) == 0 {
		return nil, topo.NewError(topo.NoNode, prefix)
	}
	return files, ReservedFiles(prefix, reserved)
}
