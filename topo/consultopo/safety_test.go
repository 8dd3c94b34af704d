package consultopo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/test"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// requireForeign asserts err is NodeExists caused by a ForeignKeyError on
// key.
func requireForeign(t *testing.T, err error, key string) {
	t.Helper()
	requireCode(t, err, topo.NodeExists)
	var fk *ForeignKeyError
	require.Truef(t, errors.As(err, &fk), "want a *ForeignKeyError, got %v", err)
	require.Equal(t, key, fk.Key)
}

// TestForeignLockKey (issue 10 item 6): a key d/Lock or elections/e that
// another tool wrote (no lock flags, no session) is never overwritten nor
// deleted by Lock, TryLock, Unlock or WaitForLeadership, Lock reports it
// (not NoNode) even when it is d's only key, and List reports it.
func TestForeignLockKey(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	kv := rawClient(t).KV()
	ctx := t.Context()

	put := func(key, val string) uint64 {
		t.Helper()
		_, err := kv.Put(&api.KVPair{Key: root + "/" + key, Value: []byte(val)}, nil)
		require.NoError(t, err)
		pair, _, err := kv.Get(root+"/"+key, &api.QueryOptions{RequireConsistent: true})
		require.NoError(t, err)
		return pair.ModifyIndex
	}
	intact := func(key, val string, index uint64) {
		t.Helper()
		pair, _, err := kv.Get(root+"/"+key, &api.QueryOptions{RequireConsistent: true})
		require.NoError(t, err)
		require.NotNil(t, pair, "%s was deleted", key)
		require.Equal(t, val, string(pair.Value))
		require.Equal(t, index, pair.ModifyIndex, "%s was rewritten", key)
		require.Empty(t, pair.Session)
	}

	// d's only key is the foreign d/Lock.
	idx := put("d/Lock", "user data")
	_, err := c.Lock(ctx, "d", "topokit")
	requireForeign(t, err, root+"/d/Lock")
	_, err = c.TryLock(ctx, "d", "topokit")
	requireForeign(t, err, root+"/d/Lock")
	_, err = c.LockName(ctx, "d", "topokit")
	requireForeign(t, err, root+"/d/Lock")
	intact("d/Lock", "user data", idx)

	// With another file beside it.
	_, err = c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	_, err = c.Lock(ctx, "d", "topokit")
	requireForeign(t, err, root+"/d/Lock")
	intact("d/Lock", "user data", idx)

	kvs, err := c.List(ctx, "d/")
	requireCode(t, err, topo.PartialResult)
	var rf *topo.ReservedFilesError
	require.True(t, errors.As(err, &rf))
	require.Equal(t, []string{"d/Lock"}, rf.Paths)
	require.Len(t, kvs, 1)
	require.Equal(t, "d/f", kvs[0].Path)

	// A foreign key written after a lock was lost is left by Unlock.
	_, err = c.Create(ctx, "e/f", []byte("x"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "e", "topokit")
	require.NoError(t, err)
	_, err = kv.Delete(root+"/e/Lock", nil)
	require.NoError(t, err)
	idx2 := put("e/Lock", "user again")
	requireCode(t, l.Unlock(ctx), topo.LockLost)
	intact("e/Lock", "user again", idx2)

	// The election key.
	idx3 := put("elections/e", "user election")
	p, err := c.NewLeaderParticipation("e", "id")
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.WaitForLeadership()
	requireForeign(t, err, root+"/elections/e")
	id, err := p.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Empty(t, id)
	p.Stop()
	intact("elections/e", "user election", idx3)
	_, err = c.List(ctx, "")
	requireCode(t, err, topo.PartialResult)
	require.True(t, errors.As(err, &rf))
	require.Equal(t, []string{"d/Lock", "e/Lock", "elections/e"}, rf.Paths)
}

// aclAgent is an ACL-enabled dev agent (default deny) shared by the
// permission tests of one run.
func aclSetup(t *testing.T) (a *consultest.Agent, admin, readOnly *Conn, root string) {
	t.Helper()
	a = consultest.StartAgentWithOptions(t, consultest.AgentOptions{ACL: true})
	root = testRoot(t)
	var err error
	admin, err = NewConn(Options{Address: a.Addr(), Token: a.ManagementToken(), WatchPollDuration: 2 * time.Second}, root)
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	readOnly, err = NewConn(Options{Address: a.Addr(), Token: a.ReadOnlyToken(t), WatchPollDuration: 2 * time.Second}, root)
	require.NoError(t, err)
	t.Cleanup(readOnly.Close)
	return a, admin, readOnly, root
}

// TestPermissionDenied (issue 10 items 7 and 15): with a read-only ACL
// token every write, lock and leadership call returns PermissionDenied at
// once (never NodeExists, NoNode or BadVersion, and without retrying), and
// reads work.
func TestPermissionDenied(t *testing.T) {
	_, admin, ro, _ := aclSetup(t)
	ctx := t.Context()
	v, err := admin.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)

	got, gv, err := ro.Get(ctx, "d/f")
	require.NoError(t, err, "a read-only token reads")
	require.Equal(t, "x", string(got))
	require.Equal(t, v, gv)

	_, err = ro.Create(ctx, "d/f", []byte("y"))
	requireCode(t, err, topo.PermissionDenied)
	_, err = ro.Create(ctx, "d/new", []byte("y"))
	requireCode(t, err, topo.PermissionDenied)
	_, err = ro.Update(ctx, "d/f", []byte("y"), v)
	requireCode(t, err, topo.PermissionDenied)
	_, err = ro.Update(ctx, "d/f", []byte("y"), nil)
	requireCode(t, err, topo.PermissionDenied)
	big := bytes.Repeat([]byte("b"), maxTxnValue+1)
	_, err = ro.Update(ctx, "d/f", big, v)
	requireCode(t, err, topo.PermissionDenied)
	_, err = ro.Update(ctx, "d/f", big, nil)
	requireCode(t, err, topo.PermissionDenied)
	_, err = ro.Create(ctx, "d/big", big)
	requireCode(t, err, topo.PermissionDenied)
	requireCode(t, ro.Delete(ctx, "d/f", nil), topo.PermissionDenied)
	requireCode(t, ro.Delete(ctx, "d/f", v), topo.PermissionDenied)
	_, err = ro.Lock(ctx, "d", "x")
	requireCode(t, err, topo.PermissionDenied)
	_, err = ro.TryLock(ctx, "d", "x")
	requireCode(t, err, topo.PermissionDenied)
	_, err = ro.LockWithTTL(ctx, "d", "x", time.Minute)
	requireCode(t, err, topo.PermissionDenied)

	p, err := ro.NewLeaderParticipation("e", "ro")
	require.NoError(t, err)
	defer p.Stop()
	done := make(chan error, 1)
	go func() { _, err := p.WaitForLeadership(); done <- err }()
	select {
	case err := <-done:
		requireCode(t, err, topo.PermissionDenied)
	case <-time.After(waitFor):
		t.Fatal("WaitForLeadership kept retrying a permission refusal")
	}

	// A compare-and-set loop (topo.Server.UpdateCellInfoFields retries on
	// NodeExists and BadVersion) stops at once, for an absent and a present
	// CellInfo.
	admin2, err := NewConn(admin.opts, admin.root)
	require.NoError(t, err)
	adminServer := topo.NewServer(nil, admin2)
	defer adminServer.Close()
	require.NoError(t, adminServer.UpdateCellInfoFields(ctx, "present", func(ci *topodatapb.CellInfo) error {
		ci.Root = "r"
		return nil
	}))
	ts := topo.NewServer(nil, ro)
	defer ts.Close()
	for _, cell := range []string{"absent", "present"} {
		calls := 0
		err = ts.UpdateCellInfoFields(ctx, cell, func(ci *topodatapb.CellInfo) error {
			calls++
			ci.ServerAddress = "changed"
			return nil
		})
		requireCode(t, err, topo.PermissionDenied)
		require.Equal(t, 1, calls, "UpdateCellInfoFields of %s retried a permission refusal", cell)
	}

	got, gv, err = admin.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "x", string(got), "nothing was written")
	require.Equal(t, v, gv)
}

