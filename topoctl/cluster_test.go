package topoctl

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/etcdcluster"
	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// TestServeCluster: "serve --cluster" bootstraps a self-managing cluster,
// "cluster status" and "cluster size" work on it, a "serve --seeds
// --client-only" node joins it as a client (never a volunteer), and Ctrl-C
// makes the member leave gracefully. (Growing and shrinking the membership
// itself is tested in package etcdcluster, with nodes in separate
// processes.)
func TestServeCluster(t *testing.T) {
	t.Parallel()
	addrs, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	env := []string{envImplementation + "=", envServerAddress + "=", envRoot + "=", envCell + "=", envDataDir + "="}
	n1 := startProcess(t, env, "--log-level", "info", "serve", "--cluster", "--name", "n1", "--data-dir", t.TempDir(),
		"--listen-client-address", addrs[0], "--listen-peer-address", addrs[1])
	n1.waitLine(t, "cluster node n1 running")
	tg := target{impl: "etcd2", addr: addrs[0], root: defaultRoot}

	// With no --log-level, a node still says why it waits or does not
	// volunteer (on stderr): seeds where no member answers, ports it
	// cannot bind (its peer address is n1's client address).
	more, err := etcdembed.FreeAddrs(5)
	require.NoError(t, err)
	waiting := startProcess(t, env, "serve", "--seeds", "http://"+more[0], "--name", "w1", "--data-dir", t.TempDir(),
		"--listen-client-address", more[1], "--listen-peer-address", more[2])
	unbound := startProcess(t, env, "serve", "--seeds", "http://"+addrs[0], "--name", "b1", "--data-dir", t.TempDir(),
		"--listen-client-address", more[3], "--listen-peer-address", addrs[0])
	// And a node given n1's peer address, which the member n1 has.
	notN1 := startProcess(t, env, "serve", "--seeds", "http://"+addrs[0], "--name", "b2", "--data-dir", t.TempDir(),
		"--listen-client-address", more[4], "--listen-peer-address", addrs[1])

	status := func() clusterStatusJSON { return clusterStatus(t, tg) }
	require.Eventually(t, func() bool { st := status(); return voters(st) == 1 && st.Quorum }, 2*time.Minute, 50*time.Millisecond,
		"n1's stderr: %s", n1.errb.String())
	st := status()
	assert.Equal(t, etcdcluster.DefaultIdealSize, st.IdealSize)
	assert.Equal(t, "n1", st.Leader)
	text := tg.ok(t, "cluster", "status")
	assert.Contains(t, text, "n1")
	assert.Contains(t, text, "voter")

	// A client-only node follows the cluster without volunteering.
	c := startProcess(t, env, "serve", "--seeds", "http://"+addrs[0], "--client-only", "--name", "c1", "--data-dir", t.TempDir())
	c.waitLine(t, "cluster node c1 running as a client")
	assert.NotContains(t, status().Volunteers, "c1")
	st = status()
	assert.Equal(t, 1, voters(st))

	_ = tg.ok(t, "put", "/k", "v")
	assert.Contains(t, tg.ok(t, "get", "/k"), "v")
	assert.Contains(t, tg.ok(t, "cluster", "size", "5"), "ideal size set to 5")
	assert.Equal(t, 5, status().IdealSize)
	tg.fails(t, 2, []string{"at least 1"}, "cluster", "size", "0")
	assert.Equal(t, 5, status().IdealSize, "a refused size writes nothing")
	// Above etcd's advised 7 voters only with --force; a size the
	// volunteers cannot fill is not called healthy.
	tg.fails(t, 2, []string{"--force", "7"}, "cluster", "size", "100")
	assert.Equal(t, 5, status().IdealSize, "a refused size writes nothing")
	st = status()
	assert.True(t, st.Quorum)
	assert.False(t, st.Healthy, "one volunteer for an ideal size of 5")
	assert.Contains(t, st.Shortfall, "only 1 node volunteers (1 voter now): start 4 more nodes")
	text = tg.ok(t, "cluster", "status")
	assert.Contains(t, text, "healthy: false")
	assert.Contains(t, text, "below ideal size")
	even := tg.run(t, "", "cluster", "size", "4")
	assert.Equal(t, 0, even.code, even.stderr)
	assert.Contains(t, even.stderr, "warning: an even size (4)")
	assert.Equal(t, 4, status().IdealSize)
	_ = tg.ok(t, "cluster", "size", "8", "--force")
	assert.Equal(t, 8, status().IdealSize)
	tg.fails(t, 2, []string{"--client-only needs --seeds"}, "serve", "--client-only", "--name", "x", "--data-dir", t.TempDir())
	tg.fails(t, 2, []string{"--bootstrap-expect needs --seeds"}, "serve", "--cluster", "--bootstrap-expect", "3", "--name", "x", "--data-dir", t.TempDir())
	tg.fails(t, 2, []string{"--bootstrap-expect needs --seeds"}, "serve", "--seeds", "http://127.0.0.1:1", "--bootstrap-expect", "9", "--name", "x", "--data-dir", t.TempDir())
	// A former member's data directory (moved aside when it left) does
	// not bootstrap a second cluster (etcdcluster's
	// TestLeftBootstrapNodeNoSecondCluster runs the whole story).
	former := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(former, "member.removed-1"), 0o700))
	fa, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	tg.fails(t, 1, []string{"the data directory is a former member's", "give seeds"}, "serve", "--cluster", "--name", "x", "--data-dir", former,
		"--listen-client-address", fa[0], "--listen-peer-address", fa[1])

	for _, w := range []struct {
		p    *proc
		says string
	}{
		{waiting, "waiting for a cluster: no etcd member answers at the seeds"},
		{unbound, "not volunteering: this node cannot bind its ports"},
		{notN1, `not volunteering: a member of another name has this node's peer URL; waiting until it is removed (if that node still runs, give this one another peer address)" node=b2 member=n1`},
	} {
		require.Eventually(t, func() bool { return strings.Contains(w.p.errb.String(), w.says) }, time.Minute, 50*time.Millisecond,
			"a node at the default --log-level did not say %q; its stderr: %s", w.says, w.p.errb.String())
		w.p.signalAndWait(t, syscall.SIGINT)
	}

	assert.Equal(t, 0, c.signalAndWait(t, syscall.SIGINT), c.errb.String())
	assert.Equal(t, 0, n1.signalAndWait(t, syscall.SIGINT), n1.errb.String())
	n1.waitLine(t, "leaving the cluster")
}

