package topoctl

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// TestEtcd runs every scenario against a real embedded etcd, each under
// its own root.
func TestEtcd(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	runSuite(t, func(t *testing.T) target {
		return target{impl: "etcd2", addr: addr, root: "/" + t.Name()}
	}, capabilities{history: true})
}

// freeClosedAddr returns a loopback address nothing listens on.
func freeClosedAddr(t *testing.T) string {
	addrs, err := etcdembed.FreeAddrs(1)
	require.NoError(t, err)
	return addrs[0]
}

// A dead explicit address (nothing listens) fails at once, not after
// --timeout (left at its 30s default), with one line naming the address
// and "connection refused", on every backend.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	addr := freeClosedAddr(t)
	for _, impl := range []string{"etcd2", "zk2", "consul"} {
		t.Run(impl, func(t *testing.T) {
			root := "r"
			if impl == "etcd2" {
				root = "/r" // without "/", a warning precedes the error
			}
			tg := target{impl: impl, addr: addr, root: root}
			for _, args := range [][]string{
				{"ls", "/"},
				{"get", "a"},
				{"put", "a", "v"},
				{"watch", "a"},
				{"leader", "e"},
				{"lock", "a", "--", "true"},
				{"copy", "--from", "memory:x:/", "--to", impl + ":" + addr + ":" + root},
			} {
				r := tg.run(t, "", args...)
				require.Equal(t, 1, r.code, "%v: %s", args, r.stderr)
				assert.Regexp(t, `^topoctl: Unavailable: `, r.stderr, args)
				assert.Contains(t, r.stderr, "nothing accepts connections at "+addr, args)
				assert.Contains(t, r.stderr, "connection refused", args)
				assert.NotContains(t, r.stderr, "topoctl serve", args)
				assert.NotContains(t, r.stderr, "memory:x", "the store that failed is named, not another: %v", args)
				assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
			}
		})
	}
}

// serve runs in-process: it starts, tells how to reach it, records its
// address for flag-less commands, stops cleanly when interrupted and keeps
// its data across restarts.
func TestServe(t *testing.T) {
	t.Parallel()
	addrs, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	dataDir := t.TempDir()
	// No flags: the environment names only serve's data directory.
	tg := target{noFlags: true, env: map[string]string{envDataDir: dataDir}}
	serveArgs := []string{"serve", "--listen-client-address", addrs[0], "--listen-peer-address", addrs[1]}

	srv := tg.start(t, serveArgs...)
	srv.waitOutput(t, "Stop it with Ctrl-C")
	out := srv.stdout.String()
	assert.Contains(t, out, "client URL:     http://"+addrs[0])
	assert.Contains(t, out, "data directory: "+dataDir)
	assert.Contains(t, out, "use it with no flags")
	assert.Contains(t, out, "--topo-implementation etcd2 --topo-global-server-address "+addrs[0]+" --topo-global-root /vitess/global")
	assert.Contains(t, out, "export TOPO_IMPLEMENTATION=etcd2 TOPO_GLOBAL_SERVER_ADDRESS="+addrs[0]+" TOPO_GLOBAL_ROOT=/vitess/global")

	assert.Regexp(t, `^[0-9]+\n$`, tg.ok(t, "put", "/hello", "world"))
	assert.Equal(t, "hello\n", tg.ok(t, "ls", "/"))
	explicit := target{impl: "etcd2", addr: addrs[0], root: defaultRoot}
	assert.Equal(t, "world", explicit.ok(t, "get", "hello"))

	// A second serve on the same ports fails with a clear line.
	busy := target{noFlags: true, env: map[string]string{envDataDir: t.TempDir()}}
	r := busy.run(t, "", serveArgs...)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "already in use")

	require.Equal(t, 0, srv.stop(t), srv.stderr.String())
	assert.Contains(t, srv.stdout.String(), "embedded etcd stopped")
	rec, err := os.ReadFile(endpointFile(dataDir))
	require.NoError(t, err)
	assert.Equal(t, addrs[0]+"\n", string(rec), "the address record stays after stop")

	// Stopped: flag-less commands fail fast and suggest serve.
	r = tg.run(t, "", "--timeout", "300ms", "get", "hello")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `is "topoctl serve" running?`)

	// Restarted on the same data directory, the data is still there.
	srv = tg.start(t, serveArgs...)
	srv.waitOutput(t, "Stop it with Ctrl-C")
	assert.Equal(t, "world", tg.ok(t, "get", "hello"))
	require.Equal(t, 0, srv.stop(t), srv.stderr.String())
}

func TestServeUsage(t *testing.T) {
	t.Parallel()
	tg := target{noFlags: true, env: map[string]string{envDataDir: t.TempDir()}}
	tg.fails(t, 2, []string{"host:port"}, "serve", "--listen-client-address", "nope")
	// A ready wait of zero or less ends before etcd can be ready: refused
	// before anything starts (it used to start etcd and fail its wait).
	tg.fails(t, 2, []string{"--ready-timeout must be positive"}, "serve", "--ready-timeout", "0")
	tg.fails(t, 2, []string{"--ready-timeout must be positive"}, "serve", "--ready-timeout", "-1s")
	// A node configuration etcdcluster refuses before anything starts is
	// the flags' mistake too (it exited 1).
	tg.fails(t, 2, []string{"invalid config", `Name "bad/name"`}, "serve", "--cluster", "--name", "bad/name")
	// A port taken by someone else.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	tg.fails(t, 1, []string{"already in use"}, "serve", "--listen-client-address", l.Addr().String(), "--listen-peer-address", freeClosedAddr(t))
}
