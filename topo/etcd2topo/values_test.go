package etcd2topo

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// vitessLeaderID reads the leader's id as Vitess's etcd GetCurrentLeaderID
// does: the prefix elections/<name>/ sorted by ModRevision ascending,
// limit 1.
func vitessLeaderID(t *testing.T, cli *clientv3.Client, root, name string) string {
	t.Helper()
	resp, err := cli.Get(context.Background(), root+"/elections/"+name+"/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	require.NoError(t, err)
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// TestValuesLayout: the candidate entry holds exactly the id, the value
// lives at elections/\x00values/<name>/<lease id> on the entry's lease,
// created in the same transaction; Proclaim rewrites only the value; the
// values are no file, no ListDir entry; Resign deletes both.
func TestValuesLayout(t *testing.T) {
	ctx := testCtx(t)
	root := newRoot()
	c := openConn(t, serverAddr, root)
	cli := rawClient(t, serverAddr)
	_, err := c.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
	p, err := c.NewLeaderParticipation("svc/a", "id1")
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	_, err = p.Campaign(ctx, []byte("the value"))
	require.NoError(t, err)

	cands, err := cli.Get(ctx, root+"/elections/svc/a/locks/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, cands.Kvs, 1)
	cand := cands.Kvs[0]
	require.Equal(t, "id1", string(cand.Value), "the candidate entry holds exactly the id")
	name := string(cand.Key[len(root+"/elections/svc/a/locks/"):])
	require.Equal(t, strconv.FormatInt(cand.Lease, 10), name)

	vals, err := cli.Get(ctx, root+"/elections/\x00values/svc/a/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, vals.Kvs, 1)
	v := vals.Kvs[0]
	require.Equal(t, root+"/elections/\x00values/svc/a/"+name, string(v.Key))
	require.Equal(t, "the value", string(v.Value))
	require.Equal(t, cand.Lease, v.Lease, "the value is on the candidate's lease")
	require.Equal(t, cand.CreateRevision, v.CreateRevision, "the value is written with the candidacy")

	// Nothing else under elections/ but the entry and the value.
	all, err := cli.Get(ctx, root+"/elections/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.EqualValues(t, 2, all.Count)
	require.Equal(t, "id1", vitessLeaderID(t, cli, root, "svc/a"))
	require.Equal(t, "id1", vitessLeaderID(t, cli, root, "svc"), "Vitess's read of a parent election reads the nested candidate, as before values")

	require.NoError(t, p.Proclaim(ctx, []byte("v2")))
	cands2, err := cli.Get(ctx, string(cand.Key))
	require.NoError(t, err)
	require.Equal(t, cand.ModRevision, cands2.Kvs[0].ModRevision, "Proclaim must not touch the candidate entry")
	v2, err := cli.Get(ctx, string(v.Key))
	require.NoError(t, err)
	require.Equal(t, "v2", string(v2.Kvs[0].Value))

	kvs, err := c.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, kvs, 1)
	require.Equal(t, "f", kvs[0].Path)
	entries, err := c.ListDir(ctx, "elections", true)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "svc", Type: topo.TypeDirectory, Ephemeral: true}}, entries)

	l, err := p.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, topo.Leader{ID: "id1", Value: []byte("v2"), Token: cand.CreateRevision}, l)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, p.Resign(cctx), "Resign with a cancelled ctx")
	all, err = cli.Get(ctx, root+"/elections/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Zero(t, all.Count, "Resign deletes the entry and its value")
}

// TestValuesVitessReadsIDs: with more than 12 candidates campaigning with
// values (etcd's sort by ModRevision is not stable beyond 12 keys), the
// Vitess read of the leader's id is the leader's id, never a value.
func TestValuesVitessReadsIDs(t *testing.T) {
	ctx := testCtx(t)
	root := newRoot()
	cli := rawClient(t, serverAddr)
	var ps []topo.LeaderParticipation
	for i := range 20 {
		c := openConn(t, serverAddr, root)
		p, err := c.NewLeaderParticipation("queue", fmt.Sprint("id", i))
		require.NoError(t, err)
		t.Cleanup(p.Stop)
		ps = append(ps, p)
		go func() { _, _ = p.Campaign(ctx, []byte(fmt.Sprint("value", i))) }()
		// Join in order: each after the one before is in the queue.
		require.Eventually(t, func() bool {
			resp, err := cli.Get(ctx, root+"/elections/queue/locks/", clientv3.WithPrefix(), clientv3.WithCountOnly())
			return err == nil && resp.Count == int64(i+1)
		}, time.Minute, time.Millisecond)
	}
	for i := range 20 {
		require.Equal(t, fmt.Sprint("id", i), vitessLeaderID(t, cli, root, "queue"))
		l, err := ps[i].Leader(ctx)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint("id", i), l.ID)
		require.Equal(t, fmt.Sprint("value", i), string(l.Value))
		require.NoError(t, ps[i].Resign(ctx))
	}
}

