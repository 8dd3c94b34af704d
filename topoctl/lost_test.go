package topoctl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// revokeAllLeases ends every lease of the etcd at addr, as a store-side
// session loss would.
func revokeAllLeases(t *testing.T, addr string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}})
	require.NoError(t, err)
	defer cli.Close()
	ls, err := cli.Leases(t.Context())
	require.NoError(t, err)
	require.NotEmpty(t, ls.Leases)
	for _, l := range ls.Leases {
		_, err := cli.Revoke(t.Context(), l.ID)
		require.NoError(t, err)
	}
}

// A lock whose lease the store ends behind the holder's back: lock stops
// the command and fails with LockLost, exit code ExitLockLost (not the
// command's 143).
func TestLockLost(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	tg := target{impl: "etcd2", addr: addr, root: "/" + t.Name()}
	tg.ok(t, "put", "ks/Keyspace", "k")
	holder := tg.start(t, "lock", "--check-interval", "20ms", "ks", "--", "sh", "-c", "echo held; exec sleep 600")
	holder.waitOutput(t, "held\n")
	revokeAllLeases(t, addr)
	code := holder.wait(t)
	assert.Equal(t, ExitLockLost, code, holder.stderr.String())
	assert.Contains(t, holder.stderr.String(), "LockLost")
	assert.Contains(t, holder.stderr.String(), "was lost while the command ran")
	assert.Contains(t, holder.stderr.String(), "the lock was lost: sending SIGTERM")
}

// An election whose lease the store ends behind the leader's back: elect
// prints "lost" and fails with LockLost.
func TestElectLost(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	tg := target{impl: "etcd2", addr: addr, root: "/" + t.Name()}
	a := tg.start(t, "elect", "primary", "--id", "alpha")
	a.waitOutput(t, "elected alpha\n")
	revokeAllLeases(t, addr)
	assert.Equal(t, ExitLockLost, a.wait(t), a.stderr.String())
	assert.Contains(t, a.stdout.String(), "lost alpha\n")
	assert.Contains(t, a.stderr.String(), "LockLost")
}
