package topoctl

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// watchFilesStores are the real stores the watch FILE FILE... tests run
// on.
func watchFilesStores(t *testing.T) []target {
	return []target{
		{impl: "etcd2", addr: etcdtest.Start(t), root: "/wf"},
		{impl: "zk2", addr: zktest.Start(t), root: "/wf"},
		{impl: "consul", addr: consultest.Start(t), root: "wf"},
	}
}

// linesOf returns the lines of out that are about path ("PATH ...").
func linesOf(out, path string) []string {
	var got []string
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, path+" ") {
			got = append(got, strings.TrimSuffix(l, "\n"))
		}
	}
	return got
}

// putLine puts value at file and returns the line watch prints for it.
func putLine(t *testing.T, tg target, file, value string) string {
	t.Helper()
	v := strings.TrimSpace(tg.ok(t, "put", file, value))
	return "/" + file + " " + v + " " + `"` + value + `"`
}

// watch A B C prints each file's value, then every change of each in
// order, through one store watch (a WatchRecursive of their common
// directory, counted by --metrics-address: no Watch at all); the deletion
// of one ends its watch and the others go on; Ctrl-C ends it with 0.
func TestWatchFilesShareOneStoreWatch(t *testing.T) {
	t.Parallel()
	for _, st := range watchFilesStores(t) {
		t.Run(st.impl, func(t *testing.T) {
			t.Parallel()
			tg := st.withRoot(st.root + "-share-" + st.impl)
			files := []string{"d/a", "d/e/b", "d/c"}
			want := map[string][]string{}
			for _, f := range files {
				want[f] = append(want[f], putLine(t, tg, f, f+"-0"))
			}
			tg.ok(t, "put", "d/other", "x") // in the cache, not watched
			ports, err := etcdembed.FreeAddrs(1)
			require.NoError(t, err)
			w := tg.start(t, "--metrics-address", ports[0], "watch", "d/a", "/d/e/b", "d/c", "d/a")
			for _, f := range files {
				w.waitOutput(t, want[f][0]+"\n")
			}
			for i := 1; i <= 3; i++ {
				for _, f := range files {
					want[f] = append(want[f], putLine(t, tg, f, f+"-"+string(rune('0'+i))))
				}
				tg.ok(t, "put", "d/other", "y")
			}
			for _, f := range files {
				w.waitOutput(t, want[f][len(want[f])-1]+"\n")
			}
			tg.ok(t, "rm", "d/e/b")
			w.waitOutput(t, "/d/e/b deleted\n")
			want["d/e/b"] = append(want["d/e/b"], "/d/e/b deleted")
			after := putLine(t, tg, "d/c", "after")
			w.waitOutput(t, after+"\n")
			want["d/c"] = append(want["d/c"], after)

			m := scrape(t, ports[0])
			assert.Equal(t, 1.0, m[`topo_watches_active{backend="`+st.impl+`",cell="global",op="WatchRecursive"}`], "%v", m)
			assert.Equal(t, 1.0, m[`topo_calls_total{backend="`+st.impl+`",cell="global",code="OK",op="WatchRecursive"}`], "%v", m)
			for k := range m {
				assert.NotContains(t, k, `op="Watch"`, "a store Watch besides the cache's one WatchRecursive")
			}
			assert.Equal(t, 2.0, m[`topo_cache_watchers{cache="watch"}`], "d/a and d/c still watched")

			require.Equal(t, 0, w.stop(t), w.stderr.String())
			out := w.stdout.String()
			for _, f := range files {
				assert.Equal(t, want[f], linesOf(out, "/"+f), "the lines of /%s, in order, once each", f)
			}
			assert.NotContains(t, out, "/d/other")
		})
	}
}

// watch A B with --wait waits for a missing file and prints it once
// created; without --wait a missing file fails it (NoNode) with nothing
// printed; when every file was deleted it ends by itself (exit 0).
func TestWatchFilesWaitAndDeletion(t *testing.T) {
	t.Parallel()
	for _, st := range watchFilesStores(t) {
		t.Run(st.impl, func(t *testing.T) {
			t.Parallel()
			tg := st.withRoot(st.root + "-wait-" + st.impl)
			a := putLine(t, tg, "a", "one")
			r := tg.fails(t, ExitFailure, []string{"/b"}, "watch", "a", "b")
			assert.Empty(t, r.stdout)

			w := tg.start(t, "watch", "--wait", "a", "b")
			w.waitOutput(t, a+"\n")
			require.Eventually(t, func() bool { return strings.Contains(w.stderr.String(), "/b does not exist yet") }, 30*time.Second, 10*time.Millisecond)
			b := putLine(t, tg, "b", "two")
			w.waitOutput(t, b+"\n")
			tg.ok(t, "rm", "a")
			w.waitOutput(t, "/a deleted\n")
			tg.ok(t, "rm", "b")
			require.Equal(t, 0, w.wait(t), w.stderr.String())
			assert.Equal(t, a+"\n"+b+"\n/a deleted\n/b deleted\n", w.stdout.String())
		})
	}
}