// voters counts the started voting members of st.
func voters(st clusterStatusJSON) int {
	n := 0
	for _, m := range st.Members {
		if m.Started && !m.Learner {
			n++
		}
	}
	return n
}

// TestServeSymmetricStart starts 2, then 3, "topoctl serve" processes at
// the same time, all with the same --seeds (every node's client URL, its
// own included) and --bootstrap-expect N: they form exactly one cluster.
// Every node's address answers "cluster status" with the same cluster ID
// and the N nodes as started voters in the end, and no address ever
// answers with another cluster ID meanwhile (two bootstraps would).
func TestServeSymmetricStart(t *testing.T) {
	t.Parallel()
	env := []string{envImplementation + "=", envServerAddress + "=", envRoot + "=", envCell + "=", envDataDir + "="}
	for _, size := range []int{2, 3} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			addrs, err := etcdembed.FreeAddrs(2 * size)
			require.NoError(t, err)
			var seeds, names []string
			for i := range size {
				seeds = append(seeds, "http://"+addrs[2*i])
				names = append(names, fmt.Sprintf("n%d", i+1))
			}
			procs := make([]*proc, size)
			for i, name := range names {
				procs[i] = startProcess(t, env, "--log-level", "info", "serve", "--seeds", strings.Join(seeds, ","),
					"--bootstrap-expect", fmt.Sprint(size), "--name", name, "--data-dir", t.TempDir(),
					"--listen-client-address", addrs[2*i], "--listen-peer-address", addrs[2*i+1])
			}
			t.Cleanup(func() {
				if t.Failed() {
					for i, p := range procs {
						t.Logf("%s (client %s, peer %s) stderr:\n%s", names[i], addrs[2*i], addrs[2*i+1], p.errb.String())
					}
				}
			})
			seen := map[string][]string{} // cluster ID -> addresses that answered with it
			formed := func() bool {
				done := true
				for i := range size {
					tg := target{impl: "etcd2", addr: addrs[2*i], root: defaultRoot}
					r := tg.run(t, "", "-o", "json", "cluster", "status")
					var st clusterStatusJSON
					if r.code != 0 || json.Unmarshal([]byte(r.stdout), &st) != nil || st.ClusterID == "" {
						done = false
						continue
					}
					if !slices.Contains(seen[st.ClusterID], addrs[2*i]) {
						seen[st.ClusterID] = append(seen[st.ClusterID], addrs[2*i])
					}
					var started []string
					for _, m := range st.Members {
						if m.Started && !m.Learner {
							started = append(started, m.Name)
						}
					}
					slices.Sort(started)
					done = done && slices.Equal(started, names) && st.Quorum
				}
				return done || len(seen) > 1
			}
			require.Eventually(t, formed, 3*time.Minute, 200*time.Millisecond, "cluster IDs seen: %v", seen)
			require.Len(t, seen, 1, "addresses answered with different cluster IDs: %v", seen)
			for id, as := range seen {
				require.Len(t, as, size, "cluster %s answered at %v", id, as)
			}
			bootstraps := 0
			for _, p := range procs {
				p.signalAndWait(t, syscall.SIGKILL)
				bootstraps += strings.Count(p.errb.String(), "bootstrapping a new one-member cluster")
			}
			assert.Equal(t, 1, bootstraps, "exactly one node bootstrapped")
		})
	}
}

