package topoctl

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestWatchRev: watch --rev N on etcd replays the history from revision N
// (writes, deletions, and a deletion does not end it), then follows live
// changes; resuming from the last revision printed plus one misses and
// repeats nothing; lock entries are not printed; a compacted revision is
// Compacted, naming the oldest one left.
func TestWatchRev(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	tg := target{impl: "etcd2", addr: addr, root: "/" + t.Name()}
	put := func(p, v string) string { return strings.TrimSpace(tg.ok(t, "put", p, v)) }
	v1 := put("ks/a", "one")
	v2 := put("ks/a", "two")
	vb := put("ks/b", "bee")
	tg.ok(t, "rm", "ks/a")
	// The deletion's revision: the next write's minus one, nothing else
	// being written to this etcd meanwhile.
	v3 := put("ks/a", "three")
	var n3 int64
	_, err := fmt.Sscan(v3, &n3)
	require.NoError(t, err)
	del := fmt.Sprint(n3 - 1)

	history := []string{
		"/ks/a " + v1 + ` "one"`,
		"/ks/a " + v2 + ` "two"`,
		"/ks/a deleted at revision " + del,
		"/ks/a " + v3 + ` "three"`,
	}
	w := tg.start(t, "watch", "--rev", v1, "ks/a")
	w.waitOutput(t, history[3]+"\n")
	v4 := put("ks/a", "four")
	w.waitOutput(t, "/ks/a "+v4+` "four"`+"\n")
	require.Equal(t, 0, w.stop(t), w.stderr.String())
	assert.Equal(t, strings.Join(append(history, "/ks/a "+v4+` "four"`), "\n")+"\n", w.stdout.String())

	// -R: every file under the prefix, in revision order; a lock taken
	// meanwhile (entries under ks/locks/) is not a file.
	tg.ok(t, "lock", "ks", "--", "true")
	v5 := put("ks/b", "bee2")
	r := tg.start(t, "watch", "-R", "--rev", v1, "ks/")
	r.waitOutput(t, "/ks/b "+v5+` "bee2"`+"\n")
	require.Equal(t, 0, r.stop(t), r.stderr.String())
	assert.Equal(t, strings.Join([]string{history[0], history[1], "/ks/b " + vb + ` "bee"`, history[2], history[3],
		"/ks/a " + v4 + ` "four"`, "/ks/b " + v5 + ` "bee2"`}, "\n")+"\n", r.stdout.String())
	assert.NotContains(t, r.stdout.String(), "locks")

	// Resume after the deletion: from its revision plus one.
	res := tg.start(t, "-o", "json", "watch", "-R", "--rev", fmt.Sprint(n3), "ks/")
	res.waitOutput(t, `"revision":`+v5)
	require.Equal(t, 0, res.stop(t), res.stderr.String())
	var revs []string
	for l := range strings.Lines(res.stdout.String()) {
		var ev struct {
			Path     string
			Version  json.Number
			Revision json.Number
			Deleted  bool
		}
		require.NoError(t, json.Unmarshal([]byte(l), &ev))
		assert.Equal(t, ev.Version, ev.Revision, "on etcd a write's version is its revision")
		revs = append(revs, ev.Path+"@"+ev.Revision.String())
	}
	assert.Equal(t, []string{"/ks/a@" + v3, "/ks/a@" + v4, "/ks/b@" + v5}, revs)

	// Compacted history.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = cli.Compact(ctx, n3)
	require.NoError(t, err)
	c := tg.start(t, "watch", "--rev", v1, "ks/a")
	require.Equal(t, ExitFailure, c.wait(t))
	assert.Contains(t, c.stderr.String(), "topoctl: Compacted: ")
	assert.Contains(t, c.stderr.String(), fmt.Sprintf("revision %s was compacted: the oldest revision etcd still has is %d", v1, n3))

	// Bad revisions.
	tg.fails(t, ExitUsage, []string{"--rev must be a revision"}, "watch", "--rev", "0", "ks/a")
	tg.fails(t, ExitUsage, []string{"does not combine with --wait"}, "watch", "--rev", "1", "--wait", "ks/a")
}

// TestWatchRevOtherBackends: --rev on a backend without history is a usage
// error naming the backend, before anything is read.
func TestWatchRevOtherBackends(t *testing.T) {
	t.Parallel()
	for _, tg := range []target{
		{impl: "zk2", addr: zktest.Start(t), root: "/r"},
		{impl: "consul", addr: consultest.Start(t), root: "r"},
		memoryTarget(t),
		{impl: customBackend, root: "/r"},
	} {
		for _, args := range [][]string{{"watch", "--rev", "5", "/a"}, {"watch", "-R", "--rev", "5", "/"}} {
			r := tg.fails(t, ExitUsage, []string{"watch --rev: NoImplementation: the " + tg.impl + " backend keeps no history", "only etcd2 does"}, args...)
			assert.Empty(t, r.stdout)
		}
	}
}

// TestWatchRevLeaderLoss: a watch --rev through a member that loses its
// leader (the two others stopped) says "reconnecting" and, once a leader is
// back, goes on from the revision after the last one it printed: a write
// made meanwhile is printed once, nothing twice.
func TestWatchRevLeaderLoss(t *testing.T) {
	t.Parallel()
	c := etcdtest.StartCluster(t, 3)
	tg := target{impl: "etcd2", addr: c.Addr(0), root: "/r"}
	v1 := strings.TrimSpace(tg.ok(t, "put", "a", "one"))
	w := tg.start(t, "watch", "--rev", v1, "a")
	w.waitOutput(t, "/a "+v1+` "one"`+"\n")

	c.StopMember(1)
	c.StopMember(2)
	require.Eventually(t, func() bool { return strings.Contains(w.stderr.String(), "reconnecting") }, time.Minute, 10*time.Millisecond,
		"stderr: %s", w.stderr.String())
	c.RestartMember(1)
	other := target{impl: "etcd2", addr: c.Addr(1), root: "/r"}
	v2 := strings.TrimSpace(other.ok(t, "put", "a", "two"))
	w.waitOutput(t, "/a "+v2+` "two"`+"\n")
	v3 := strings.TrimSpace(other.ok(t, "put", "a", "three"))
	w.waitOutput(t, "/a "+v3+` "three"`+"\n")
	require.Equal(t, 0, w.stop(t), w.stderr.String())
	assert.Equal(t, "/a "+v1+` "one"`+"\n/a "+v2+` "two"`+"\n/a "+v3+` "three"`+"\n", w.stdout.String())
}