// watch A B cut off from its store by a partition says "reconnecting",
// and once it heals "reconnected", and prints the changes made meanwhile.
func TestWatchFilesPartition(t *testing.T) {
	t.Parallel()
	for _, st := range watchFilesStores(t) {
		t.Run(st.impl, func(t *testing.T) {
			t.Parallel()
			px, err := faultproxy.New(st.addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = px.Close() })
			direct := st.withRoot(st.root + "-partition-" + st.impl)
			cut := direct
			cut.addr = px.Addr()
			w, a1, b1 := watchAB(t, direct, cut)

			px.Blackhole()
			waitReconnecting(t, w)
			a2, b2 := putLine(t, direct, "d/a", "a2"), putLine(t, direct, "d/b", "b2")
			px.Heal()
			w.waitOutput(t, a2+"\n")
			w.waitOutput(t, b2+"\n")
			require.Eventually(t, func() bool { return strings.Contains(w.stderr.String(), "reconnected") }, 2*time.Minute, 10*time.Millisecond,
				"no reconnected note; stderr: %s", w.stderr.String())
			b3 := putLine(t, direct, "d/b", "b3")
			w.waitOutput(t, b3+"\n")
			require.Equal(t, 0, w.stop(t), w.stderr.String())
			out := w.stdout.String()
			assert.Equal(t, []string{a1, a2}, linesOf(out, "/d/a"))
			assert.Equal(t, []string{b1, b2, b3}, linesOf(out, "/d/b"))
		})
	}
}

// gatedWriter is a syncBuffer whose writes wait while hold is locked: a
// terminal that stopped reading.
type gatedWriter struct {
	syncBuffer
	hold sync.Mutex
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.hold.Lock()
	g.hold.Unlock() //nolint:staticcheck // a gate: wait for the holder
	return g.syncBuffer.Write(p)
}

// A file whose changes come faster than the output takes them falls
// behind: the cache drops its watcher, and watch says so on stderr,
// registers it again and prints the file's current value; the changes it
// held are printed in order first, and the other files go on.
func TestWatchFilesSlowOutput(t *testing.T) {
	t.Parallel()
	tg := target{impl: "etcd2", addr: etcdtest.Start(t), root: "/wf-slow"}
	a0, b0 := putLine(t, tg, "d/a", "a0"), putLine(t, tg, "d/b", "b0")
	ports, err := etcdembed.FreeAddrs(1)
	require.NoError(t, err)
	out, errb := &gatedWriter{}, &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, tg.argv([]string{"--metrics-address", ports[0], "watch", "d/a", "d/b"}), streams{Stdout: out, Stderr: errb})
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool { s := out.String(); return strings.Contains(s, a0) && strings.Contains(s, b0) }, 30*time.Second, 10*time.Millisecond)

	srv, err := topo.OpenServer(tg.impl, tg.addr, tg.root)
	require.NoError(t, err)
	defer srv.Close()
	conn := srv.GlobalCell()
	out.hold.Lock()
	n := watchFilesBuffer + 50
	var last topo.Version
	for i := 1; i <= n; i++ {
		last, err = conn.Update(t.Context(), "d/a", []byte(fmt.Sprintf("a%d", i)), nil)
		require.NoError(t, err)
	}
	waitSample(t, ports[0], `topo_cache_watchers{cache="watch"}`, 1) // d/a's watcher was dropped
	out.hold.Unlock()
	final := fmt.Sprintf("/d/a %s \"a%d\"\n", last, n)
	require.Eventually(t, func() bool { return strings.Contains(out.String(), final) }, 30*time.Second, 10*time.Millisecond,
		"stdout: %s\nstderr: %s", out.String(), errb.String())
	assert.Contains(t, errb.String(), "/d/a: the output fell more than 1024 changes behind")
	b1 := putLine(t, tg, "d/b", "b1")
	a := putLine(t, tg, "d/a", "after")
	require.Eventually(t, func() bool { s := out.String(); return strings.Contains(s, a) && strings.Contains(s, b1) }, 30*time.Second, 10*time.Millisecond)
	cancel()
	require.Equal(t, 0, <-done, errb.String())
	done <- 0

	lines := linesOf(out.String(), "/d/a")
	require.Greater(t, len(lines), watchFilesBuffer)
	require.Less(t, len(lines), n+2, "some changes skipped")
	prev := -1
	for i, l := range lines[:len(lines)-1] {
		var v int
		_, err := fmt.Sscanf(strings.Fields(l)[2], `"a%d"`, &v)
		require.NoError(t, err, l)
		require.Greater(t, v, prev, "line %d: %s: in order, once each", i, l)
		prev = v
	}
	assert.Equal(t, []string{b0, b1}, linesOf(out.String(), "/d/b"))
}

