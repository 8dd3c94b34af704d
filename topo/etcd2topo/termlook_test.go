package etcd2topo

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
)

// TestTermEndedBeforeFirstLook runs the shared scenario (a term ended in
// etcd before its leader looked at it: its key deleted, its lease revoked
// by a raw client, Stop) on the package's etcd member; with compacted,
// the deletion is also compacted away before the leader looks, so the
// term's watch, opened only then, cannot start from the term's token.
func TestTermEndedBeforeFirstLook(t *testing.T) {
	for _, compacted := range []bool{false, true} {
		t.Run(fmt.Sprintf("compacted=%v", compacted), func(t *testing.T) { termEndedBeforeFirstLook(t, compacted) })
	}
}

func termEndedBeforeFirstLook(t *testing.T, compacted bool) {
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
			if compacted { // a later write, so that the deletion is compacted too
				resp, err := cli.Put(context.Background(), root+"/compaction-mark", "x")
				require.NoError(t, err)
				_, err = cli.Compact(context.Background(), resp.Header.Revision, clientv3.WithCompactPhysical())
				require.NoError(t, err)
			}
		},
		LoseSession: func(t *testing.T, _ topo.Conn, election string) {
			_, lease := termKV(t, election)
			_, err := cli.Revoke(context.Background(), lease)
			require.NoError(t, err)
		},
	})
}