// TestPermissionDeniedEndsWaits (issue 10 item 15): a token deleted while a
// watch, a recursive watch and a leader watch run makes them end with
// PermissionDenied instead of retrying forever; a Lock waiting with it
// ends too.
func TestPermissionDeniedEndsWaits(t *testing.T) {
	a, admin, _, root := aclSetup(t)
	ctx := t.Context()
	_, err := admin.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)

	cfg := api.DefaultConfig()
	cfg.Address, cfg.Token = a.Addr(), a.ManagementToken()
	mgmt, err := api.NewClient(cfg)
	require.NoError(t, err)
	policy, _, err := mgmt.ACL().PolicyCreate(&api.ACLPolicy{Name: "rw", Rules: `key_prefix "" { policy = "write" }` + "\n" + `session_prefix "" { policy = "write" }` + "\n" + `node_prefix "" { policy = "read" }`}, nil)
	require.NoError(t, err)
	tok, _, err := mgmt.ACL().TokenCreate(&api.ACLToken{Policies: []*api.ACLTokenPolicyLink{{ID: policy.ID}}}, nil)
	require.NoError(t, err)
	rw, err := NewConn(Options{Address: a.Addr(), Token: tok.SecretID, WatchPollDuration: time.Second}, root)
	require.NoError(t, err)
	defer rw.Close()

	_, changes, err := rw.Watch(ctx, "d/f")
	require.NoError(t, err)
	_, events, err := rw.WatchRecursive(ctx, "d/")
	require.NoError(t, err)
	held, err := admin.Lock(ctx, "d", "admin")
	require.NoError(t, err)
	defer held.Unlock(ctx)
	lockDone := make(chan error, 1)
	go func() {
		l, err := rw.Lock(ctx, "d", "rw")
		if err == nil {
			l.Unlock(ctx)
		}
		lockDone <- err
	}()
	require.Eventually(t, func() bool { return len(rw.sessionIDs()) > 0 }, waitFor, tick, "the waiter's session")

	_, err = mgmt.ACL().TokenDelete(tok.AccessorID, nil)
	require.NoError(t, err)

	for name, ch := range map[string]<-chan error{
		"Watch":          relay(changes, func(w *topo.WatchData) error { return w.Err }),
		"WatchRecursive": relay(events, func(w *topo.WatchDataRecursive) error { return w.Err }),
		"Lock":           lockDone,
	} {
		select {
		case err := <-ch:
			requireCode(t, err, topo.PermissionDenied)
		case <-time.After(waitFor):
			t.Fatalf("%s kept retrying after the token was deleted", name)
		}
	}
}