// -R, --prefix and --rev take one argument; a misspelt --decode mode
// before the files is a usage error, not a file.
func TestWatchFilesUsage(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.fails(t, ExitUsage, []string{"-R and --prefix take one DIR or PREFIX, got 2 arguments"}, "watch", "-R", "a/", "b/")
	tg.fails(t, ExitUsage, []string{"-R and --prefix take one DIR or PREFIX"}, "watch", "--prefix", "a", "b")
	tg.fails(t, ExitUsage, []string{"--rev replays the history of one FILE, DIR or PREFIX, got 2 arguments"}, "watch", "--rev", "5", "a", "b")
	tg.fails(t, ExitUsage, []string{`--decode "yaml": want raw or json`, "write it /yaml"}, "watch", "--decode", "yaml", "a/f")
	tg.fails(t, ExitUsage, []string{"takes at least 1 argument(s), got 0"}, "watch")
}

// watch -o json A B prints one JSON object per line, as watch FILE does,
// the first values in the order of the arguments.
func TestWatchFilesJSON(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.ok(t, "put", "x/b", "bee")
	tg.ok(t, "put", "x/a", "")
	w := tg.start(t, "-o", "json", "watch", "x/b", "x/a")
	w.waitOutput(t, `{"path":"/x/a",`)
	tg.ok(t, "rm", "x/b")
	w.waitOutput(t, `{"path":"/x/b","deleted":true}`+"\n")
	require.Equal(t, 0, w.stop(t), w.stderr.String())
	lines := strings.Split(strings.TrimSpace(w.stdout.String()), "\n")
	require.Len(t, lines, 3, w.stdout.String())
	assert.Regexp(t, `^\{"path":"/x/b","version":\d+,"value":"YmVl","deleted":false\}$`, lines[0])
	assert.Regexp(t, `^\{"path":"/x/a","version":\d+,"value":"","deleted":false\}$`, lines[1])
}

// watch A B whose store refuses it after an outage (etcd: the user's
// read permission was revoked meanwhile) ends with PermissionDenied, as
// watch A does, rather than say "reconnecting" for ever.
func TestWatchFilesPermissionRevoked(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}})
	require.NoError(t, err)
	defer cli.Close()
	ctx := t.Context()
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", "s3cret"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.RoleAdd(ctx, "reader"); return err },
		func() error {
			// Every key, from the lowest on.
			_, err := cli.RoleGrantPermission(ctx, "reader", "\x00", "\x00", clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := cli.UserAdd(ctx, "reader", "pw"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "reader", "reader"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		require.NoError(t, step())
	}
	px, err := faultproxy.New(addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	root := target{impl: "etcd2", addr: addr, root: "/revoked", env: map[string]string{"ETCDCTL_USER": "root:s3cret"}}
	reader := root
	reader.addr, reader.env = px.Addr(), map[string]string{"ETCDCTL_USER": "reader:pw"}
	w, _, _ := watchAB(t, root, reader)

	px.Blackhole()
	waitReconnecting(t, w)
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, Username: "root", Password: "s3cret"})
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.UserRevokeRole(ctx, "reader", "reader")
	require.NoError(t, err)
	px.Reset() // the watch's stream ends: it must watch again
	px.Heal()
	assert.Equal(t, ExitFailure, w.wait(t), w.stderr.String())
	assert.Contains(t, w.stderr.String(), "PermissionDenied")
}

// watch A B whose server stops accepting connections says so, as watch A
// does ("nothing accepts connections at ADDR"), not only that its probe
// of an internal path timed out.
func TestWatchFilesServerGone(t *testing.T) {
	t.Parallel()
	px, err := faultproxy.New(etcdtest.Start(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	tg := target{impl: "etcd2", addr: px.Addr(), root: "/gone"}
	w, _, _ := watchAB(t, tg, tg)
	require.NoError(t, px.Close())
	waitReconnecting(t, w)
	assert.Contains(t, w.stderr.String(), "nothing accepts connections at "+px.Addr())
	assert.NotContains(t, w.stderr.String(), "topokit-cache-probe")
	require.Equal(t, 0, w.stop(t), w.stderr.String())
}

// watchAB writes d/a and d/b through direct, starts watch d/a d/b through
// via and returns it once it printed both, with their lines.
func watchAB(t *testing.T, direct, via target) (w *background, a, b string) {
	t.Helper()
	a, b = putLine(t, direct, "d/a", "a1"), putLine(t, direct, "d/b", "b1")
	w = via.start(t, "watch", "d/a", "d/b")
	w.waitOutput(t, a+"\n")
	w.waitOutput(t, b+"\n")
	return w, a, b
}

// waitReconnecting waits for w's note that it lost its store.
func waitReconnecting(t *testing.T, w *background) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(w.stderr.String(), "reconnecting") }, 2*time.Minute, 10*time.Millisecond,
		"no reconnecting note; stderr: %s", w.stderr.String())
}
