package topoctl

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// elect --ttl D makes the candidacy's lease on etcd D long (whole
// seconds, with a note when D is not), so that leadership lapses D after
// topoctl dies; a backend without a per-connection TTL refuses it.
func TestElectTTL(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	tg := target{impl: "etcd2", addr: addr, root: "/electttl"}
	el := tg.start(t, "elect", "--ttl", "6500ms", "--id", "p1", "e1")
	el.waitOutput(t, "elected p1")
	assert.Contains(t, el.stderr.String(), "etcd leases last whole seconds: leadership lapses 7s after topoctl stops renewing it, not --ttl 6.5s")

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer cli.Close()
	resp, err := cli.Get(t.Context(), "/electttl/elections/e1/locks/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "one candidate")
	ttl, err := cli.TimeToLive(t.Context(), clientv3.LeaseID(resp.Kvs[0].Lease))
	require.NoError(t, err)
	assert.Equal(t, int64(7), ttl.GrantedTTL, "the candidacy's lease has --ttl, rounded up to whole seconds")
	assert.Equal(t, 0, el.stop(t))

	tg.fails(t, 2, []string{"--ttl must be positive"}, "elect", "--ttl", "0s", "e1")
	memoryTarget(t).fails(t, 2, []string{"elect --ttl applies to etcd2, zk2 and consul, not memory"}, "elect", "--ttl", "5s", "e1")
}
