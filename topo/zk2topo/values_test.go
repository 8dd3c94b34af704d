package zk2topo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// valuesCtx is the context of the leader values tests.
func valuesCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestValuesLayout checks with a raw client the layout Vitess shares: the
// candidate entry holds exactly the id (what Vitess reads), the value
// lives in the candidate session's ephemeral znode under
// elections/<name>/values/ named by the session, created in the same
// multi (same Czxid), and "values" sorts after every candidate.
func TestValuesLayout(t *testing.T) {
	ctx := valuesCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	p, err := c.NewLeaderParticipation("elec", "id-1")
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.Campaign(ctx, []byte("addr:1"))
	require.NoError(t, err)
	require.NoError(t, p.Proclaim(ctx, []byte("addr:2")))

	dir := root + "/elections/elec"
	children, _, err := raw.Children(dir)
	require.NoError(t, err)
	require.Len(t, children, 2, "one candidate and the values znode: %v", children)
	names := entryNames(children)
	require.Len(t, names, 1)
	data, cst, err := raw.Get(dir + "/" + names[0])
	require.NoError(t, err)
	require.Equal(t, "id-1", string(data), "the candidate entry holds exactly the id")
	require.NotZero(t, cst.EphemeralOwner)
	require.Less(t, names[0], valuesDir, "values sorts after every candidate name")

	vals, _, err := raw.Children(dir + "/" + valuesDir)
	require.NoError(t, err)
	require.Len(t, vals, 1)
	require.True(t, strings.HasPrefix(vals[0], valuePrefix(cst.EphemeralOwner)), "value znode %q named by its session", vals[0])
	vdata, vst, err := raw.Get(dir + "/" + valuesDir + "/" + vals[0])
	require.NoError(t, err)
	require.Equal(t, append([]byte{1}, "addr:2"...), vdata)
	require.Equal(t, cst.EphemeralOwner, vst.EphemeralOwner, "the value lives on the candidate's session")
	require.Equal(t, cst.Czxid, vst.Czxid, "created in the candidate's multi")

	f, err := p.Term()
	require.NoError(t, err)
	require.Equal(t, cst.Czxid, f.Token())

	// Resign removes both at once; the election's znode stays (Vitess
	// creates its candidates there without creating it).
	require.NoError(t, p.Resign(ctx))
	children, _, err = raw.Children(dir)
	require.NoError(t, err)
	require.Empty(t, entryNames(children), "the candidate is gone")
	vals, _, err = raw.Children(dir + "/" + valuesDir)
	if err == nil {
		require.Empty(t, vals, "the value znode is gone")
	} else {
		require.ErrorIs(t, err, zk.ErrNoNode, "the values container may be reaped")
	}
	ok, st, err := raw.Exists(dir)
	require.NoError(t, err)
	require.True(t, ok, "the election's znode outlives its last candidate")
	require.Zero(t, st.EphemeralOwner)
}

