package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/connect"
	"github.com/topokit/topokit/topo/inspect"
)

// The example copies a subtree between two memory stores and names the
// holder of a lock in the source.
func TestCopySubtree(t *testing.T) {
	ctx := t.Context()
	src := Store{"memory", "subtreecopy-src", "/global"}
	dst := Store{"memory", "subtreecopy-dst", "/global"}
	var settings connect.Settings
	from, err := settings.Open(ctx, src.Impl, src.Addr, src.Root)
	require.NoError(t, err)
	defer from.Close()
	for _, p := range []string{"keyspaces/commerce/Keyspace", "keyspaces/commerce/shards/0/Shard", "cells/zone1/CellInfo"} {
		_, err := from.GlobalCell().Create(ctx, p, []byte("value of "+p))
		require.NoError(t, err)
	}
	ld, err := from.GlobalCell().Lock(ctx, "keyspaces/commerce", "resharding job 7")
	require.NoError(t, err)
	defer func() { _ = ld.Unlock(ctx) }()
	ld2, err := from.GlobalCell().Lock(ctx, "keyspaces/commerce/shards/0", "reparent of commerce/0")
	require.NoError(t, err)
	defer func() { _ = ld2.Unlock(ctx) }()
	ld3, err := from.GlobalCell().Lock(ctx, "cells/zone1", "outside the subtree")
	require.NoError(t, err)
	defer func() { _ = ld3.Unlock(ctx) }()

	res, err := copySubtree(ctx, settings, src, dst, "/keyspaces", "/keyspaces/commerce", false)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Created)
	assert.True(t, res.Held)
	assert.Equal(t, "resharding job 7", res.Holder)
	var held []inspect.Lock
	for _, l := range res.Locks {
		held = append(held, inspect.Lock{Dir: l.Dir, Holder: l.Holder})
	}
	assert.Equal(t, []inspect.Lock{
		{Dir: "keyspaces/commerce", Holder: "resharding job 7"},
		{Dir: "keyspaces/commerce/shards/0", Holder: "reparent of commerce/0"},
	}, held, "every lock held in the subtree, with its holder; none outside it")
	assert.Empty(t, res.Skipped, "lock entries are no files to copy")

	to, err := settings.Open(ctx, dst.Impl, dst.Addr, dst.Root)
	require.NoError(t, err)
	defer to.Close()
	b, _, err := to.GlobalCell().Get(ctx, "keyspaces/commerce/shards/0/Shard")
	require.NoError(t, err)
	assert.Equal(t, "value of keyspaces/commerce/shards/0/Shard", string(b))
	_, _, err = to.GlobalCell().Get(ctx, "cells/zone1/CellInfo")
	assert.True(t, topo.IsErrType(err, topo.NoNode), "only the subtree is copied: %v", err)

	res, err = copySubtree(ctx, settings, src, dst, "/keyspaces", "", false)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Identical, "a second run has nothing to write")
	assert.Zero(t, res.Created)

	// A lock nobody holds is reported as not held (it printed
	// `held by ""`, as for a holder that gave no description).
	require.NoError(t, ld.Unlock(ctx))
	res, err = copySubtree(ctx, settings, src, dst, "/keyspaces", "/keyspaces/commerce", false)
	require.NoError(t, err)
	assert.False(t, res.Held)
	var out strings.Builder
	report(&out, res, "/keyspaces/commerce")
	assert.Contains(t, out.String(), "lock on /keyspaces/commerce: not held\n")
	assert.NotContains(t, out.String(), "lock on /keyspaces/commerce: held")
}

func TestParseStore(t *testing.T) {
	s, err := parseStore("zk2,127.0.0.1:2181,127.0.0.1:2182,/vitess")
	require.NoError(t, err)
	assert.Equal(t, Store{"zk2", "127.0.0.1:2181,127.0.0.1:2182", "/vitess"}, s)
	_, err = parseStore("etcd2")
	assert.Error(t, err)
}
