package consultopo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// TestStaleUnlockAcrossIndexReuse: a dev agent restarts empty while a
// topokit Conn holding a lock is cut off from it, and another client (a
// Vitess process's api.Lock, here a raw client doing the same) takes the
// lock key with its own session at the very index topokit's acquire had
// (the new agent's indexes start over). When topokit's Conn gets through
// again, its Unlock says LockLost and the removal of its entry must leave
// the other holder's key alone: the key is no longer held by topokit's
// session, whatever its index. (The delete checked the index alone, so it
// deleted the other holder's key: a third contender could take the lock
// while the other still held it, as its Check and api.Lock's monitor saw
// it.) Aligning the indexes needs the agent to write nothing of its own
// meanwhile; an attempt where it did is tried again.
func TestStaleUnlockAcrossIndexReuse(t *testing.T) {
	acrossIndexReuse(t, func(t *testing.T, a *consultest.Agent, n int) bool {
		return staleAcrossIndexReuse(t, a, n, func(ctx context.Context, c *Conn, ld topo.LockDescriptor) error { return ld.Unlock(ctx) })
	})
}

// TestStaleGuardAcrossIndexReuse is TestStaleUnlockAcrossIndexReuse with
// a write guarded on the lock (IfHeld) in place of the Unlock: it must be
// refused with LockLost, not applied while another holds the lock.
func TestStaleGuardAcrossIndexReuse(t *testing.T) {
	acrossIndexReuse(t, func(t *testing.T, a *consultest.Agent, n int) bool {
		return staleAcrossIndexReuse(t, a, n, func(ctx context.Context, c *Conn, ld topo.LockDescriptor) error {
			_, err := c.Txn(ctx, topo.IfHeld(ld), topo.UpdateOp("d/f", []byte("stale"), nil))
			return err
		})
	})
}

// staleAcrossIndexReuse runs one attempt: act is the stale holder's
// request once it gets through again.
func staleAcrossIndexReuse(t *testing.T, a *consultest.Agent, attempt int, act func(context.Context, *Conn, topo.LockDescriptor) error) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := fmt.Sprintf("stale%d", attempt)
	px, err := faultproxy.New(a.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	opts := testOptions()
	opts.Address = px.Addr()
	c, err := NewConn(opts, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	// Past the agent's start-up writes, which a restart repeats.
	for i := range 20 {
		_, err := c.Create(ctx, fmt.Sprintf("pad/%d", i), []byte("x"))
		require.NoError(t, err)
	}
	_, err = c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	ld, err := c.Lock(ctx, "d", "topokit")
	require.NoError(t, err)
	target := uint64(ld.Token())

	px.Blackhole()
	a.Restart(t)
	raw, err := api.NewClient(&api.Config{Address: a.Addr()})
	require.NoError(t, err)
	sid, _, err := raw.Session().Create(&api.SessionEntry{TTL: "60s", LockDelay: time.Millisecond, Behavior: api.SessionBehaviorRelease}, nil)
	require.NoError(t, err)
	// The directory's file, lost with the agent's state, as its owner
	// writes it again.
	_, err = raw.KV().Put(&api.KVPair{Key: root + "/d/f", Value: []byte("x")}, nil)
	require.NoError(t, err)
	var last uint64
	for i := 0; last < target-1; i++ {
		_, err := raw.KV().Put(&api.KVPair{Key: fmt.Sprintf("%s/pad/%d", root, i), Value: []byte("x")}, nil)
		require.NoError(t, err)
		p, _, err := raw.KV().Get(fmt.Sprintf("%s/pad/%d", root, i), nil)
		require.NoError(t, err)
		last = p.ModifyIndex
	}
	if last != target-1 {
		t.Logf("attempt %d: the agent wrote at %d", attempt, target-1)
		return false
	}
	key := root + "/d/Lock"
	ok, _, err := raw.KV().Acquire(&api.KVPair{Key: key, Value: []byte("other"), Flags: api.LockFlagValue, Session: sid}, nil)
	require.NoError(t, err)
	require.True(t, ok)
	p, _, err := raw.KV().Get(key, nil)
	require.NoError(t, err)
	if p.ModifyIndex != target {
		t.Logf("attempt %d: the agent wrote at %d", attempt, target)
		return false
	}
	px.Heal()

	unlockErr := act(ctx, c, ld)
	p, _, err = raw.KV().Get(key, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.NotNil(t, p, "topokit's stale request (%v) deleted the other holder's lock key", unlockErr)
	require.Equal(t, sid, p.Session, "the other holder's lock key lost its session")
	requireCode(t, unlockErr, topo.LockLost)
	f, _, err := raw.KV().Get(root+"/d/f", &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.Equal(t, "x", string(f.Value), "a write guarded on the stale lock was applied")
	_, err = c.TryLock(ctx, "d", "third")
	requireCode(t, err, topo.NodeExists)
	return true
}