// TestValuesCampaignCtxWithdraws: a Campaign whose ctx ends deletes its
// entry and its value.
func TestValuesCampaignCtxWithdraws(t *testing.T) {
	ctx := testCtx(t)
	root := newRoot()
	c1, c2 := openConn(t, serverAddr, root), openConn(t, serverAddr, root)
	cli := rawClient(t, serverAddr)
	p1, err := c1.NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	t.Cleanup(p1.Stop)
	_, err = p1.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	p2, err := c2.NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	t.Cleanup(p2.Stop)
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := p2.Campaign(cctx, []byte("v2"))
		errc <- err
	}()
	require.Eventually(t, func() bool {
		resp, err := cli.Get(ctx, root+"/elections/\x00values/e/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 2
	}, time.Minute, time.Millisecond)
	cancel()
	require.True(t, topo.IsErrType(<-errc, topo.Interrupted))
	// The value shows with the entry, in one transaction whose answer
	// may still be on its way when ctx ends: a Create whose outcome is
	// unknown is undone in the background (driver.remove), so the entry
	// goes soon after Campaign returns, not necessarily before.
	for _, prefix := range []string{root + "/elections/e/locks/", root + "/elections/\x00values/e/"} {
		require.Eventually(t, func() bool {
			resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
			return err == nil && resp.Count == 1
		}, 30*time.Second, 5*time.Millisecond, prefix)
	}
}

// TestValuesObserveAcrossReconnect: an observer whose connection is cut
// (Blackhole, then Reset and Heal) while the leader proclaims, resigns
// and another takes over ends at the current state, never sends the
// resigned leader after the new one, and never a value the leader did
// not publish as current.
func TestValuesObserveAcrossReconnect(t *testing.T) {
	ctx := testCtx(t)
	root := newRoot()
	px, err := faultproxy.New(serverAddr)
	require.NoError(t, err)
	t.Cleanup(func() {
		px.Heal()
		px.Close()
	})
	c1, c2 := openConn(t, serverAddr, root), openConn(t, serverAddr, root)
	co := openConn(t, px.Addr(), root)
	p1, err := c1.NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	t.Cleanup(p1.Stop)
	p2, err := c2.NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	t.Cleanup(p2.Stop)
	w, err := co.NewLeaderParticipation("e", "watcher")
	require.NoError(t, err)
	_, err = p1.Campaign(ctx, []byte("a"))
	require.NoError(t, err)
	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	obs, err := w.Observe(octx)
	require.NoError(t, err)
	first := nextLeader(t, obs, func(topo.Leader) bool { return true })
	require.Equal(t, "one", first.ID)
	require.Equal(t, "a", string(first.Value))

	px.Blackhole()
	require.NoError(t, p1.Proclaim(ctx, []byte("b")))
	won := make(chan error, 1)
	go func() {
		_, err := p2.Campaign(ctx, []byte("c"))
		won <- err
	}()
	require.Eventually(t, func() bool {
		l, err := p1.Leader(ctx)
		return err == nil && l.ID == "one"
	}, time.Minute, time.Millisecond)
	require.NoError(t, p1.Resign(ctx))
	require.NoError(t, <-won)
	px.Reset()
	px.Heal()

	var seen []topo.Leader
	last := nextLeader(t, obs, func(l topo.Leader) bool {
		seen = append(seen, l)
		return l.ID == "two"
	})
	require.Equal(t, "c", string(last.Value))
	for _, l := range seen {
		switch l.ID {
		case "one":
			require.Contains(t, []string{"a", "b"}, string(l.Value))
		case "two":
			require.Equal(t, "c", string(l.Value))
		default:
			require.Empty(t, l.ID, "only one, two or nobody lead: %v", seen)
		}
	}
	// Nothing after the new leader names the resigned one.
	require.NoError(t, p2.Proclaim(ctx, []byte("d")))
	l := nextLeader(t, obs, func(l topo.Leader) bool {
		require.NotEqual(t, "one", l.ID, "the resigned leader was sent after the new one")
		return string(l.Value) == "d"
	})
	require.Equal(t, "two", l.ID)
}