// TestServeRaftTimingRefused: serve refuses a raft timing etcd would
// refuse (an election timeout below 5 heartbeat intervals or above 50 s,
// a zero heartbeat), in both modes, with a usage error naming the flags,
// before it creates the data directory.
func TestServeRaftTimingRefused(t *testing.T) {
	t.Parallel()
	tg := target{impl: "etcd2", addr: "127.0.0.1:1", root: defaultRoot}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"below 5 heartbeats", []string{"--heartbeat-interval", "100", "--election-timeout", "400"}, "at least 5 heartbeat intervals"},
		{"below 5 default heartbeats", []string{"--election-timeout", "200"}, "at least 5 heartbeat intervals"},
		{"above 50 s", []string{"--heartbeat-interval", "1000", "--election-timeout", "50001"}, "at most 50000 ms"},
		{"zero heartbeat", []string{"--heartbeat-interval", "0"}, "at least 1 ms"},
	} {
		for _, mode := range [][]string{nil, {"--cluster", "--name", "n1"}} {
			dir := filepath.Join(t.TempDir(), "data")
			args := append(append([]string{"serve", "--data-dir", dir}, mode...), c.args...)
			tg.fails(t, 2, []string{"--heartbeat-interval", "--election-timeout", c.want}, args...)
			_, err := os.Stat(dir)
			require.True(t, os.IsNotExist(err), "%s %v: the data directory was created", c.name, mode)
		}
	}
}

// TestTwoClustersRefused: topoctl given the addresses of two different
// etcd clusters (what a node that lost its data and bootstrapped anew
// at its old address looks like beside its real cluster) refuses them,
// naming both, and writes to neither.
func TestTwoClustersRefused(t *testing.T) {
	t.Parallel()
	a, b := etcdtest.Start(t), etcdtest.Start(t)
	both := target{impl: "etcd2", addr: a + "," + b, root: defaultRoot}
	both.fails(t, 1, []string{"different etcd clusters", a, b}, "put", "/k", "v")
	for _, addr := range []string{a, b} {
		one := target{impl: "etcd2", addr: addr, root: defaultRoot}
		one.fails(t, 1, []string{"NoNode"}, "get", "/k")
	}
	_ = target{impl: "etcd2", addr: a + "," + a, root: defaultRoot}.ok(t, "put", "/k", "v")
}

