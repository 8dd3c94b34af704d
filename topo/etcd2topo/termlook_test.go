package etcd2topo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
)

// TestTermEndedBeforeFirstLook runs the shared scenario (a term ended in
// etcd before its leader looked at it: its key deleted, its lease revoked
// by a raw client, Stop) on the package's etcd member.
func TestTermEndedBeforeFirstLook(t *testing.T) {
	root := newRoot()
	cli := rawClient(t, serverAddr)
	// termKV reads the election's only entry (the term's key), without
	// going through the leader's Conn.
	termKV := func(t *testing.T, election string) (string, clientv3.LeaseID) {
		resp, err := cli.Get(context.Background(), root+"/elections/"+election+"/locks/", clientv3.WithPrefix())
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1, "the election's entries")
		return string(resp.Kvs[0].Key), clientv3.LeaseID(resp.Kvs[0].Lease)
	}
	test.TermEndedBeforeFirstLook(t, func(t *testing.T) topo.Conn { return openConn(t, serverAddr, root) }, test.TermEnd{
		DeleteTerm: func(t *testing.T, _ topo.Conn, election string) {
			key, _ := termKV(t, election)
			_, err := cli.Delete(context.Background(), key)
			require.NoError(t, err)
		},
		LoseSession: func(t *testing.T, _ topo.Conn, election string) {
			_, lease := termKV(t, election)
			_, err := cli.Revoke(context.Background(), lease)
			require.NoError(t, err)
		},
	})
}
