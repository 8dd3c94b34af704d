package consultopo

import (
	"context"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// StoreMeta returns what Consul keeps about the key of the file p: the
// key, its create, modify and lock indexes, flags and session ("" for
// none), read consistently; nil for the root and for no key (an implicit
// directory); InvalidPath for a bad p, else a read's errors. Safe for
// concurrent use; topo/inspect calls it.
func (c *Conn) StoreMeta(ctx context.Context, p string) ([]backendkit.MetaField, error) {
	d, err := topo.CleanDirPath(p)
	if err != nil || d == "" {
		return nil, err
	}
	key := c.key(d)
	pair, _, err := c.kv.Get(key, c.consistentOptions(ctx))
	if err != nil {
		return nil, c.convertError(ctx, err, d)
	}
	if pair == nil {
		return nil, nil
	}
	return []backendkit.MetaField{
		{Name: "key", Value: key},
		{Name: "create_index", Value: int64(pair.CreateIndex)},
		{Name: "modify_index", Value: int64(pair.ModifyIndex)},
		{Name: "lock_index", Value: int64(pair.LockIndex)},
		{Name: "flags", Value: pair.Flags}, // a uint64, as Consul keeps it
		{Name: "session", Value: pair.Session},
	}, nil
}