// TestPlainServeRefusesClusterData: a plain serve given the data
// directory of a member of a two-member cluster (a "serve --cluster"
// node's, run without --cluster by mistake) refuses it, saying what to
// run instead, and starts nothing: run alone it would be a second
// process of that member, with another peer address, beside its
// cluster. The directory of a one-member etcd still serves. With a
// alone running, "cluster status" reports the lost quorum at once, and
// a cluster node given a's client address says its port is taken.
func TestPlainServeRefusesClusterData(t *testing.T) {
	t.Parallel()
	addrs, err := etcdembed.FreeAddrs(6)
	require.NoError(t, err)
	dirs := []string{t.TempDir(), t.TempDir()}
	initial := "a=http://" + addrs[1] + ",b=http://" + addrs[3]
	member := func(i int) etcdembed.Config {
		return etcdembed.Config{Name: []string{"a", "b"}[i], Dir: dirs[i], ClientURL: "http://" + addrs[2*i], PeerURL: "http://" + addrs[2*i+1],
			InitialCluster: initial, TickMs: 10, ElectionMs: 100, NoFsync: true}
	}
	var ms []*etcdembed.Member
	for i := range 2 {
		m, err := etcdembed.Start(member(i))
		require.NoError(t, err)
		ms = append(ms, m)
	}
	for _, m := range ms {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		require.NoError(t, m.WaitReady(ctx))
		cancel()
	}
	ms[1].Close()

	env := []string{envImplementation + "=", envServerAddress + "=", envRoot + "=", envCell + "=", envDataDir + "="}
	p := startProcess(t, env, "serve", "--data-dir", dirs[1], "--listen-client-address", addrs[4], "--listen-peer-address", addrs[5])
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		require.FailNow(t, "serve runs a member of a two-member cluster alone", p.errb.String())
	}
	assert.Equal(t, 1, p.cmd.ProcessState.ExitCode(), p.errb.String())
	for _, want := range []string{"holds a member of a 2-member etcd cluster", "a http://" + addrs[1], "b http://" + addrs[3], "serve --cluster", "its own --data-dir"} {
		assert.Contains(t, p.errb.String(), want)
	}

	// a alone has no quorum: "cluster status" says so and what to do,
	// showing what answers, instead of waiting out --timeout for the
	// member list and printing only "context deadline exceeded".
	tg := target{impl: "etcd2", addr: addrs[0], root: defaultRoot}
	r := tg.fails(t, 1, []string{"no quorum: 1 of 2 voters answer (not answering: b)", "start the members that stopped"}, "--timeout", "20s", "cluster", "status")
	assert.Contains(t, r.stdout, "(no quorum: the member list and the keys above are what an answering member knows")
	assert.Regexp(t, `\na +\S+ +voter +true +true `, r.stdout)
	r = tg.fails(t, 1, []string{"no quorum: 1 of 2 voters answer"}, "-o", "json", "cluster", "status")
	var st clusterStatusJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st), r.stdout)
	assert.True(t, st.Stale)
	assert.False(t, st.Quorum)

	// A cluster node on a taken port says what to do, as a plain serve does.
	tg.fails(t, 1, []string{"address already in use", "pick other ports"}, "serve", "--cluster", "--name", "c", "--data-dir", t.TempDir(),
		"--listen-client-address", addrs[0], "--listen-peer-address", addrs[5])

	// a restarted alone serves nothing until a quorum runs: the error
	// says why nothing answers. Its Close returns (etcd's Close of a
	// server that never became ready waits forever).
	ms[0].Close()
	m, err := etcdembed.Start(member(0))
	require.NoError(t, err)
	tg.fails(t, 1, []string{"no member answered", "start its other members"}, "--timeout", "3s", "cluster", "status")
	m.Close()

	// A one-member etcd's data directory serves as before.
	one := t.TempDir()
	p = startProcess(t, env, "serve", "--data-dir", one, "--listen-client-address", addrs[4], "--listen-peer-address", addrs[5])
	p.waitLine(t, "Stop it with Ctrl-C")
	assert.Equal(t, 0, p.signalAndWait(t, syscall.SIGTERM), p.errb.String())
	p = startProcess(t, env, "serve", "--data-dir", one, "--listen-client-address", addrs[4], "--listen-peer-address", addrs[5])
	p.waitLine(t, "Stop it with Ctrl-C")
	assert.Equal(t, 0, p.signalAndWait(t, syscall.SIGTERM), p.errb.String())
}