// TestValuesListDirChecksContextFirst: ListDir checks ctx before the path,
// in backendkit's order.
func TestValuesListDirChecksContextFirst(t *testing.T) {
	c := openConn(t, []string{testServer}, freshRoot(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.ListDir(ctx, "a/../b", false)
	require.ErrorIs(t, err, topo.Interrupted)
	_, err = c.ListDir(context.Background(), "a/../b", false)
	require.ErrorIs(t, err, topo.InvalidPath)
}

// TestValuesObserveAcrossSessionLoss: an observer whose Conn is cut off
// past its session (it starts a new one) ends at the current leader after
// the handovers it missed, never showing the resigned one after its
// successor, and never two leaders with one token.
func TestValuesObserveAcrossSessionLoss(t *testing.T) {
	ctx := valuesCtx(t)
	root := freshRoot(t)
	px, err := faultproxy.New(testServer)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	oc := openConn(t, []string{px.Addr()}, root)
	c1 := openConn(t, []string{testServer}, root)
	c2 := openConn(t, []string{testServer}, root)
	p1, err := c1.NewLeaderParticipation("elec", "id1")
	require.NoError(t, err)
	defer p1.Stop()
	p2, err := c2.NewLeaderParticipation("elec", "id2")
	require.NoError(t, err)
	defer p2.Stop()
	w, err := oc.NewLeaderParticipation("elec", "watcher")
	require.NoError(t, err)

	_, err = p1.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := w.Observe(octx)
	require.NoError(t, err)
	var evs []topo.Leader
	next := func() topo.Leader {
		select {
		case l, ok := <-ch:
			require.True(t, ok, "Observe closed")
			evs = append(evs, l)
			return l
		case <-time.After(time.Minute):
			t.Fatalf("no Observe event; events %v", evs)
		}
		return topo.Leader{}
	}
	first := next()
	require.Equal(t, "id1", first.ID)
	require.Equal(t, "v1", string(first.Value))

	old, err := oc.session("")
	require.NoError(t, err)
	px.Blackhole()
	require.NoError(t, p1.Resign(ctx))
	_, err = p2.Campaign(ctx, []byte("v2"))
	require.NoError(t, err)
	require.NoError(t, p2.Proclaim(ctx, []byte("v2b")))
	select {
	case <-old.lost:
	case <-time.After(4 * testSessionTimeout):
		t.Fatal("the observer's session was not given up while cut off")
	}
	// Drop what the proxy held (the old client's reconnect attempts: a
	// reconnect of a session with watches races in go-zookeeper v1.0.4,
	// see the Makefile), then let the Conn's next session through.
	px.Reset()
	px.Heal()
	for {
		l := next()
		if l.ID == "id2" && string(l.Value) == "v2b" {
			break
		}
	}
	tokens := map[int64]string{}
	moved := false
	for _, e := range evs {
		if e.ID == "" {
			continue
		}
		if id, ok := tokens[e.Token]; ok {
			require.Equal(t, id, e.ID, "two leaders with one token: %v", evs)
		}
		tokens[e.Token] = e.ID
		if e.ID == "id2" {
			moved = true
		}
		require.False(t, moved && e.ID == "id1", "the resigned leader observed after its successor: %v", evs)
	}
	tok, err := p2.Term()
	require.NoError(t, err)
	require.Equal(t, tok.Token(), evs[len(evs)-1].Token)
}

// TestValuesResumeWithoutLeading: a waiting candidate resumed on another
// Conn keeps its place (it does not lead while the leader leads) and
// leads when the leader resigns.
func TestValuesResumeWithoutLeading(t *testing.T) {
	ctx := valuesCtx(t)
	p1, _, r := resumedWaiter(ctx, t)
	got := make(chan error, 1)
	go func() {
		_, err := r.WaitForLeadership()
		got <- err
	}()
	require.NoError(t, p1.Resign(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the resumed candidate did not lead after the leader resigned")
	}
	l, err := r.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "id2", l.ID)
	require.Equal(t, "v2", string(l.Value), "the resumed candidate keeps its value")
}

// resumedWaiter: p1 leads election "elec" (value "v1") on a Conn, and
// candidate id2 (value "v2"), queued behind it by a Conn whose process
// then vanished (its proxy blackholed), is resumed as r on a third Conn,
// c3. Both participants are stopped when t ends.
func resumedWaiter(ctx context.Context, t *testing.T) (p1 topo.LeaderParticipation, c3 *Conn, r topo.LeaderParticipation) {
	t.Helper()
	root := freshRoot(t)
	px, err := faultproxy.New(testServer)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	c1 := openConn(t, []string{testServer}, root)
	c2 := openConn(t, []string{px.Addr()}, root) // the process that "restarts"
	c3 = openConn(t, []string{testServer}, root)
	p1, err = c1.NewLeaderParticipation("elec", "id1")
	require.NoError(t, err)
	t.Cleanup(p1.Stop)
	_, err = p1.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	p2, err := c2.NewLeaderParticipation("elec", "id2")
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _, _ = p2.Campaign(cctx, []byte("v2")) }()
	var info []byte
	require.Eventually(t, func() bool {
		info, err = p2.ResumeInfo()
		return err == nil
	}, time.Minute, time.Millisecond)
	px.Blackhole() // the old process is gone (it must not take the session back)
	r, err = c3.ResumeLeaderParticipation(ctx, "elec", "id2", info)
	require.NoError(t, err)
	t.Cleanup(r.Stop)
	return p1, c3, r
}

// TestValuesReapOrphanValue: the clean-up after a candidate create whose
// answer was lost deletes the session's value znodes whose candidate is
// gone, and keeps the live candidate's.
func TestValuesReapOrphanValue(t *testing.T) {
	ctx := valuesCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	p, err := c.NewLeaderParticipation("elec", "id1")
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.Campaign(ctx, []byte("live"))
	require.NoError(t, err)
	s, err := c.session("")
	require.NoError(t, err)
	dir := root + "/elections/elec"
	// An orphan: a value znode of the session without its candidate.
	orphan, err := s.zk.Create(dir+"/"+valuesDir+"/"+valuePrefix(s.zk.SessionID()), encodeValue([]byte("orphan"), true), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	c.reapOrphans(s, dir)
	ok, _, err := raw.Exists(orphan)
	require.NoError(t, err)
	require.False(t, ok, "the orphan value znode is deleted")
	l, err := p.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "live", string(l.Value), "the live candidate's value is kept")
}

// TestValuesResignWithdrawsWaitingCampaign: Resign makes a Campaign
// waiting behind another leader return Interrupted, and its entry goes.
func TestValuesResignWithdrawsWaitingCampaign(t *testing.T) {
	ctx := valuesCtx(t)
	root := freshRoot(t)
	c1 := openConn(t, []string{testServer}, root)
	c2 := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	p1, err := c1.NewLeaderParticipation("elec", "id1")
	require.NoError(t, err)
	defer p1.Stop()
	_, err = p1.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	p2, err := c2.NewLeaderParticipation("elec", "id2")
	require.NoError(t, err)
	defer p2.Stop()
	got := make(chan error, 1)
	go func() {
		_, err := p2.Campaign(ctx, []byte("v2"))
		got <- err
	}()
	require.Eventually(t, func() bool {
		_, err := p2.ResumeInfo()
		return err == nil
	}, time.Minute, time.Millisecond)
	require.NoError(t, p2.Resign(ctx))
	select {
	case err := <-got:
		require.ErrorIs(t, err, topo.Interrupted)
	case <-time.After(time.Minute):
		t.Fatal("the waiting Campaign did not return after Resign")
	}
	children, _, err := raw.Children(root + "/elections/elec")
	require.NoError(t, err)
	require.Len(t, entryNames(children), 1, "only the leader's entry is left")
	// p2 may campaign again: it leads after p1 resigns.
	go func() {
		_, err := p2.Campaign(ctx, []byte("v2b"))
		got <- err
	}()
	require.Eventually(t, func() bool {
		_, err := p2.ResumeInfo()
		return err == nil
	}, time.Minute, time.Millisecond)
	require.NoError(t, p1.Resign(ctx))
	require.NoError(t, <-got)
	l, err := p2.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "v2b", string(l.Value))
}
