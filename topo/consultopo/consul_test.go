package consultopo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/consultopo/consultest"
)

const waitFor, tick = 30 * time.Second, 10 * time.Millisecond

// TestLayout checks the keys a Vitess process expects: files at
// <root>/<path>, locks at <root>/<dir>/Lock held by a session with the api
// package's lock flags, elections at <root>/elections/<name> holding the
// leader's id; and that Unlock and Stop leave no key behind.
func TestLayout(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	kv := rawClient(t).KV()
	ctx := t.Context()

	v, err := c.Create(ctx, "keyspaces/ks/Keyspace", []byte("ks"))
	require.NoError(t, err)
	pair, _, err := kv.Get(root+"/keyspaces/ks/Keyspace", nil)
	require.NoError(t, err)
	require.NotNil(t, pair)
	require.Equal(t, "ks", string(pair.Value))
	require.Equal(t, topo.NumericVersion(pair.ModifyIndex), v, "the version is the ModifyIndex")

	l, err := c.Lock(ctx, "keyspaces/ks", "holder description")
	require.NoError(t, err)
	lock, _, err := kv.Get(root+"/keyspaces/ks/Lock", nil)
	require.NoError(t, err)
	require.NotNil(t, lock)
	require.Equal(t, "holder description", string(lock.Value))
	require.Equal(t, uint64(api.LockFlagValue), lock.Flags)
	require.Contains(t, c.sessionIDs(), lock.Session)

	entries, err := c.ListDir(ctx, "keyspaces/ks", true)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{
		{Name: "Keyspace", Type: topo.TypeFile},
		{Name: "Lock", Type: topo.TypeFile, Ephemeral: true},
	}, entries)
	files, err := c.List(ctx, "keyspaces/")
	require.NoError(t, err)
	require.Len(t, files, 1, "List leaves the lock out")

	require.NoError(t, l.Unlock(ctx))
	lock, _, err = kv.Get(root+"/keyspaces/ks/Lock", nil)
	require.NoError(t, err)
	require.Nil(t, lock, "Unlock deletes the lock key")

	p, err := c.NewLeaderParticipation("vtctld", "host:1")
	require.NoError(t, err)
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	elec, _, err := kv.Get(root+"/elections/vtctld", nil)
	require.NoError(t, err)
	require.NotNil(t, elec)
	require.Equal(t, "host:1", string(elec.Value))
	require.NotEmpty(t, elec.Session)
	entries, err = c.ListDir(ctx, "elections", true)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "vtctld", Type: topo.TypeFile, Ephemeral: true}}, entries)
	p.Stop()
	elec, _, err = kv.Get(root+"/elections/vtctld", nil)
	require.NoError(t, err)
	require.Nil(t, elec, "Stop deletes the election key")
}

// TestSessionDestroyedUnderLock destroys the session under a held lock: Check
// reports LockLost, and a client using the api package's Lock (as Vitess
// does) takes the lock.
func TestSessionDestroyedUnderLock(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	raw := rawClient(t)
	ctx := t.Context()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "topokit")
	require.NoError(t, err)

	other, err := raw.LockOpts(&api.LockOptions{Key: root + "/d/Lock", Value: []byte("api.Lock"), SessionTTL: "10s"})
	require.NoError(t, err)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	acquired := make(chan error, 1)
	go func() {
		lost, err := other.Lock(stop)
		if err == nil && lost == nil {
			err = context.Canceled
		}
		acquired <- err
	}()

	for _, id := range c.sessionIDs() {
		_, err := raw.Session().Destroy(id, nil)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return topo.IsErrType(l.Check(ctx), topo.LockLost) }, waitFor, tick)
	select {
	case err := <-acquired:
		require.NoError(t, err, "api.Lock after the topokit holder's session was destroyed")
	case <-time.After(waitFor):
		t.Fatal("api.Lock did not get the lock")
	}
	pair, _, err := raw.KV().Get(root+"/d/Lock", nil)
	require.NoError(t, err)
	require.Equal(t, "api.Lock", string(pair.Value))

	requireCode(t, l.Unlock(ctx), topo.LockLost)
	_, err = c.TryLock(ctx, "d", "again")
	requireCode(t, err, topo.NodeExists)
	require.NoError(t, other.Unlock())
	l2, err := c.Lock(ctx, "d", "again")
	require.NoError(t, err, "a new lock after the session loss uses a new session")
	require.NoError(t, l2.Check(ctx))
	require.NoError(t, l2.Unlock(ctx))
}

