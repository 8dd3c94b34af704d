package topoctl

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/etcdembed"
)

// TestClusterStatusWaitingNode: "cluster status" against a node that waits
// for the other node of its --bootstrap-expect 2 says at once that it is
// waiting for a cluster to form, and for what (the seeds, the number of
// nodes, the ones it sees). It waited out --timeout, then told to start
// the "other members" of a cluster that does not exist yet.
func TestClusterStatusWaitingNode(t *testing.T) {
	t.Parallel()
	env := []string{envImplementation + "=", envServerAddress + "=", envRoot + "=", envCell + "=", envDataDir + "="}
	addrs, err := etcdembed.FreeAddrs(4)
	require.NoError(t, err)
	seeds := "http://" + addrs[0] + ",http://" + addrs[2]
	p := startProcess(t, env, "serve", "--seeds", seeds, "--bootstrap-expect", "2", "--name", "n1",
		"--data-dir", t.TempDir(), "--listen-client-address", addrs[0], "--listen-peer-address", addrs[1])
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve stderr:\n%s", p.errb.String())
		}
	})
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addrs[0])
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, time.Minute, 50*time.Millisecond, "the waiting node listens on its client address")

	tg := target{impl: "etcd2", addr: addrs[0], root: defaultRoot}
	r := tg.fails(t, 1, []string{
		"only a node waiting for a cluster to form: http://" + addrs[0] + " is node n1",
		"no etcd member answers at its seeds (http://" + addrs[2] + ")",
		"it bootstraps a cluster once 2 nodes started with the same --bootstrap-expect 2 see each other (it sees 1: n1)",
		"start the other nodes",
	}, "--timeout", "1m", "cluster", "status")
	require.NotContains(t, r.stderr, "start its other members")
}