// TestServeClusterStopWithoutQuorum: Ctrl-C given to a node whose
// cluster has lost its quorum (the other member of two was killed). No
// member can remove it, so it stops after the leave timeout without
// leaving; serve then says so, that the node may still be a member, where
// its data is, and to run the same command again (it said only
// "interrupted: etcdcluster: waiting for removal: context deadline
// exceeded"). Run again with the same commands, the nodes form the same
// cluster again, with its data.
func TestServeClusterStopWithoutQuorum(t *testing.T) {
	t.Parallel()
	env := []string{envImplementation + "=", envServerAddress + "=", envRoot + "=", envCell + "=", envDataDir + "="}
	addrs, err := etcdembed.FreeAddrs(4)
	require.NoError(t, err)
	seeds := "http://" + addrs[0] + ",http://" + addrs[2]
	dirs := []string{t.TempDir(), t.TempDir()}
	start := func() []*proc {
		procs := make([]*proc, 2)
		for i := range procs {
			procs[i] = startProcess(t, env, "serve", "--seeds", seeds, "--bootstrap-expect", "2",
				"--name", fmt.Sprintf("n%d", i+1), "--data-dir", dirs[i],
				"--listen-client-address", addrs[2*i], "--listen-peer-address", addrs[2*i+1])
		}
		return procs
	}
	tg := target{impl: "etcd2", addr: addrs[0], root: defaultRoot}
	formed := func() clusterStatusJSON {
		var st clusterStatusJSON
		require.Eventually(t, func() bool {
			r := tg.run(t, "", "-o", "json", "cluster", "status")
			st = clusterStatusJSON{}
			return r.code == 0 && json.Unmarshal([]byte(r.stdout), &st) == nil && st.Quorum && voters(st) == 2
		}, 3*time.Minute, 200*time.Millisecond)
		return st
	}
	procs := start()
	first := formed()
	_ = tg.ok(t, "put", "/k", "v")

	procs[1].signalAndWait(t, syscall.SIGKILL)
	require.NoError(t, procs[0].cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-procs[0].done:
	case <-time.After(2 * etcdcluster.DefaultLeaveTimeout):
		require.FailNow(t, "serve did not stop after SIGINT", "stderr: %s", procs[0].errb.String())
	}
	stderr := procs[0].errb.String()
	assert.Equal(t, ExitInterrupted, procs[0].cmd.ProcessState.ExitCode(), stderr)
	for _, want := range []string{
		"node n1 stopped without leaving the cluster",
		"so it may still be a member; its data stays in " + dirs[0],
		"run the same command again",
	} {
		assert.Contains(t, stderr, want)
	}

	// As the message says: the same commands bring the cluster back.
	procs = start()
	again := formed()
	assert.Equal(t, first.ClusterID, again.ClusterID)
	assert.Equal(t, "v", tg.ok(t, "get", "/k"))
	for _, p := range procs {
		p.signalAndWait(t, syscall.SIGKILL)
	}
}