// TestApiLockHolderBlocksLock: a lock held through the api package's Lock
// blocks topokit's Lock and fails TryLock, until released.
func TestApiLockHolderBlocksLock(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	raw := rawClient(t)
	ctx := t.Context()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)

	held, err := raw.LockOpts(&api.LockOptions{Key: root + "/d/Lock", Value: []byte("vitess"), SessionTTL: "10s"})
	require.NoError(t, err)
	_, err = held.Lock(nil)
	require.NoError(t, err)

	_, err = c.TryLock(ctx, "d", "topokit")
	requireCode(t, err, topo.NodeExists)
	got := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, "d", "topokit")
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Lock returned %v while api.Lock holds the lock", err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, held.Unlock())
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(waitFor):
		t.Fatal("Lock did not get the lock released by api.Lock")
	}
}

// TestSessionDestroyedUnderLeader destroys the leader's session: its
// leadership context is cancelled and the other participant leads.
func TestSessionDestroyedUnderLeader(t *testing.T) {
	root := testRoot(t)
	c1, c2 := newTestConn(t, root), newTestConn(t, root)
	raw := rawClient(t)
	ctx := t.Context()

	p1, err := c1.NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	defer p1.Stop()
	p2, err := c2.NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	defer p2.Stop()
	lctx, err := p1.WaitForLeadership()
	require.NoError(t, err)
	leaders, err := p2.WaitForNewLeader(ctx)
	require.NoError(t, err)
	require.Equal(t, "one", <-leaders)
	second := make(chan context.Context, 1)
	go func() {
		l, err := p2.WaitForLeadership()
		if err == nil {
			second <- l
		}
	}()

	for _, id := range c1.sessionIDs() {
		_, err := raw.Session().Destroy(id, nil)
		require.NoError(t, err)
	}
	select {
	case <-lctx.Done():
	case <-time.After(waitFor):
		t.Fatal("leadership context not cancelled after the session was destroyed")
	}
	select {
	case l2 := <-second:
		require.NoError(t, l2.Err())
	case <-time.After(waitFor):
		t.Fatal("the other participant did not take over")
	}
	require.Equal(t, "two", <-leaders)
	id, err := p1.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "two", id)
}

// TestCheckSeesKeyDeleted: deleting the lock key behind the holder's back
// makes Check report LockLost, and frees the lock for others.
func TestCheckSeesKeyDeleted(t *testing.T) {
	root := testRoot(t)
	c1, c2 := newTestConn(t, root), newTestConn(t, root)
	ctx := t.Context()
	_, err := c1.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := c1.Lock(ctx, "d", "x")
	require.NoError(t, err)
	_, err = rawClient(t).KV().Delete(root+"/d/Lock", nil)
	require.NoError(t, err)
	requireCode(t, l.Check(ctx), topo.LockLost)
	l2, err := c2.TryLock(ctx, "d", "y")
	require.NoError(t, err)
	requireCode(t, l.Unlock(ctx), topo.LockLost)
	require.NoError(t, l2.Check(ctx), "the old holder's Unlock must not release the new holder's lock")
	require.NoError(t, l2.Unlock(ctx))
}