// relay returns the first error of a watch channel (nil values skipped).
func relay[T any](ch <-chan T, errOf func(T) error) <-chan error {
	out := make(chan error, 1)
	go func() {
		for v := range ch {
			if err := errOf(v); err != nil {
				out <- err
				return
			}
		}
		out <- errors.New("channel closed without an error")
	}()
	return out
}

// TestLargeValueVersions (issue 10 item 8): with concurrent writers of
// values above the transaction limit, no two Updates ever return the same
// version, so a compare-and-set chained on a returned version never
// overwrites a write its caller did not see. An Update whose value was
// overwritten before its version could be read back says so
// (ErrVersionUnknown) instead of returning a version.
func TestLargeValueVersions(t *testing.T) {
	root := testRoot(t)
	ctx := t.Context()
	conns := []*Conn{newTestConn(t, root), newTestConn(t, root), newTestConn(t, root)}
	_, err := conns[0].Create(ctx, "big", bytes.Repeat([]byte("0"), maxTxnValue+1))
	require.NoError(t, err)

	const writes = 25
	var mu sync.Mutex
	owner := map[topo.Version]string{}
	unknown := 0
	record := func(who string, v topo.Version, err error) bool {
		mu.Lock()
		defer mu.Unlock()
		if errors.Is(err, ErrVersionUnknown) {
			requireCode(t, err, topo.Unavailable)
			unknown++
			return false
		}
		require.NoError(t, err, who)
		prev, dup := owner[v]
		require.Falsef(t, dup, "version %v returned to %s and to %s", v, prev, who)
		owner[v] = who
		return true
	}
	var wg sync.WaitGroup
	for w, c := range conns[:2] {
		wg.Go(func() {
			for i := range writes {
				v, err := c.Update(ctx, "big", bytes.Repeat([]byte{byte('a' + w)}, maxTxnValue+1+i), nil)
				record(fmt.Sprintf("writer %d #%d", w, i), v, err)
			}
		})
	}
	wg.Go(func() {
		c := conns[2]
		_, v, err := c.Get(ctx, "big")
		require.NoError(t, err)
		for i := range writes {
			nv, err := c.Update(ctx, "big", bytes.Repeat([]byte("c"), maxTxnValue+1+i), v)
			if topo.IsErrType(err, topo.BadVersion) {
				_, v, err = c.Get(ctx, "big")
				require.NoError(t, err)
				continue
			}
			if record(fmt.Sprintf("chained #%d", i), nv, err) {
				v = nv
			} else {
				_, v, err = c.Get(ctx, "big")
				require.NoError(t, err)
			}
		}
	})
	wg.Wait()
	t.Logf("%d versions returned, %d writes overwritten before their version could be read", len(owner), unknown)
	require.NotEmpty(t, owner)
}

