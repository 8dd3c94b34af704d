package consultopo

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// waitLeader polls Leader until it reports want (ID and Value).
func waitLeader(t *testing.T, p topo.LeaderParticipation, id, value string) topo.Leader {
	t.Helper()
	var last topo.Leader
	var lastErr error
	require.Eventuallyf(t, func() bool {
		last, lastErr = p.Leader(t.Context())
		return lastErr == nil && last.ID == id && string(last.Value) == value
	}, 30*time.Second, time.Millisecond, "want %q/%q, got %+v, %v", id, value, last, lastErr)
	return last
}

// TestValuesLayout checks with the raw api that the election key keeps
// Vitess's layout (its value is exactly the id, the lock flags, the
// leader's session) and that the published value lives at
// elections/<name>/locks/<session id> on the same session; that Proclaim
// leaves the election key alone; that a WaitForLeadership leader has no
// value key; and that Resign deletes both keys.
func TestValuesLayout(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	raw := rawClient(t).KV()
	ctx := t.Context()
	p, err := c.NewLeaderParticipation("svc/a", "the-id")
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.Campaign(ctx, []byte("addr:1"))
	require.NoError(t, err)
	f, err := p.Term()
	require.NoError(t, err)

	key := root + "/elections/svc/a"
	ek, _, err := raw.Get(key, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.NotNil(t, ek)
	require.Equal(t, "the-id", string(ek.Value), "Vitess reads the id from the election key")
	require.Equal(t, uint64(api.LockFlagValue), ek.Flags)
	require.NotEmpty(t, ek.Session)
	require.Equal(t, f.Token(), int64(ek.ModifyIndex), "the term's token is the election key's ModifyIndex")

	vk, _, err := raw.Get(key+"/locks/"+ek.Session, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.NotNil(t, vk, "the value key")
	require.Equal(t, "addr:1", string(vk.Value))
	require.Equal(t, ek.Session, vk.Session, "the value is bound to the candidate's session")
	keys, _, err := raw.Keys(key+"/", "", nil)
	require.NoError(t, err)
	require.Equal(t, []string{key + "/locks/" + ek.Session}, keys, "nothing else beside the election key")

	// A full ListDir: the elections directory and the election's
	// directories are Ephemeral; svc/a, both a key and the directory of
	// its value key, is one entry.
	entries, err := c.ListDir(ctx, "", true)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "elections", Type: topo.TypeDirectory, Ephemeral: true}}, entries)
	entries, err = c.ListDir(ctx, "elections/svc", true)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "a", Type: topo.TypeDirectory, Ephemeral: true}}, entries)
	entries, err = c.ListDir(ctx, "elections/svc/a", true)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "locks", Type: topo.TypeDirectory, Ephemeral: true}}, entries)

	require.NoError(t, p.Proclaim(ctx, []byte("addr:2")))
	ek2, _, err := raw.Get(key, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.Equal(t, ek.ModifyIndex, ek2.ModifyIndex, "Proclaim must not write the election key")
	require.Equal(t, "the-id", string(ek2.Value))
	vk, _, err = raw.Get(key+"/locks/"+ek.Session, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.Equal(t, "addr:2", string(vk.Value))

	require.NoError(t, p.Resign(ctx))
	keys, _, err = raw.Keys(key, "", &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.Empty(t, keys, "Resign deletes the election key and the value key")

	// WaitForLeadership publishes no value, and removes a value left by
	// the session (here written by hand, as a stale one would be).
	_, err = raw.Put(&api.KVPair{Key: key + "/locks/stale", Value: []byte("x")}, nil)
	require.NoError(t, err)
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	l, err := p.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "the-id", l.ID)
	require.Nil(t, l.Value, "a WaitForLeadership leader publishes no value")
}

// TestLeaderOfVitessHolder: a Vitess-style holder (api.Lock on the
// election key with the id as value) is reported with its id and no value,
// and a Campaign waits for it.
func TestLeaderOfVitessHolder(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	cl := rawClient(t)
	l, err := cl.LockOpts(&api.LockOptions{Key: root + "/elections/e", Value: []byte("vitess-1")})
	require.NoError(t, err)
	_, err = l.Lock(nil)
	require.NoError(t, err)
	p, err := c.NewLeaderParticipation("e", "tk")
	require.NoError(t, err)
	defer p.Stop()
	got := waitLeader(t, p, "vitess-1", "")
	require.Nil(t, got.Value)
	cctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err = p.Campaign(cctx, []byte("v"))
	require.True(t, topo.IsErrType(err, topo.Timeout), "Campaign while Vitess leads: %v", err)
	require.NoError(t, l.Unlock())
	_, err = p.Campaign(t.Context(), []byte("v"))
	require.NoError(t, err)
	waitLeader(t, p, "tk", "v")
}

// TestProclaimAfterKeyDeleted: a leader whose election key an operator
// deleted cannot proclaim (the check-index fails in the store even before
// the monitor notices), and its value is not written.
func TestProclaimAfterKeyDeleted(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	raw := rawClient(t).KV()
	p, err := c.NewLeaderParticipation("e", "id1")
	require.NoError(t, err)
	defer p.Stop()
	lctx, err := p.Campaign(t.Context(), []byte("v1"))
	require.NoError(t, err)
	ek, _, err := raw.Get(root+"/elections/e", nil)
	require.NoError(t, err)
	_, err = raw.Delete(root+"/elections/e", nil)
	require.NoError(t, err)
	err = p.Proclaim(t.Context(), []byte("v2"))
	require.True(t, topo.IsErrType(err, topo.NotLeader), "Proclaim after the key was deleted: %v", err)
	<-lctx.Done()
	vk, _, err := raw.Get(root+"/elections/e/locks/"+ek.Session, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	if vk != nil {
		require.Equal(t, "v1", string(vk.Value), "a refused Proclaim must not write the value")
	}
	_, err = p.Leader(t.Context())
	require.True(t, topo.IsErrType(err, topo.NoLeader), "Leader after the key was deleted: %v", err)
}

// TestObserveAcrossReconnect cuts the observer's connection to the agent
// while the leader changes, heals it, and checks that Observe resumes,
// ends at the current leader, and never shows the resigned leader after
// its successor.
func TestObserveAcrossReconnect(t *testing.T) {
	root := testRoot(t)
	proxy, err := faultproxy.New(agent.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	opts := testOptions()
	opts.Address = proxy.Addr()
	obsConn, err := NewConn(opts, root)
	require.NoError(t, err)
	t.Cleanup(obsConn.Close)
	c1, c2 := newTestConn(t, root), newTestConn(t, root)
	p1, err := c1.NewLeaderParticipation("e", "id1")
	require.NoError(t, err)
	defer p1.Stop()
	p2, err := c2.NewLeaderParticipation("e", "id2")
	require.NoError(t, err)
	defer p2.Stop()
	w, err := obsConn.NewLeaderParticipation("e", "watcher")
	require.NoError(t, err)

	_, err = p1.Campaign(t.Context(), []byte("one"))
	require.NoError(t, err)
	octx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := w.Observe(octx)
	require.NoError(t, err)
	first := <-ch
	require.Equal(t, "id1", first.ID)
	require.Equal(t, "one", string(first.Value))

	proxy.Blackhole()
	require.NoError(t, p1.Resign(t.Context()))
	_, err = p2.Campaign(t.Context(), []byte("two"))
	require.NoError(t, err)
	require.NoError(t, p2.Proclaim(t.Context(), []byte("two-b")))
	proxy.Reset() // drop the connections the blackhole held
	proxy.Heal()

	seen := []topo.Leader{first}
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-ch:
			require.True(t, ok, "Observe closed")
			seen = append(seen, l)
			if l.ID == "id2" && string(l.Value) == "two-b" {
				moved := false
				for _, e := range seen {
					if e.ID != "id1" {
						moved = true
					}
					require.False(t, moved && e.ID == "id1", "id1 observed after it resigned: %v", seen)
				}
				return
			}
		case <-timeout:
			t.Fatalf("Observe did not reach the current leader after the heal: %v", seen)
		}
	}
}

// TestObserveCoalesces: a reader that does not read while many Proclaims
// happen finds the latest value last.
func TestObserveCoalesces(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	p, err := c.NewLeaderParticipation("e", "id1")
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.Campaign(t.Context(), []byte("v0"))
	require.NoError(t, err)
	octx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ch, err := p.Observe(octx)
	require.NoError(t, err)
	for i := 1; i <= 50; i++ {
		require.NoError(t, p.Proclaim(t.Context(), fmt.Appendf(nil, "v%d", i)))
	}
	waitLeader(t, p, "id1", "v50")
	var last topo.Leader
	for last.ID != "id1" || string(last.Value) != "v50" {
		select {
		case last = <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("Observe did not end at v50, last %+v", last)
		}
	}
}

// TestResumeInfoAndSessionOwnership: ResumeInfo is NoNode for a waiting
// candidate (Consul keeps no entry for it), names the session and token
// of the leader; a resumed participation renews the adopted session and
// destroys it on Stop.
func TestResumeInfoAndSessionOwnership(t *testing.T) {
	root := testRoot(t)
	c1, c2 := newTestConn(t, root), newTestConn(t, root)
	p1, err := c1.NewLeaderParticipation("e", "id1")
	require.NoError(t, err)
	_, err = p1.Campaign(t.Context(), []byte("v"))
	require.NoError(t, err)
	info, err := p1.ResumeInfo()
	require.NoError(t, err)
	var ri resumeInfo
	require.NoError(t, json.Unmarshal(info, &ri))
	f, err := p1.Term()
	require.NoError(t, err)
	require.Equal(t, uint64(f.Token()), ri.Token)
	require.Equal(t, root+"/elections/e", ri.Key)

	r, err := c2.ResumeLeaderParticipation(t.Context(), "e", "id1", info)
	require.NoError(t, err)
	rf, err := r.Term()
	require.NoError(t, err)
	require.Equal(t, f.Token(), rf.Token())
	ctx2, err := r.Campaign(t.Context(), []byte("v2"))
	require.NoError(t, err)
	require.NoError(t, ctx2.Err())
	waitLeader(t, r, "id1", "v2")
	_, err = c2.ResumeLeaderParticipation(t.Context(), "e", "id1", info)
	require.True(t, topo.IsErrType(err, topo.NodeExists), "a second Resume on the same Conn: %v", err)
	r.Stop()
	sess := rawClient(t).Session()
	entry, _, err := sess.Info(ri.Session, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.Nil(t, entry, "Stop of a resumed participation destroys the adopted session")
	_, err = c2.ResumeLeaderParticipation(t.Context(), "e", "id1", info)
	require.True(t, topo.IsErrType(err, topo.LockLost), "Resume of an ended session: %v", err)
}

// TestStopDeletesKey: Stop cancels the participation's context before it
// ends the term, which ends the term's monitor; the monitor must leave the
// deletion to Stop (an earlier version let the monitor win the race and
// Stop then deleted nothing, leaving the key held by the Conn's session).
func TestStopDeletesKey(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	raw := rawClient(t).KV()
	for i := range 40 {
		p, err := c.NewLeaderParticipation("e", "id")
		require.NoError(t, err)
		lctx, err := p.Campaign(t.Context(), []byte("v"))
		require.NoError(t, err)
		_ = lctx.Done() // the term's monitor runs (it starts on first use)
		p.Stop()
		keys, _, err := raw.Keys(root+"/elections/e", "", &api.QueryOptions{RequireConsistent: true})
		require.NoError(t, err)
		require.Emptyf(t, keys, "iteration %d: Stop left keys behind", i)
	}
}
