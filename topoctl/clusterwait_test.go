package topoctl

import (
	"encoding/json"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/etcdembed"
)

// TestClusterStatusWaitingNode: "cluster status" against a node that waits
// for the other node of its --bootstrap-expect 2 says at once that it is
// waiting for a cluster to form, and for what (the seeds, the number of
// nodes, the ones it sees). It waited out --timeout, then told to start
// the "other members" of a cluster that does not exist yet. "cluster size"
// at such a node says the same at once; it waited out --timeout.
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

	// cluster size says so too, rather than waiting out --timeout for
	// an answer the node never gives.
	r = tg.fails(t, 1, []string{
		"only a node waiting for a cluster to form: http://" + addrs[0] + " is node n1",
	}, "--timeout", "1m", "cluster", "size", "3")
	require.NotContains(t, r.stderr, "deadline exceeded")
}

// TestClusterStatusDeadDecider: without a quorum, "cluster status" does
// not present as the decider a node it cannot reach (the decider of a
// two-member cluster, killed): the decider is "-" (-o json: "") and a line
// (unconfirmed_decider) names the one last recorded. It printed the dead
// node as the decider.
func TestClusterStatusDeadDecider(t *testing.T) {
	t.Parallel()
	env := []string{envImplementation + "=", envServerAddress + "=", envRoot + "=", envCell + "=", envDataDir + "="}
	addrs, err := etcdembed.FreeAddrs(4)
	require.NoError(t, err)
	seeds := "http://" + addrs[0] + ",http://" + addrs[2]
	procs := map[string]*proc{}
	for i, name := range []string{"n1", "n2"} {
		procs[name] = startProcess(t, env, "serve", "--seeds", seeds, "--bootstrap-expect", "2",
			"--name", name, "--data-dir", t.TempDir(),
			"--listen-client-address", addrs[2*i], "--listen-peer-address", addrs[2*i+1])
	}
	clientAddr := map[string]string{"n1": addrs[0], "n2": addrs[2]}
	var st clusterStatusJSON
	require.Eventually(t, func() bool {
		r := target{impl: "etcd2", addr: addrs[0], root: defaultRoot}.run(t, "", "-o", "json", "cluster", "status")
		st = clusterStatusJSON{}
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &st) == nil && st.Quorum && voters(st) == 2 && st.Decider != ""
	}, 3*time.Minute, 200*time.Millisecond)
	dead, _, _ := strings.Cut(st.Decider, "/")
	survivor := map[string]string{"n1": "n2", "n2": "n1"}[dead]
	require.NotEmpty(t, survivor, "decider %q", st.Decider)
	procs[dead].signalAndWait(t, syscall.SIGKILL)

	tg := target{impl: "etcd2", addr: clientAddr[survivor], root: defaultRoot}
	r := tg.fails(t, 1, []string{"no quorum: 1 of 2 voters answer (not answering: " + dead + ")"}, "-o", "json", "cluster", "status")
	var after clusterStatusJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &after), r.stdout)
	require.True(t, after.Stale)
	require.Empty(t, after.Decider, "the killed decider is presented as deciding")
	require.Equal(t, st.Decider, after.UnconfirmedDecider)
	r = tg.fails(t, 1, []string{"no quorum"}, "cluster", "status")
	require.Contains(t, r.stdout, "decider: -\n")
	require.Contains(t, r.stdout, "(no decider shown: the last one recorded, "+st.Decider+", does not answer")
	procs[survivor].signalAndWait(t, syscall.SIGKILL)
}
