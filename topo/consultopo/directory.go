package consultopo

import (
	"context"
	"slices"
	"strings"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// The layout's names (reserved by topo.IsReserved): a directory's lock
// key, the election keys' directory, and the directory, beside a lock key
// or under an election key, of its queue and leaders' values.
const (
	lockName     = backendkit.ConsulLockName
	electionsDir = backendkit.ElectionsDirName
	valuesDir    = backendkit.LocksDirName
)

// ListDir implements topo.Conn.ListDir with one keys query using "/" as
// separator: keys directly under dirPath are files, deeper ones give
// directories; a name that is both is one directory. With full, possible
// lock and election keys (Lock, under elections/ or a locks directory)
// are read to mark those a session holds Ephemeral, and, as on Vitess,
// the elections directory and every directory under it are Ephemeral, as
// is a locks directory (as on etcd). NoNode when nothing is under dirPath;
// PermissionDenied when the ACL token may not read every key under it
// (Consul would leave those out), as for List; other errors as for Get.
func (c *Conn) ListDir(ctx context.Context, dirPath string, full bool) ([]topo.DirEntry, error) {
	dir, err := backendkit.Begin(ctx, dirPath, topo.CleanDirPath, c.isClosed)
	if err != nil {
		return nil, err
	}
	prefix := c.dirPrefix(dir)
	keys, meta, err := c.kv.Keys(prefix, "/", c.queryOptions(ctx))
	if err := unfiltered(meta, err); err != nil {
		return nil, c.convertError(ctx, err, dir)
	}
	entries := make([]topo.DirEntry, 0, len(keys))
	for _, k := range keys {
		name, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		typ := topo.TypeFile
		if n, isDir := strings.CutSuffix(name, "/"); isDir {
			name, typ = n, topo.TypeDirectory
		}
		if name == "" || name == "." || name == ".." {
			continue
		}
		entries = append(entries, topo.DirEntry{Name: name, Type: typ})
	}
	if len(entries) == 0 {
		return nil, topo.NewError(topo.NoNode, dir)
	}
	entries = backendkit.MergeEntries(entries)
	inElections := dir == electionsDir || strings.HasPrefix(dir, electionsDir+"/")
	inLocks := slices.Contains(strings.Split(dir, "/"), valuesDir)
	if !full {
		for i := range entries {
			entries[i].Type = 0
		}
		return entries, nil
	}
	for i, e := range entries {
		switch {
		case e.Type == topo.TypeDirectory && (dir == "" && e.Name == electionsDir || inElections || e.Name == valuesDir || inLocks):
			entries[i].Ephemeral = true
			continue
		case e.Type != topo.TypeFile || (e.Name != lockName && !inElections && !inLocks):
			continue
		}
		pair, _, err := c.kv.Get(prefix+e.Name, c.queryOptions(ctx))
		if err != nil {
			return nil, c.convertError(ctx, err, dir)
		}
		entries[i].Ephemeral = pair != nil && pair.Session != ""
	}
	return entries, nil
}
