package etcd2topo

import (
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestVitessLeaderIsTheOldestEntry: the leader topokit reads in a
// Vitess-layout election is the entry with the lowest ModRevision, as
// Vitess's GetCurrentLeaderID reads it, whatever the entries' names:
// between entries put by one foreign transaction (one ModRevision) the
// first by name, as etcd sorts a few keys; ahead of a younger entry with
// a smaller name; and, once rewritten, behind the others (its
// ModRevision moved). A key without a lease, or one level deeper, is no
// entry: alone, nobody leads.
func TestVitessLeaderIsTheOldestEntry(t *testing.T) {
	ctx := testCtx(t)
	root := newRoot()
	c := openConn(t, serverAddr, root)
	cli := rawClient(t, serverAddr)
	lease, err := cli.Grant(ctx, 60)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = cli.Revoke(ctx, lease.ID) })
	p, err := c.NewLeaderParticipation("svc", "observer")
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	prefix := root + "/elections/svc/locks/"
	put := func(name, id string) {
		t.Helper()
		_, err := cli.Put(ctx, prefix+name, id, clientv3.WithLease(lease.ID))
		require.NoError(t, err)
	}
	requireLeader := func(want string, vitessAgrees bool) {
		t.Helper()
		id, err := p.GetCurrentLeaderID(ctx)
		require.NoError(t, err)
		require.Equal(t, want, id)
		l, err := p.Leader(ctx)
		if want == "" {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		require.Equal(t, want, l.ID)
		if vitessAgrees {
			require.Equal(t, want, vitessLeaderID(t, cli, root, "svc"), "Vitess's leader")
		}
	}

	_, err = cli.Put(ctx, prefix+"0-unleased", "unleased")
	require.NoError(t, err)
	put("0-deeper/key", "deeper")
	requireLeader("", false)
	_, err = cli.Delete(ctx, prefix+"0-", clientv3.WithPrefix())
	require.NoError(t, err)

	_, err = cli.Txn(ctx).Then(
		clientv3.OpPut(prefix+"zz", "id-zz", clientv3.WithLease(lease.ID)),
		clientv3.OpPut(prefix+"aa", "id-aa", clientv3.WithLease(lease.ID)),
	).Commit()
	require.NoError(t, err)
	requireLeader("id-aa", true)
	put("00", "id-00")
	requireLeader("id-aa", true)
	put("aa", "id-aa2")
	requireLeader("id-zz", true)
	_, err = cli.Delete(ctx, prefix+"zz")
	require.NoError(t, err)
	requireLeader("id-00", true)
}
