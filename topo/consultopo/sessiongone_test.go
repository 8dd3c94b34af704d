package consultopo

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
)

// Claims whose sessions Consul no longer knows: destroyed by another
// client (raw.Session().Destroy) before the Conn's renewal noticed, so
// that Consul refuses the Conn's next acquire or enqueue on it with an
// "invalid session" operation error (txn: errSessionGone); or forgotten
// by a -dev agent that restarted empty. And claims across a restart of a
// persistent agent, which keeps them.

// destroySession destroys s in Consul without the Conn knowing.
func destroySession(t *testing.T, s *session) {
	t.Helper()
	_, err := rawClient(t).Session().Destroy(s.id, nil)
	require.NoError(t, err)
}

// sharedOf returns c's long-lived session, or fails.
func sharedOf(t *testing.T, c *Conn) *session {
	t.Helper()
	s := c.currentShared()
	require.NotNil(t, s)
	return s
}

// lockHolderSession returns the session holding root's d/Lock ("" when
// free), read through raw.
func lockHolderSession(t *testing.T, raw *api.Client, root string) string {
	t.Helper()
	p, _, err := raw.KV().Get(root+"/d/Lock", &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	if p == nil {
		return ""
	}
	return p.Session
}

// requireConsulSession requires Consul to know the session id.
func requireConsulSession(t *testing.T, id string) {
	t.Helper()
	info, _, err := rawClient(t).Session().Info(id, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.NotNil(t, info, "the session %s is unknown to Consul", id)
}

// TestEnqueueOnDestroyedSharedSession: a Lock queueing behind another
// Conn's holder on its long-lived session, destroyed by another client
// while idle (the enqueue's lock of the tail key is refused: an invalid
// session), queues on a new session, waits for the holder and gets the
// lock at its release.
func TestEnqueueOnDestroyedSharedSession(t *testing.T) {
	root, _, old, waiter := enqueueOnDestroyedShared(t, func(ctx context.Context, c *Conn) (topo.LockDescriptor, error) {
		return c.Lock(ctx, "d", "waiter")
	})
	h := lockHolderSession(t, rawClient(t), root)
	require.NotEqual(t, old.id, h)
	requireConsulSession(t, h)
	require.NoError(t, waiter.Check(t.Context()))
	require.NoError(t, waiter.Unlock(t.Context()))
}

// enqueueOnDestroyedShared: c1 holds d; c2's long-lived session (made by
// a Lock of e) is destroyed by another client while idle; lock (c2's
// Lock of d) must queue on a session Consul knows, wait while the holder
// holds, and get d at the holder's release. It returns the root, c2, the
// destroyed session and the waiter's descriptor.
func enqueueOnDestroyedShared(t *testing.T, lock func(context.Context, *Conn) (topo.LockDescriptor, error)) (string, *Conn, *session, topo.LockDescriptor) {
	root := testRoot(t)
	c1, c2 := newTestConn(t, root), newTestConn(t, root)
	ctx := t.Context()
	_, err := c1.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	_, err = c1.Create(ctx, "e/f", []byte("x"))
	require.NoError(t, err)
	l, err := c2.Lock(ctx, "e", "warm")
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	old := sharedOf(t, c2)
	holder, err := c1.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	destroySession(t, old)
	require.True(t, old.alive(), "the Conn noticed the destroy before the Lock: nothing tested")

	got := make(chan error, 1)
	var waiter topo.LockDescriptor
	go func() {
		var err error
		waiter, err = lock(ctx, c2)
		got <- err
	}()
	// The waiter queues: an entry on a session Consul knows.
	raw := rawClient(t)
	require.Eventually(t, func() bool {
		pairs, _, err := raw.KV().List(root+"/d/"+valuesDir+"/"+queueDir+"/", &api.QueryOptions{RequireConsistent: true})
		return err == nil && len(pairs) == 1 && pairs[0].Session != old.id
	}, waitFor, tick)
	select {
	case err := <-got:
		t.Fatalf("Lock returned %v while the holder holds", err)
	default:
	}
	require.NoError(t, holder.Check(ctx))
	require.NoError(t, holder.Unlock(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(waitFor):
		t.Fatal("the waiter did not get the lock at the release")
	}
	return root, c2, old, waiter
}

// TestWaiterOwnSessionDestroyed: a LockWithTTL waiter (its entry on the
// long-lived session, its acquire on a session of its own) whose own
// session another client destroys while it waits: at the holder's
// release its Lock is LockLost, not granted (the acquire names a session
// Consul no longer knows), it leaves nothing queued, and another Conn's
// Lock gets the lock.
func TestWaiterOwnSessionDestroyed(t *testing.T) {
	root := testRoot(t)
	c1, c2, c3 := newTestConn(t, root), newTestConn(t, root), newTestConn(t, root)
	ctx := t.Context()
	_, err := c1.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	holder, err := c1.Lock(ctx, "d", "holder")
	require.NoError(t, err)

	got := make(chan error, 1)
	go func() {
		l, err := c2.LockWithTTL(ctx, "d", "waiter", 2*MinSessionTTL)
		if err == nil {
			_ = l.Unlock(ctx)
		}
		got <- err
	}()
	raw := rawClient(t)
	require.Eventually(t, func() bool {
		pairs, _, err := raw.KV().List(root+"/d/"+valuesDir+"/"+queueDir+"/", &api.QueryOptions{RequireConsistent: true})
		return err == nil && len(pairs) == 1
	}, waitFor, tick)
	var own *session
	for _, s := range connSessions(c2) {
		if s.own {
			own = s
		}
	}
	require.NotNil(t, own)
	destroySession(t, own)
	require.NoError(t, holder.Unlock(ctx))
	select {
	case err := <-got:
		requireCode(t, err, topo.LockLost)
	case <-time.After(waitFor):
		t.Fatal("the waiter's Lock did not end")
	}
	pairs, _, err := raw.KV().List(root+"/d/"+valuesDir+"/"+queueDir+"/", &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.Empty(t, pairs, "the lost waiter left its entry queued")
	lctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	l3, err := c3.Lock(lctx, "d", "third")
	require.NoError(t, err)
	require.NoError(t, l3.Check(ctx))
	require.NoError(t, l3.Unlock(ctx))
}

// TestResumeAfterAgentForgot: ResumeLeaderParticipation, on a new Conn,
// of a term on a -dev agent that restarted empty since (it no longer
// knows the session) is LockLost; a new candidate then leads.
func TestResumeAfterAgentForgot(t *testing.T) {
	a := consultest.StartAgent(t)
	c1 := agentConn(t, a, "forgot")
	ctx := t.Context()
	lp, err := c1.NewLeaderParticipation("e", "me")
	require.NoError(t, err)
	t.Cleanup(lp.Stop)
	_, err = lp.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	info, err := lp.ResumeInfo()
	require.NoError(t, err)

	a.Restart(t)

	c2 := agentConn(t, a, "forgot")
	_, err = c2.ResumeLeaderParticipation(ctx, "e", "me", info)
	requireCode(t, err, topo.LockLost)
	p2, err := c2.NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	t.Cleanup(p2.Stop)
	cctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	_, err = p2.Campaign(cctx, []byte("v2"))
	require.NoError(t, err)
}

// blockedOn has c send its requests to a through a transport that closes
// the channel returned once c sends a blocking query of the KV key key
// (a waiter at the head of its queue, waiting for the key's holder).
func blockedOn(t *testing.T, c *Conn, a *consultest.Agent, key string) <-chan struct{} {
	t.Helper()
	rt := &blockSignal{path: "/v1/kv/" + key, blocked: make(chan struct{})}
	client, err := api.NewClient(&api.Config{Address: a.Addr(), HttpClient: &http.Client{Transport: rt}})
	require.NoError(t, err)
	c.client, c.kv = client, client.KV()
	return rt.blocked
}

// blockSignal closes blocked at the first blocking query of path.
type blockSignal struct {
	path    string
	once    sync.Once
	blocked chan struct{}
}

func (b *blockSignal) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == b.path && blockingWait(req.URL.RawQuery) > 0 {
		b.once.Do(func() { close(b.blocked) })
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestLockAcrossPersistentAgentRestart: a holder and a queued waiter
// across a restart of a persistent agent (which keeps the sessions): the
// waiter's one Lock, restarted under while it waits for the key in a
// blocking query, keeps waiting through it (no Unavailable), is not
// granted while the holder holds, the holder keeps the lock (its Check
// passes once the agent answers), and the waiter gets it at the release.
func TestLockAcrossPersistentAgentRestart(t *testing.T) {
	a := consultest.StartAgentWithOptions(t, consultest.AgentOptions{Persistent: true})
	root := testRoot(t)
	c1, c2 := agentConn(t, a, root), agentConn(t, a, root)
	ctx := t.Context()
	_, err := c1.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	holder, err := c1.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	blocked := blockedOn(t, c2, a, root+"/d/Lock")
	got := make(chan topo.LockDescriptor, 1)
	failed := make(chan error, 1)
	go func() {
		// One Lock: its session lives through the restart, so it keeps
		// waiting (a blocking query that fails is sent again).
		l, err := c2.Lock(ctx, "d", "waiter")
		if err != nil {
			failed <- err
			return
		}
		got <- l
	}()
	select {
	case <-blocked:
	case err := <-failed:
		t.Fatalf("the waiter's Lock failed: %v", err)
	}

	a.Restart(t)

	require.Eventually(t, func() bool { return holder.Check(ctx) == nil }, waitFor, tick)
	select {
	case l := <-got:
		t.Fatalf("the waiter was granted while the holder holds (holder Check: %v, waiter Check: %v)", holder.Check(ctx), l.Check(ctx))
	case err := <-failed:
		t.Fatalf("the waiter's Lock failed: %v", err)
	default:
	}
	require.NoError(t, holder.Unlock(ctx))
	select {
	case l := <-got:
		require.NoError(t, l.Check(ctx))
		require.NoError(t, l.Unlock(ctx))
	case err := <-failed:
		t.Fatalf("the waiter's Lock failed: %v", err)
	case <-time.After(waitFor):
		t.Fatal("the waiter did not get the lock at the release")
	}
}

// TestCampaignAcrossPersistentAgentRestart: a leader and a queued
// candidate across a restart of a persistent agent (which keeps the
// sessions): the term goes on (its context stays live, Proclaim writes),
// the candidate's one Campaign, restarted under while it waits for the
// key in a blocking query, keeps waiting through it and does not lead
// meanwhile, and it leads once the leader stops.
func TestCampaignAcrossPersistentAgentRestart(t *testing.T) {
	a := consultest.StartAgentWithOptions(t, consultest.AgentOptions{Persistent: true})
	root := testRoot(t)
	c1, c2 := agentConn(t, a, root), agentConn(t, a, root)
	ctx := t.Context()
	p1, err := c1.NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	defer p1.Stop()
	p2, err := c2.NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	defer p2.Stop()
	lctx, err := p1.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	key := root + "/" + electionsDir + "/e"
	blocked := blockedOn(t, c2, a, key)
	second := make(chan context.Context, 1)
	failed := make(chan error, 1)
	go func() {
		// One Campaign: its session lives through the restart, so it
		// keeps waiting.
		l, err := p2.Campaign(ctx, []byte("v2"))
		if err != nil {
			failed <- err
			return
		}
		second <- l
	}()
	select {
	case <-blocked:
	case err := <-failed:
		t.Fatalf("the candidate's Campaign failed: %v", err)
	}

	a.Restart(t)

	raw := agentClient(t, a)
	require.Eventually(t, func() bool { return p1.Proclaim(ctx, []byte("v1b")) == nil }, waitFor, tick)
	require.NoError(t, lctx.Err(), "the term ended across a restart that kept the session")
	p, _, err := raw.KV().Get(key, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.NotNil(t, p)
	id, err := p1.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "one", id)
	select {
	case <-second:
		t.Fatal("the candidate leads while the leader's term goes on")
	case err := <-failed:
		t.Fatalf("the candidate's Campaign failed: %v", err)
	default:
	}
	p1.Stop()
	select {
	case l := <-second:
		require.NoError(t, l.Err())
	case err := <-failed:
		t.Fatalf("the candidate's Campaign failed: %v", err)
	case <-time.After(waitFor):
		t.Fatal("the candidate did not lead after the leader stopped")
	}
}

// TestLockAcrossAgentRestartEmpty: a holder and a queued waiter on a -dev
// agent that restarts empty (it forgets both Conns' sessions, and keeps
// no lock-delay). The waiter, Locking again while its calls are
// Unavailable, gets the lock on a new session (its long-lived one is
// refused as unknown); the old holder's guarded write is then refused
// (LockLost) and writes nothing, the new holder's applies, and the old
// holder's Done closes.
func TestLockAcrossAgentRestartEmpty(t *testing.T) {
	a := consultest.StartAgent(t)
	c1, c2 := agentConn(t, a, "empty"), agentConn(t, a, "empty")
	ctx := t.Context()
	_, err := c1.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	holder, err := c1.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	got := make(chan topo.LockDescriptor, 1)
	failed := make(chan error, 1)
	go func() {
		for {
			l, err := c2.Lock(ctx, "d", "waiter")
			if err == nil {
				got <- l
				return
			}
			if ctx.Err() != nil || !topo.IsErrType(err, topo.Unavailable) && !topo.IsErrType(err, topo.LockLost) && !topo.IsErrType(err, topo.NoNode) {
				failed <- err
				return
			}
			// The agent restarts: Lock again (NoNode: d/f is gone).
			time.Sleep(tick)
			_, _ = c2.Create(ctx, "d/f", []byte("x"))
		}
	}()
	raw := agentClient(t, a)
	require.Eventually(t, func() bool {
		pairs, _, err := raw.KV().List("empty/d/"+valuesDir+"/"+queueDir+"/", &api.QueryOptions{RequireConsistent: true})
		return err == nil && len(pairs) == 1
	}, waitFor, tick)
	old := connSessions(c2)

	a.Restart(t)

	var waiter topo.LockDescriptor
	select {
	case waiter = <-got:
	case err := <-failed:
		t.Fatalf("the waiter's Lock failed: %v", err)
	case <-time.After(waitFor):
		t.Fatal("the waiter did not get the lock after the restart")
	}
	h := lockHolderSession(t, raw, "empty")
	require.NotEmpty(t, h)
	for _, s := range old {
		require.NotEqual(t, s.id, h, "the lock is held by a session the agent forgot")
	}
	_, err = c1.Txn(ctx, topo.IfHeld(holder), topo.UpdateOp("d/f", []byte("stale"), nil))
	requireCode(t, err, topo.LockLost)
	_, err = c2.Txn(ctx, topo.IfHeld(waiter), topo.UpdateOp("d/f", []byte("new"), nil))
	require.NoError(t, err)
	data, _, err := c2.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "new", string(data))
	select {
	case <-holder.Done():
	case <-time.After(waitFor):
		t.Fatal("the old holder's Done did not close")
	}
	require.NoError(t, waiter.Check(ctx))
	require.NoError(t, waiter.Unlock(ctx))
}

// TestProclaimAcrossAgentRestartEmpty: the leader's Proclaim after a -dev
// agent restarted empty (it forgets the leader's session) is NotLeader
// and writes nothing; the term's context ends; another candidate leads.
func TestProclaimAcrossAgentRestartEmpty(t *testing.T) {
	a := consultest.StartAgent(t)
	c1, c2 := agentConn(t, a, "empty"), agentConn(t, a, "empty")
	ctx := t.Context()
	p1, err := c1.NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	t.Cleanup(p1.Stop)
	lctx, err := p1.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)

	a.Restart(t)

	require.Eventually(t, func() bool {
		err := p1.Proclaim(ctx, []byte("v2"))
		require.False(t, err == nil, "Proclaim applied after the agent forgot the term")
		return !topo.IsErrType(err, topo.Unavailable)
	}, waitFor, tick)
	requireCode(t, p1.Proclaim(ctx, []byte("v2")), topo.NotLeader)
	vals, _, err := agentClient(t, a).KV().List("empty/"+electionsDir+"/e", &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.Empty(t, vals, "a value written after the agent forgot the term")
	select {
	case <-lctx.Done():
	case <-time.After(waitFor):
		t.Fatal("the term did not end")
	}
	p2, err := c2.NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	t.Cleanup(p2.Stop)
	cctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	_, err = p2.Campaign(cctx, []byte("w"))
	require.NoError(t, err)
	id, err := p1.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, "two", id)
}

// TestEnqueueWithTTLOnDestroyedSharedSession: a LockWithTTL queueing (its
// entry on the long-lived session, destroyed by another client while
// idle, its acquire on a session of its own) queues again on new
// sessions, the first own session destroyed, and gets the lock at the
// holder's release; the Conn then keeps exactly those two sessions, both
// known to Consul.
func TestEnqueueWithTTLOnDestroyedSharedSession(t *testing.T) {
	root, c2, old, waiter := enqueueOnDestroyedShared(t, func(ctx context.Context, c *Conn) (topo.LockDescriptor, error) {
		return c.LockWithTTL(ctx, "d", "waiter", 2*MinSessionTTL)
	})
	h := lockHolderSession(t, rawClient(t), root)
	ids := c2.sessionIDs()
	require.Len(t, ids, 2)
	require.Contains(t, ids, h)
	for _, id := range ids {
		require.NotEqual(t, old.id, id)
		requireConsulSession(t, id)
	}
	require.NoError(t, waiter.Check(t.Context()))
	require.NoError(t, waiter.Unlock(t.Context()))
}

// holdRequest holds the first request match picks (from c's, once
// installed by holdOn) until release closes, then sends it and closes done
// once it has its answer or error.
type holdRequest struct {
	match            func(*http.Request) bool
	held, release    chan struct{}
	done             chan struct{}
	mu               sync.Mutex
	queueRead, taken bool
}

func (h *holdRequest) RoundTrip(req *http.Request) (*http.Response, error) {
	h.mu.Lock()
	hold := !h.taken && h.match(req)
	h.taken = h.taken || hold
	h.mu.Unlock()
	if !hold {
		return http.DefaultTransport.RoundTrip(req)
	}
	close(h.held)
	<-h.release
	defer close(h.done)
	return http.DefaultTransport.RoundTrip(req)
}

// holdOn has c send its requests to a through a holdRequest of match.
func holdOn(t *testing.T, c *Conn, a *consultest.Agent, match func(h *holdRequest, req *http.Request) bool) *holdRequest {
	t.Helper()
	h := &holdRequest{held: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
	h.match = func(req *http.Request) bool { return match(h, req) }
	client, err := api.NewClient(&api.Config{Address: a.Addr(), HttpClient: &http.Client{Transport: h}})
	require.NoError(t, err)
	c.client, c.kv = client, client.KV()
	return h
}

// TestLockWaiterRidesOutAgentDown: a waiting Lock whose request at one
// step of its wait fails (the persistent agent killed while the request is
// held on its way, so that it meets a refused connection, then started
// again, keeping the sessions) keeps waiting rather than fail Unavailable,
// is not granted while the holder holds, and gets the lock at the release.
// The steps: its read of the queue, its first acquire transaction, its
// blocking query of the held key, and (second in the queue, behind another
// Conn's waiter) its blocking query of its predecessor's entry.
func TestLockWaiterRidesOutAgentDown(t *testing.T) {
	a := consultest.StartAgentWithOptions(t, consultest.AgentOptions{Persistent: true})
	opts := testOptions()
	opts.Address = a.Addr()
	for _, tc := range []struct {
		name  string
		ahead bool // another waiter queues first
		match func(root string) func(h *holdRequest, req *http.Request) bool
	}{
		{"QueueRead", false, func(root string) func(*holdRequest, *http.Request) bool {
			return func(_ *holdRequest, req *http.Request) bool {
				return req.Method == http.MethodGet && req.URL.Path == "/v1/kv/"+root+"/d/"+valuesDir+"/"+queueDir+"/"
			}
		}},
		{"AcquireTxn", false, func(root string) func(*holdRequest, *http.Request) bool {
			return func(h *holdRequest, req *http.Request) bool {
				if req.Method == http.MethodGet && req.URL.Path == "/v1/kv/"+root+"/d/"+valuesDir+"/"+queueDir+"/" {
					h.queueRead = true
				}
				return h.queueRead && req.Method == http.MethodPut && req.URL.Path == "/v1/txn"
			}
		}},
		{"KeyWait", false, func(root string) func(*holdRequest, *http.Request) bool {
			return func(_ *holdRequest, req *http.Request) bool {
				return req.URL.Path == "/v1/kv/"+root+"/d/Lock" && blockingWait(req.URL.RawQuery) > 0
			}
		}},
		{"PredecessorWait", true, func(root string) func(*holdRequest, *http.Request) bool {
			return func(_ *holdRequest, req *http.Request) bool {
				return strings.HasPrefix(req.URL.Path, "/v1/kv/"+root+"/d/"+valuesDir+"/"+queueDir+"/") && blockingWait(req.URL.RawQuery) > 0
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := testRoot(t)
			conn := func() *Conn {
				c, err := NewConn(opts, root)
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			}
			c1, c2 := conn(), conn()
			ctx := t.Context()
			_, err := c1.Create(ctx, "d/f", []byte("x"))
			require.NoError(t, err)
			holder, err := c1.Lock(ctx, "d", "holder")
			require.NoError(t, err)
			type result struct {
				l   topo.LockDescriptor
				err error
			}
			lock := func(c *Conn, who string) <-chan result {
				out := make(chan result, 1)
				go func() {
					l, err := c.Lock(ctx, "d", who)
					out <- result{l, err}
				}()
				return out
			}
			var first <-chan result
			raw := agentClient(t, a)
			if tc.ahead {
				first = lock(conn(), "first")
				require.Eventually(t, func() bool {
					pairs, _, err := raw.KV().List(root+"/d/"+valuesDir+"/"+queueDir+"/", &api.QueryOptions{RequireConsistent: true})
					return err == nil && len(pairs) == 1
				}, waitFor, tick)
			}
			h := holdOn(t, c2, a, tc.match(root))
			waiter := lock(c2, "waiter")
			select {
			case <-h.held:
			case r := <-waiter:
				t.Fatalf("the waiter's Lock returned before the step: %v", r.err)
			}

			a.Kill()
			close(h.release)
			<-h.done // refused
			require.NoError(t, a.Start())

			require.Eventually(t, func() bool { return holder.Check(ctx) == nil }, waitFor, tick)
			select {
			case r := <-waiter:
				t.Fatalf("the waiter's Lock returned while the holder holds: %v", r.err)
			default:
			}
			require.NoError(t, holder.Unlock(ctx))
			if first != nil {
				select {
				case r := <-first:
					require.NoError(t, r.err)
					require.NoError(t, r.l.Unlock(ctx))
				case <-time.After(waitFor):
					t.Fatal("the first waiter did not get the lock at the release")
				}
			}
			select {
			case r := <-waiter:
				require.NoError(t, r.err)
				require.NoError(t, r.l.Check(ctx))
				require.NoError(t, r.l.Unlock(ctx))
			case <-time.After(waitFor):
				t.Fatal("the waiter did not get the lock at the release")
			}
		})
	}
}

// agentConn is a Conn with the tests' options on agent a, under root,
// closed when the test ends.
func agentConn(t *testing.T, a *consultest.Agent, root string) *Conn {
	opts := testOptions()
	opts.Address = a.Addr()
	c, err := NewConn(opts, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}
