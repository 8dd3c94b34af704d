package cli

import (
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/etcdcluster"
	"github.com/topokit/topokit/internal/etcdembed"
)

// TestServeCluster: "serve --cluster" bootstraps a self-managing cluster,
// a second "serve --seeds" node volunteers and becomes a voter, "cluster
// size" and "cluster status" work on it, and Ctrl-C makes a member leave
// the cluster gracefully.
func TestServeCluster(t *testing.T) {
	t.Parallel()
	addrs, err := etcdembed.FreeAddrs(4)
	require.NoError(t, err)
	env := []string{EnvImplementation + "=", EnvServerAddress + "=", EnvRoot + "=", EnvCell + "=", EnvDataDir + "="}
	n1 := startProcess(t, env, "serve", "--cluster", "--name", "n1", "--data-dir", t.TempDir(),
		"--listen-client-address", addrs[0], "--listen-peer-address", addrs[1])
	n1.waitLine(t, "cluster node n1 running")
	tg := target{impl: "etcd2", addr: addrs[0], root: DefaultRoot}

	status := func() etcdcluster.ClusterStatus {
		var st etcdcluster.ClusterStatus
		out := tg.ok(t, "-o", "json", "cluster", "status")
		require.NoError(t, json.Unmarshal([]byte(out), &st), out)
		return st
	}
	voters := func(st etcdcluster.ClusterStatus) []string { return st.Voters() }
	require.Eventually(t, func() bool { st := status(); return len(voters(st)) == 1 && st.Healthy }, time.Minute, 50*time.Millisecond)
	assert.Equal(t, etcdcluster.DefaultIdealSize, status().IdealSize)
	text := tg.ok(t, "cluster", "status")
	assert.Contains(t, text, "n1")
	assert.Contains(t, text, "voter")

	n2 := startProcess(t, env, "serve", "--seeds", "http://"+addrs[0], "--name", "n2", "--data-dir", t.TempDir(),
		"--listen-client-address", addrs[2], "--listen-peer-address", addrs[3])
	n2.waitLine(t, "cluster node n2 running")
	require.Eventually(t, func() bool { return len(voters(status())) == 2 }, 2*time.Minute, 100*time.Millisecond,
		"the volunteer becomes a voter: %+v", status())

	// The data is the same through either member.
	v := tg.ok(t, "put", "/k", "v")
	got := target{impl: "etcd2", addr: addrs[2], root: DefaultRoot}.ok(t, "get", "/k")
	assert.Contains(t, got, "v")
	_ = v

	assert.Contains(t, tg.ok(t, "cluster", "size", "1"), "ideal size set to 1")
	require.Eventually(t, func() bool { st := status(); return st.IdealSize == 1 && len(voters(st)) == 1 }, 2*time.Minute, 100*time.Millisecond,
		"the cluster shrinks to its ideal size: %+v", status())
	tg.fails(t, 2, []string{"at least 1"}, "cluster", "size", "0")

	assert.Equal(t, 0, n2.signalAndWait(t, syscall.SIGTERM), n2.errb.String())
	assert.Equal(t, 0, n1.signalAndWait(t, syscall.SIGINT), n1.errb.String())
	n1.waitLine(t, "leaving the cluster")
}
