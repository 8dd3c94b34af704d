package consultopo

import (
	"context"
	"sort"
	"strings"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// lockName is the key, under a locked directory, of its lock.
const lockName = "Lock"

// electionsDir is the directory, under the root, of the election keys.
const electionsDir = "elections"

// ListDir implements topo.Conn.ListDir with one KV keys query using "/" as
// separator. Keys directly under dirPath are TypeFile entries, deeper keys
// give TypeDirectory entries. With full set, the entries that may be lock
// or election keys (named Lock, or under elections/) are read to set
// Ephemeral on those held by a session. It returns NoNode when nothing is
// under dirPath, InvalidPath for a bad path, Timeout/Interrupted when ctx
// ends, Closed after Close and Unavailable when the agent cannot be reached.
func (c *Conn) ListDir(ctx context.Context, dirPath string, full bool) ([]topo.DirEntry, error) {
	if err := backendkit.CheckContext(ctx, dirPath); err != nil {
		return nil, err
	}
	dir, err := topo.CleanDirPath(dirPath)
	if err != nil {
		return nil, err
	}
	if err := c.begin(ctx, dir); err != nil {
		return nil, err
	}
	prefix := c.dirPrefix(dir)
	keys, _, err := c.kv.Keys(prefix, "/", c.queryOptions(ctx))
	if err != nil {
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
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	if !full {
		for i := range entries {
			entries[i].Type = 0
		}
		return entries, nil
	}
	inElections := dir == electionsDir || strings.HasPrefix(dir, electionsDir+"/")
	for i, e := range entries {
		if e.Type != topo.TypeFile || (e.Name != lockName && !inElections) {
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