// TestLockWaiterSessionDestroyed (issue 10 item 18): a Lock waiting for a
// held lock fails with LockLost when its session is destroyed, while the
// holder still holds.
func TestLockWaiterSessionDestroyed(t *testing.T) {
	root := testRoot(t)
	holder, waiter := newTestConn(t, root), newShortTTLConn(t, root)
	ctx := t.Context()
	_, err := holder.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := holder.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	defer l.Unlock(ctx)

	done := make(chan error, 1)
	go func() {
		l2, err := waiter.Lock(ctx, "d", "waiter")
		if err == nil {
			l2.Unlock(ctx)
		}
		done <- err
	}()
	// The waiter queued on its session: its session alone shows nothing
	// (a Lock whose entry comes after the session's loss queues on the
	// Conn's next session, and rightly waits for the holder).
	waitQueued(t, holder, holder.dirPrefix("d")+lockName, 1)
	expireSession(t, waiter)
	select {
	case err := <-done:
		requireCode(t, err, topo.LockLost)
	case <-time.After(waitFor):
		t.Fatal("the waiter whose session was destroyed stayed blocked")
	}
	require.NoError(t, l.Check(ctx), "the holder still holds")
}

// TestNestedElections (issue 10 item 10): elections svc and svc/a are
// independent: each has its own leader, and svc's reads and watchers never
// see svc/a's.
func TestNestedElections(t *testing.T) {
	root := testRoot(t)
	c1, c2 := newTestConn(t, root), newTestConn(t, root)
	ctx := t.Context()
	inner, err := c1.NewLeaderParticipation("svc/a", "inner")
	require.NoError(t, err)
	defer inner.Stop()
	_, err = inner.WaitForLeadership()
	require.NoError(t, err)

	outer, err := c2.NewLeaderParticipation("svc", "outer")
	require.NoError(t, err)
	defer outer.Stop()
	id, err := outer.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Empty(t, id, "svc has no leader while svc/a has one")
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	leaders, err := outer.WaitForNewLeader(wctx)
	require.NoError(t, err)
	lctx, err := outer.WaitForLeadership()
	require.NoError(t, err, "svc's leadership does not wait for svc/a's leader")
	require.Equal(t, "outer", <-leaders, "svc's watcher sees only svc's leader")
	id, err = inner.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "inner", id)
	inner.Stop()
	require.NoError(t, lctx.Err(), "svc/a's end does not end svc's term")
	id, err = outer.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "outer", id)
}