// TestLockSessions: default-TTL locks share the Conn's session; LockWithTTL
// with another TTL and LockName get sessions of their own (with the
// rounded TTL and the default lock-delay), destroyed by Unlock.
func TestLockSessions(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	raw := rawClient(t)
	ctx := t.Context()
	for _, d := range []string{"a", "b", "c"} {
		_, err := c.Create(ctx, d+"/f", []byte("x"))
		require.NoError(t, err)
	}
	la, err := c.Lock(ctx, "a", "x")
	require.NoError(t, err)
	lb, err := c.LockWithTTL(ctx, "b", "x", DefaultSessionTTL)
	require.NoError(t, err)
	require.Len(t, c.sessionIDs(), 1, "default-TTL locks share one session")
	shared := c.sessionIDs()[0]
	info, _, err := raw.Session().Info(shared, nil)
	require.NoError(t, err)
	require.Equal(t, "15s", info.TTL)
	require.Equal(t, DefaultLockDelay, info.LockDelay)
	require.Equal(t, api.SessionBehaviorDelete, info.Behavior)

	lc, err := c.LockWithTTL(ctx, "c", "x", 3*time.Second)
	require.NoError(t, err)
	ln, err := c.LockName(ctx, "no/such/dir", "x")
	require.NoError(t, err)
	ids := c.sessionIDs()
	require.Len(t, ids, 3)
	ttls := map[string]bool{}
	for _, id := range ids {
		info, _, err := raw.Session().Info(id, nil)
		require.NoError(t, err)
		ttls[info.TTL] = true
	}
	require.Equal(t, map[string]bool{"15s": true, "10s": true, "86400s": true}, ttls,
		"LockWithTTL rounds up to 10 s; LockName uses 24 h")

	require.NoError(t, lc.Unlock(ctx))
	require.NoError(t, ln.Unlock(ctx))
	require.Equal(t, []string{shared}, c.sessionIDs(), "Unlock destroys a lock's own session")
	require.NoError(t, la.Unlock(ctx))
	require.NoError(t, lb.Unlock(ctx))
	require.Equal(t, []string{shared}, c.sessionIDs(), "the shared session outlives its locks")

	c.Close()
	info, _, err = raw.Session().Info(shared, nil)
	require.NoError(t, err)
	require.Nil(t, info, "Close destroys the Conn's sessions")
}

