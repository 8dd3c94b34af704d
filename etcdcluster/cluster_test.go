package etcdcluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo/etcd2topo"
)

const bound = 60 * time.Second

func put(t *testing.T, h *harness, names []string, kvs map[string]string) {
	t.Helper()
	cli := h.client(names...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for k, v := range kvs {
		_, err := cli.Put(ctx, k, v)
		require.NoError(t, err)
	}
}

// TestGrowShrink grows a cluster 1 -> 3 -> 5 by starting volunteers and
// raising the ideal size, shrinks it 5 -> 3 by lowering it, and grows it
// back to 5 (re-adding removed members, whose servers restart in the same
// process on the same ports). A client-only node never volunteers. A
// writer and a reader run throughout through a topokit Conn; porcupine
// finds the history linearizable.
func TestGrowShrink(t *testing.T) {
	h := newHarness(t)
	h.start("a")
	cli := h.client("a")
	put(t, h, []string{"a"}, map[string]string{"k1": "v1"})
	conn, err := OpenConn(etcd2topo.Options{Endpoints: []string{h.procs["a"].cfg.ClientURL}, DialTimeout: time.Second}, "/test", 200*time.Millisecond)
	require.NoError(t, err)
	defer conn.Close()
	w := startRegister(t, conn)
	h.start("b", "a")
	h.start("c", "a")
	waitVoters(t, cli, bound, "a", "b", "c")
	sameData(t, cli, bound)

	h.startClientOnly("client", "b")
	h.start("d", "a")
	h.start("e", "b")
	ctx := context.Background()
	require.NoError(t, SetSize(ctx, cli, "", 5))
	waitVoters(t, cli, bound, "a", "b", "c", "d", "e")
	put(t, h, []string{"e"}, map[string]string{"k2": "v2"})
	sameData(t, cli, bound)

	require.NoError(t, SetSize(ctx, cli, "", 3))
	st := waitVoters(t, cli, bound, voterNames(t, cli, 3)...)
	require.Len(t, st.Voters(), 3)
	var removed []string
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		if !slices.Contains(st.Voters(), n) {
			removed = append(removed, n)
		}
	}
	require.Len(t, removed, 2)
	for _, n := range removed {
		eventually(t, bound, n+" stops its server and stays a client", func() (bool, string) {
			return h.procs[n].logHas("this member was removed from the cluster"), ""
		})
	}
	require.NotContains(t, st.Volunteers, "client")
	require.ElementsMatch(t, []string{"a", "b", "c", "d", "e"}, st.Volunteers, "removed members keep volunteering as clients")
	sameData(t, cli, bound)

	require.NoError(t, SetSize(ctx, cli, "", 5))
	waitVoters(t, cli, bound, "a", "b", "c", "d", "e")
	sameData(t, cli, bound)
	w.waitAcked(t, w.acked.Load()+20)
	w.check(t, conn)
	for _, n := range removed {
		// Re-added in the same process: its server bound the same ports
		// again.
		require.GreaterOrEqual(t, h.procs[n].logCount("embedded etcd server started", h.procs[n].cfg.ClientURL), 2, n)
	}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		require.True(t, h.procs[n].running(), "%s still runs", n)
	}
	require.True(t, h.procs["client"].running())
	require.False(t, h.procs["client"].logHas("embedded etcd server started"))
}

// voterNames waits until there are exactly n started voters and no other
// member, and returns their names.
func voterNames(t *testing.T, cli *clientv3.Client, n int) []string {
	t.Helper()
	var names []string
	eventually(t, bound, fmt.Sprintf("%d voters", n), func() (bool, string) {
		st, desc := statusOf(cli)
		if st == nil || len(st.Voters()) != n || len(st.Members) != n {
			return false, desc
		}
		names = st.Voters()
		return true, ""
	})
	return names
}