// TestPartitionedHolderGivesUpFirst (issue 10 items 13 and 17): the holder
// and leader's HTTP traffic is blackholed; at the moment another client
// takes the lock and the leadership, the old holder's Check already fails
// and its leadership context is already cancelled.
func TestPartitionedHolderGivesUpFirst(t *testing.T) {
	root := testRoot(t)
	proxy, err := faultproxy.New(agent.Addr())
	require.NoError(t, err)
	defer proxy.Close()
	oldOpts := shortTTLOptions()
	oldOpts.Address = proxy.Addr()
	old, err := NewConn(oldOpts, root)
	require.NoError(t, err)
	defer old.Close()
	next := newTestConn(t, root)
	ctx := t.Context()

	_, err = old.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := old.Lock(ctx, "d", "old")
	require.NoError(t, err)
	p1, err := old.NewLeaderParticipation("e", "old")
	require.NoError(t, err)
	lctx, err := p1.WaitForLeadership()
	require.NoError(t, err)
	require.NoError(t, l.Check(ctx))

	type won struct {
		checkErr error
		ledErr   error
		err      error
	}
	lockWon, leadWon := make(chan won, 1), make(chan won, 1)
	go func() {
		l2, err := next.Lock(ctx, "d", "next")
		w := won{err: err, checkErr: l.Check(ctx), ledErr: lctx.Err()}
		if err == nil {
			defer l2.Unlock(ctx)
		}
		lockWon <- w
	}()
	p2, err := next.NewLeaderParticipation("e", "next")
	require.NoError(t, err)
	defer p2.Stop()
	go func() {
		_, err := p2.WaitForLeadership()
		leadWon <- won{err: err, checkErr: l.Check(ctx), ledErr: lctx.Err()}
	}()

	proxy.Blackhole()
	for name, ch := range map[string]chan won{"lock": lockWon, "leadership": leadWon} {
		select {
		case w := <-ch:
			require.NoError(t, w.err, name)
			requireCode(t, w.checkErr, topo.LockLost)
			require.Error(t, w.ledErr, "the old leader's context was still live when the %s changed hands", name)
		case <-time.After(4 * shortTTL):
			t.Fatalf("the %s was not taken over", name)
		}
	}
	proxy.Heal()
	requireCode(t, l.Unlock(ctx), topo.LockLost)
	p1.Stop()
	id, err := p2.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "next", id, "the old leader's Stop did not delete the new leader's key")
}

// TestLargeValueOverwrittenBeforeReadBack (issue 10 item 8): a large
// Update through a slowed connection, while another Conn keeps rewriting
// the key, is often overwritten between its PUT and its read-back; it then
// returns ErrVersionUnknown (Unavailable), never the other writer's
// version.
func TestLargeValueOverwrittenBeforeReadBack(t *testing.T) {
	root := testRoot(t)
	ctx := t.Context()
	proxy, err := faultproxy.New(agent.Addr())
	require.NoError(t, err)
	defer proxy.Close()
	slow, err := NewConn(Options{Address: proxy.Addr()}, root)
	require.NoError(t, err)
	defer slow.Close()
	fast := newTestConn(t, root)
	_, err = fast.Create(ctx, "big", []byte("0"))
	require.NoError(t, err)

	var mu sync.Mutex
	theirs := map[topo.Version]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	defer halt()
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v, err := fast.Update(ctx, "big", []byte(strconv.Itoa(i)), nil)
			if err != nil {
				t.Errorf("the other writer's Update: %v", err)
				return
			}
			mu.Lock()
			theirs[v] = true
			mu.Unlock()
		}
	})
	proxy.SetDelay(20 * time.Millisecond)
	unknown := 0
	for i := 0; i < 200 && unknown == 0; i++ {
		v, err := slow.Update(ctx, "big", bytes.Repeat([]byte("s"), maxTxnValue+1), nil)
		if errors.Is(err, ErrVersionUnknown) {
			requireCode(t, err, topo.Unavailable)
			unknown++
			continue
		}
		require.NoError(t, err)
		mu.Lock()
		require.Falsef(t, theirs[v], "the large Update returned version %v of the other writer", v)
		mu.Unlock()
	}
	halt()
	require.Equal(t, 1, unknown, "no large Update was overwritten before its read-back in 200 tries")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, theirs)
}

// TestSessionLossEndsClaimsAtOnce: the moment the Conn declares a session
// lost (its deadline passed, Consul said it is gone, or it was destroyed),
// every claim on it has ended as its holder sees it, before markLost
// returns (test.RequireLossEndsClaims).
func TestSessionLossEndsClaimsAtOnce(t *testing.T) {
	for range 20 {
		c := newTestConn(t, testRoot(t))
		test.RequireLossEndsClaims(t, c, func() {
			sessions := connSessions(c)
			require.NotEmpty(t, sessions)
			for _, s := range sessions {
				s.markLost(errSessionGone)
			}
		})
		c.Close()
	}
}
