package consultopo

import (
	"context"
	"slices"
	"strings"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// The names of the layout (backendkit's, reserved by topo.IsReserved): the
// key of a directory's lock, the directory of the election keys, and the
// directory, beside a lock key or under an election key, of its queue
// (locks/queue/) and of the leaders' values (elections/<name>/locks/<session
// id>: no election key can be there, CheckElection refusing names with a
// locks segment, nor a file; Vitess reads only the election key itself).
const (
	lockName     = backendkit.ConsulLockName
	electionsDir = backendkit.ElectionsDirName
	valuesDir    = backendkit.LocksDirName
)

// ListDir implements topo.Conn.ListDir with one KV keys query using "/" as
// separator. Keys directly under dirPath are TypeFile entries, deeper keys
// give TypeDirectory entries. With full set, the entries that may be lock
// or election keys (named Lock, or under elections/) are read to set
// Ephemeral on those held by a session, and, as Vitess's backends do, the
// top-level elections directory and every directory under it (the
// elections' value keys, nested elections) are marked Ephemeral; under
// elections/ a name that is both an election key and a directory is one
// TypeDirectory entry. A lock's queue, the directory locks (see queue.go),
// is a TypeDirectory entry, Ephemeral when full, as etcd's locks
// directories are; the keys under it are Ephemeral files. It returns NoNode when nothing is
// under dirPath, InvalidPath for a bad path, Timeout/Interrupted when ctx
// ends, Closed after Close and Unavailable when the agent cannot be reached.
func (c *Conn) ListDir(ctx context.Context, dirPath string, full bool) ([]topo.DirEntry, error) {
	dir, err := backendkit.Begin(ctx, dirPath, topo.CleanDirPath, c.isClosed)
	if err != nil {
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
	// A name that is both a file and a directory is one entry, a
	// directory, as etcd2topo reports it.
	entries = backendkit.MergeEntries(entries)
	inElections := dir == electionsDir || strings.HasPrefix(dir, electionsDir+"/")
	// Under a locks segment (a queue, or an election's values) every key
	// is held by a session.
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
			entries[i].Ephemeral = true // see the doc above
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