// TestAgentRestartDuringWatch restarts a dev agent (which comes back empty)
// under open watches: Watch ends with NoNode, WatchRecursive reports the
// delete and keeps going, held locks are lost, and new calls work. The
// watches' blocking queries wait far longer than the test does: a watch
// must see the restart when the agent answers again, not at the end of a
// query waiting for an index the new agent has not reached.
func TestAgentRestartDuringWatch(t *testing.T) {
	a := consultest.StartAgent(t)
	opts := Options{Address: a.Addr(), WatchPollDuration: time.Hour}
	c, err := NewConn(opts, "restart")
	require.NoError(t, err)
	defer c.Close()
	ctx := t.Context()
	_, err = c.Create(ctx, "w/f", []byte("before"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "w", "x")
	require.NoError(t, err)
	cur, changes, err := c.Watch(ctx, "w/f")
	require.NoError(t, err)
	require.Equal(t, "before", string(cur.Contents))
	initial, events, err := c.WatchRecursive(ctx, "w/")
	require.NoError(t, err)
	require.Len(t, initial, 1)

	a.Restart(t)

	select {
	case wd, ok := <-changes:
		require.True(t, ok)
		requireCode(t, wd.Err, topo.NoNode)
		_, ok = <-changes
		require.False(t, ok, "the watch channel closes after the NoNode event")
	case <-time.After(waitFor):
		t.Fatal("the watch did not end after the agent restart")
	}
	select {
	case ev := <-events:
		require.Equal(t, "w/f", ev.Path)
		requireCode(t, ev.Err, topo.NoNode)
	case <-time.After(waitFor):
		t.Fatal("the recursive watch did not report the lost file")
	}
	require.Eventually(t, func() bool { return topo.IsErrType(l.Check(ctx), topo.LockLost) }, waitFor, tick)

	_, err = c.Create(ctx, "w/f", []byte("after"))
	require.NoError(t, err)
	select {
	case ev := <-events:
		require.Equal(t, "w/f", ev.Path)
		require.NoError(t, ev.Err)
		require.Equal(t, "after", string(ev.Contents))
	case <-time.After(waitFor):
		t.Fatal("the recursive watch did not resume")
	}
	cur, changes, err = c.Watch(ctx, "w/f")
	require.NoError(t, err, "a new Watch after the restart")
	require.Equal(t, "after", string(cur.Contents))
	_, err = c.Update(ctx, "w/f", []byte("later"), nil)
	require.NoError(t, err)
	wd := <-changes
	require.NoError(t, wd.Err)
	require.Equal(t, "later", string(wd.Contents))
	l2, err := c.Lock(ctx, "w", "x")
	require.NoError(t, err, "a new Lock after the restart")
	require.NoError(t, l2.Unlock(ctx))
}

// TestShortOutageIsNotLoss kills a persistent agent for less than the
// session TTL: held locks stay held (during the outage Check cannot prove
// it, so it says Unavailable, never nil nor LockLost; afterwards nil), the
// watch resumes, and Unlock works once the agent is back.
func TestShortOutageIsNotLoss(t *testing.T) {
	a := consultest.StartAgentWithOptions(t, consultest.AgentOptions{Persistent: true})
	c, err := NewConn(Options{Address: a.Addr(), WatchPollDuration: time.Second}, "outage")
	require.NoError(t, err)
	defer c.Close()
	ctx := t.Context()
	_, err = c.Create(ctx, "d/f", []byte("v1"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	_, changes, err := c.Watch(ctx, "d/f")
	require.NoError(t, err)

	a.Kill()
	requireCode(t, l.Check(ctx), topo.Unavailable)
	require.NoError(t, a.Start())

	require.NoError(t, l.Check(ctx), "Check after the agent came back")
	_, err = c.Update(ctx, "d/f", []byte("v2"), nil)
	require.NoError(t, err)
	select {
	case wd := <-changes:
		require.NoError(t, wd.Err)
		require.Equal(t, "v2", string(wd.Contents))
	case <-time.After(waitFor):
		t.Fatal("the watch did not resume after the outage")
	}
	require.NoError(t, l.Unlock(ctx))
}

func TestOptions(t *testing.T) {
	o := Options{}.normalized()
	require.Equal(t, DefaultSessionTTL, o.SessionTTL)
	require.Equal(t, DefaultLockDelay, o.LockDelay)
	require.Equal(t, DefaultWatchPollDuration, o.WatchPollDuration)
	o = Options{SessionTTL: time.Second, LockDelay: -1}.normalized()
	require.Equal(t, MinSessionTTL, o.SessionTTL)
	require.Equal(t, time.Duration(0), o.LockDelay)
	require.Equal(t, 21*time.Second, Options{SessionTTL: 20100 * time.Millisecond}.normalized().SessionTTL)
	require.Equal(t, MaxSessionTTL, Options{SessionTTL: 100 * time.Hour}.normalized().SessionTTL)
	require.Equal(t, DefaultSessionTTL, Options{SessionTTL: -time.Second}.normalized().SessionTTL, "negative: the default, as on the other backends")
	o = Options{SessionTTL: 1500 * time.Millisecond, MinSessionTTL: 300 * time.Millisecond}.normalized()
	require.Equal(t, time.Second, o.MinSessionTTL, "rounded up to whole seconds, at least one")
	require.Equal(t, 2*time.Second, o.SessionTTL)
	require.Equal(t, time.Second, o.clampTTL(time.Millisecond))

	_, err := NewConn(Options{}, "a//b")
	requireCode(t, err, topo.InvalidPath)
	_, err = NewConn(Options{TokenFile: filepath.Join(t.TempDir(), "missing")}, "r")
	requireCode(t, err, topo.InvalidArgument)
	big := filepath.Join(t.TempDir(), "big")
	require.NoError(t, os.WriteFile(big, []byte(strings.Repeat("x", backendkit.MaxSecretFileSize+1)), 0o600))
	_, err = NewConn(Options{TokenFile: big}, "r")
	requireCode(t, err, topo.InvalidArgument) // not a token: read bounded, refused

	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("secret-token\n"), 0o600))
	root := testRoot(t)
	c, err := NewConn(Options{Address: agent.Addr() + ",127.0.0.1:1", TokenFile: tokenFile}, "/"+root+"/")
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, root, c.root)
	// The dev agent has ACLs off, so any token is accepted.
	_, err = c.Create(t.Context(), "f", []byte("x"))
	require.NoError(t, err)

	_, err = NewConn(Options{CAFile: filepath.Join(t.TempDir(), "missing-ca.pem")}, "r")
	requireCode(t, err, topo.InvalidArgument)
}

