package consultopo

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// overwriteKeepingSession writes key with a plain PUT, as another tool
// would (no session parameter, no flags), and returns the pair as Consul
// then keeps it: Consul leaves the holder's session on the key.
func overwriteKeepingSession(t *testing.T, kv *api.KV, key, value, holder string) *api.KVPair {
	t.Helper()
	_, err := kv.Put(&api.KVPair{Key: key, Value: []byte(value)}, nil)
	require.NoError(t, err)
	pair, _, err := kv.Get(key, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.NotNil(t, pair)
	require.Equal(t, holder, pair.Session, "Consul keeps the holder's session on a plain PUT")
	return pair
}

// requireFreed asserts that key is no longer bound to a session and still
// holds what the other tool wrote, now marked as a lock key (the lock
// flags) that anyone may acquire.
func requireFreed(t *testing.T, kv *api.KV, key, value string) {
	t.Helper()
	pair, _, err := kv.Get(key, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.NotNil(t, pair, "the other tool's value was deleted")
	require.Empty(t, pair.Session, "the key is still bound to the lost holder's session")
	require.Equal(t, value, string(pair.Value), "the other tool's value was overwritten")
	require.Equal(t, uint64(api.LockFlagValue), pair.Flags)
}

// TestLockFreedAfterAnotherToolOverwroteItsKey: another tool overwrites a
// held lock's key with a plain PUT, which keeps the holder's session on
// it. The holder sees the lock lost (Done, Check, Unlock), and its Unlock
// frees the key, keeping the tool's value: a Lock through another Conn,
// a Vitess-style api.Lock and a Lock through the holder's own Conn (whose
// session is the one the key was bound to) then acquire within seconds,
// not once the holder's Conn closes.
func TestLockFreedAfterAnotherToolOverwroteItsKey(t *testing.T) {
	root := testRoot(t)
	c1, c2 := newTestConn(t, root), newTestConn(t, root)
	kv := rawClient(t).KV()
	ctx := t.Context()
	key := root + "/d/Lock"
	_, err := c1.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)

	// overwrite takes the lock on c1, has another tool overwrite its key,
	// and returns once the holder has seen the loss and unlocked.
	overwrite := func(value string) {
		t.Helper()
		l, err := c1.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		done := l.Done()
		pair, _, err := kv.Get(key, &api.QueryOptions{RequireConsistent: true})
		require.NoError(t, err)
		overwriteKeepingSession(t, kv, key, value, pair.Session)
		select {
		case <-done:
		case <-time.After(waitFor):
			t.Fatal("Done did not close after the key was overwritten")
		}
		requireCode(t, l.Check(ctx), topo.LockLost)
		requireCode(t, l.Unlock(ctx), topo.LockLost)
		requireFreed(t, kv, key, value)
	}
	// lockWithin locks d through c within a few seconds.
	lockWithin := func(c *Conn, who string) {
		t.Helper()
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, err := c.Lock(lctx, "d", who)
		require.NoError(t, err, "%s: Lock of a lock nobody holds", who)
		require.NoError(t, l.Check(ctx))
		require.NoError(t, l.Unlock(ctx))
	}

	overwrite("other tool 1")
	lockWithin(c2, "another Conn")

	overwrite("other tool 2")
	requireVitessLockable(t, key)

	overwrite("other tool 3")
	lockWithin(c1, "the holder's Conn")
}

// TestLeadershipFreedAfterAnotherToolOverwroteItsKey: another tool
// overwrites the election key of a leader with a plain PUT, which keeps
// the leader's session on it. The leadership context ends; the same
// participant campaigning again (without Resign) leads again within
// seconds, its lost term's key freed first; after a second overwrite,
// Stop frees the key (with the leader's value key), keeping the tool's
// value, and another candidate leads within seconds.
func TestLeadershipFreedAfterAnotherToolOverwroteItsKey(t *testing.T) {
	root := testRoot(t)
	c1, c2 := newTestConn(t, root), newTestConn(t, root)
	kv := rawClient(t).KV()
	key := root + "/elections/e"
	p1, err := c1.NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	defer p1.Stop()

	// campaign leads through p within a few seconds.
	campaign := func(p topo.LeaderParticipation, value string) context.Context {
		t.Helper()
		wctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		lctx, err := p.Campaign(wctx, []byte(value))
		require.NoError(t, err, "Campaign of an election nobody leads")
		require.NoError(t, lctx.Err())
		return lctx
	}
	// overwrite has another tool overwrite the election key and waits for
	// the term lctx to end; it returns the leader's session.
	overwrite := func(lctx context.Context, value string) string {
		t.Helper()
		pair, _, err := kv.Get(key, &api.QueryOptions{RequireConsistent: true})
		require.NoError(t, err)
		overwriteKeepingSession(t, kv, key, value, pair.Session)
		select {
		case <-lctx.Done():
		case <-time.After(waitFor):
			t.Fatal("the leadership context was not cancelled after the key was overwritten")
		}
		return pair.Session
	}

	overwrite(campaign(p1, "v1"), "other tool 1")
	lctx := campaign(p1, "v1 again")
	waitLeader(t, p1, "one", "v1 again")

	sess := overwrite(lctx, "other tool 2")
	p1.Stop()
	requireFreed(t, kv, key, "other tool 2")
	value, _, err := kv.Get(valueKey(key, sess), &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.Nil(t, value, "the lost leader's value key is left")

	p2, err := c2.NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	defer p2.Stop()
	campaign(p2, "v2")
	waitLeader(t, p2, "two", "v2")
}
