package consultopo

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/claims"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// The claims queue's tail-key drop and Proclaim's value write after a dev
// agent restarted empty while the Conn was cut off from it, and another
// client took the key the stale request names at the very index the Conn
// had read (TestStaleUnlockAcrossIndexReuse's scenario).

// TestStaleTailDropAcrossIndexReuse: the drop of a queue's tail key that
// named the head's entry (dropTailLater, after the head's acquire) gets
// through only after the agent restarted empty and another client wrote
// the tail key, with its own session, at the index the drop checks. The
// drop must leave that key alone: it is another session's. (It checked
// the index alone and deleted it.)
func TestStaleTailDropAcrossIndexReuse(t *testing.T) {
	acrossIndexReuse(t, staleTailDrop)
}

func staleTailDrop(t *testing.T, a *consultest.Agent, attempt int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := fmt.Sprintf("staletail%d", attempt)
	c1, c2, px := staleConns(t, a, root)
	holder, err := c1.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	// c2's enqueue writes the tail key, naming its entry, on its session.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	waited := make(chan error, 1)
	go func() {
		_, err := c2.Lock(wctx, "d", "waiter")
		waited <- err
	}()
	raw := agentClient(t, a)
	tailKey := root + "/d/" + valuesDir + "/" + tailName
	var tail *api.KVPair
	for tail == nil {
		tail, _, err = raw.KV().Get(tailKey, &api.QueryOptions{RequireConsistent: true})
		require.NoError(t, err)
		if tail == nil {
			time.Sleep(10 * time.Millisecond)
		}
	}
	require.NotEmpty(t, tail.Session)

	px.Blackhole()
	a.Restart(t)
	raw = agentClient(t, a)
	sid := otherSession(t, raw)
	if !alignIndex(t, raw, root, tail.ModifyIndex-1, attempt) {
		return false
	}
	ok, _, err := raw.KV().Acquire(&api.KVPair{Key: tailKey, Value: []byte("other entry"), Session: sid}, nil)
	require.NoError(t, err)
	require.True(t, ok)
	p, _, err := raw.KV().Get(tailKey, nil)
	require.NoError(t, err)
	if p.ModifyIndex != tail.ModifyIndex {
		t.Logf("attempt %d: the agent wrote at %d", attempt, tail.ModifyIndex)
		return false
	}
	px.Heal()

	c2.dropTail(ctx, tail)
	p, _, err = raw.KV().Get(tailKey, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.NotNil(t, p, "the stale tail drop deleted another session's tail key")
	require.Equal(t, sid, p.Session)
	stop()
	<-waited
	_ = holder.Unlock(ctx)
	return true
}

// TestStaleProclaimAcrossIndexReuse: a leader's value write (SetValue,
// Proclaim's request) that gets through only after the agent restarted
// empty and another client acquired the election key, with its own
// session, at the term's index. Its index check passes, but the write is
// a lock of the value key by the leader's session, which the new agent
// does not know: the transaction is refused and nothing is written, so
// SetValue needs no session check (it would cost an operation, not a
// request). The driver is called directly: through Proclaim the Conn may
// first notice the loss and send nothing.
func TestStaleProclaimAcrossIndexReuse(t *testing.T) {
	acrossIndexReuse(t, staleProclaim)
}

func staleProclaim(t *testing.T, a *consultest.Agent, attempt int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := fmt.Sprintf("staleproclaim%d", attempt)
	c, _, px := staleConns(t, a, root)
	lp, err := c.NewLeaderParticipation("e", "me")
	require.NoError(t, err)
	t.Cleanup(lp.Stop)
	_, err = lp.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	b, err := lp.ResumeInfo()
	require.NoError(t, err)
	var ri resumeInfo
	require.NoError(t, json.Unmarshal(b, &ri))
	var sess *session
	c.mu.Lock()
	for s := range c.sessions {
		if s.id == ri.Session {
			sess = s
		}
	}
	c.mu.Unlock()
	require.NotNil(t, sess)

	px.Blackhole()
	a.Restart(t)
	raw := agentClient(t, a)
	sid := otherSession(t, raw)
	if !alignIndex(t, raw, root, ri.Token-1, attempt) {
		return false
	}
	key := root + "/" + electionsDir + "/e"
	ok, _, err := raw.KV().Acquire(&api.KVPair{Key: key, Value: []byte("other"), Flags: api.LockFlagValue, Session: sid}, nil)
	require.NoError(t, err)
	require.True(t, ok)
	p, _, err := raw.KV().Get(key, nil)
	require.NoError(t, err)
	if p.ModifyIndex != ri.Token {
		t.Logf("attempt %d: the agent wrote at %d", attempt, ri.Token)
		return false
	}
	px.Heal()

	e := claims.Entry{Token: int64(ri.Token), Key: grantedKey(key, ri.LockIndex), Session: ri.Session, Contents: "me", Granted: true}
	require.True(t, sess.alive(), "the session was declared lost before the write: nothing tested")
	setErr := driver{c}.SetValue(ctx, claims.Queue{Path: "e", Election: true}, sess.view, e, []byte("stale"))
	require.ErrorIs(t, setErr, claims.ErrNotHeld, "a stale leader's value write: refused as not held (Proclaim's NotLeader)")
	p, _, err = raw.KV().Get(key, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.Equal(t, sid, p.Session)
	require.Equal(t, "other", string(p.Value))
	vals, _, err := raw.KV().List(key+"/", &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.Empty(t, vals, "the stale leader's value key was written")
	return true
}

// staleConns returns two Conns under root, through one proxy to a, with
// sessions renewed only every 30 s (none while the agent restarts).
func staleConns(t *testing.T, a *consultest.Agent, root string) (*Conn, *Conn, *faultproxy.Proxy) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	px, err := faultproxy.New(a.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	opts := testOptions()
	opts.Address, opts.SessionTTL = px.Addr(), time.Minute
	var cs [2]*Conn
	for i := range cs {
		cs[i], err = NewConn(opts, root)
		require.NoError(t, err)
		t.Cleanup(cs[i].Close)
	}
	// Past the agent's start-up writes, which a restart repeats.
	for i := range 20 {
		_, err := cs[0].Create(ctx, fmt.Sprintf("pad/%d", i), []byte("x"))
		require.NoError(t, err)
	}
	_, err = cs[0].Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	return cs[0], cs[1], px
}

// otherSession creates another client's session (a Vitess process's).
func otherSession(t *testing.T, raw *api.Client) string {
	t.Helper()
	sid, _, err := raw.Session().Create(&api.SessionEntry{TTL: "60s", LockDelay: time.Millisecond, Behavior: api.SessionBehaviorRelease}, nil)
	require.NoError(t, err)
	return sid
}

// alignIndex writes pad keys under root until the agent's last write is
// at index last; false when its own writes passed it.
func alignIndex(t *testing.T, raw *api.Client, root string, last uint64, attempt int) bool {
	t.Helper()
	var at uint64
	for i := 0; at < last; i++ {
		k := fmt.Sprintf("%s/pad/%d", root, i)
		_, err := raw.KV().Put(&api.KVPair{Key: k, Value: []byte("x")}, nil)
		require.NoError(t, err)
		p, _, err := raw.KV().Get(k, nil)
		require.NoError(t, err)
		at = p.ModifyIndex
	}
	if at != last {
		t.Logf("attempt %d: the agent wrote at %d", attempt, last)
		return false
	}
	return true
}

// agentClient returns a plain consul api client on a.
func agentClient(t *testing.T, a *consultest.Agent) *api.Client {
	t.Helper()
	raw, err := api.NewClient(&api.Config{Address: a.Addr()})
	require.NoError(t, err)
	return raw
}