// TestZeroLockDelay: with LockDelay < 0 sessions are created without
// lock-delay (the api package would send none and get Consul's 15 s).
func TestZeroLockDelay(t *testing.T) {
	c, err := NewConn(Options{Address: agent.Addr(), LockDelay: -1}, testRoot(t))
	require.NoError(t, err)
	defer c.Close()
	ctx := t.Context()
	_, err = c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	info, _, err := rawClient(t).Session().Info(c.sessionIDs()[0], nil)
	require.NoError(t, err)
	require.Equal(t, time.Duration(0), info.LockDelay)
	require.NoError(t, l.Unlock(ctx))
}

func requireCode(t testing.TB, err error, code topo.ErrorCode) {
	t.Helper()
	require.Error(t, err)
	require.Truef(t, topo.IsErrType(err, code), "want %q, got %v", code, err)
}

// TestReadModeOption: reads are consistent by default, ReadDefault is
// settable through NewConn and the factory, and an unknown mode is
// InvalidArgument.
func TestReadModeOption(t *testing.T) {
	c, err := NewConn(Options{Address: agent.Addr()}, testRoot(t))
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, ReadConsistent, c.opts.Reads)
	require.True(t, c.queryOptions(t.Context()).RequireConsistent)

	fc, err := NewFactory(Options{Reads: ReadDefault}).Create("cell", agent.Addr(), testRoot(t))
	require.NoError(t, err)
	defer fc.Close()
	d := fc.(*Conn)
	require.False(t, d.queryOptions(t.Context()).RequireConsistent)
	require.True(t, d.consistentOptions(t.Context()).RequireConsistent, "decisions stay consistent")
	_, err = d.Create(t.Context(), "f", []byte("x"))
	require.NoError(t, err)
	got, _, err := d.Get(t.Context(), "f")
	require.NoError(t, err)
	require.Equal(t, "x", string(got))

	_, err = NewConn(Options{Reads: ReadMode(7)}, "r")
	requireCode(t, err, topo.InvalidArgument)
}

// TestMinSessionTTL: with Options.MinSessionTTL set to the agent's
// session_ttl_min (1 s here), the sessions a Conn creates get the TTLs it
// asks for down to that minimum, and Consul accepts them.
func TestMinSessionTTL(t *testing.T) {
	root := testRoot(t)
	opts := testOptions()
	opts.MinSessionTTL, opts.SessionTTL = consultest.SessionTTLMin, 2*time.Second
	c, err := NewConn(opts, root)
	require.NoError(t, err)
	defer c.Close()
	raw := rawClient(t)
	ctx := t.Context()
	for _, d := range []string{"a", "b"} {
		_, err := c.Create(ctx, d+"/f", []byte("x"))
		require.NoError(t, err)
	}
	la, err := c.Lock(ctx, "a", "x")
	require.NoError(t, err)
	defer la.Unlock(ctx)
	lb, err := c.LockWithTTL(ctx, "b", "x", 100*time.Millisecond)
	require.NoError(t, err)
	defer lb.Unlock(ctx)
	var ttls []string
	for _, id := range c.sessionIDs() {
		info, _, err := raw.Session().Info(id, nil)
		require.NoError(t, err)
		ttls = append(ttls, info.TTL)
	}
	require.ElementsMatch(t, []string{"2s", "1s"}, ttls)
}
