package topoctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// etcd with auth enabled: --etcd-user/--etcd-password (or NAME:PASSWORD,
// or ETCDCTL_USER) authenticate; without them the store refuses.
func TestEtcdAuth(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}})
	require.NoError(t, err)
	ctx := t.Context()
	_, err = cli.RoleAdd(ctx, "root")
	require.NoError(t, err)
	_, err = cli.UserAdd(ctx, "root", "s3cret")
	require.NoError(t, err)
	_, err = cli.UserGrantRole(ctx, "root", "root")
	require.NoError(t, err)
	_, err = cli.AuthEnable(ctx)
	require.NoError(t, err)
	require.NoError(t, cli.Close())

	tg := target{impl: "etcd2", addr: addr, root: "/" + t.Name()}
	tg.ok(t, "--etcd-user", "root", "--etcd-password", "s3cret", "put", "a", "v")
	assert.Equal(t, "v", tg.ok(t, "--etcd-user", "root:s3cret", "get", "a"))
	env := tg
	env.env = map[string]string{"ETCDCTL_USER": "root:s3cret"}
	assert.Equal(t, "v", env.ok(t, "get", "a"))
	env.env = map[string]string{"TOPOCTL_ETCD_USER": "root", "TOPOCTL_ETCD_PASSWORD": "s3cret"}
	assert.Equal(t, "v", env.ok(t, "get", "a"))
	// A NAME:PASSWORD flag wins over a password variable, and a password
	// flag over a NAME:PASSWORD variable; both as flags is a usage error.
	env.env = map[string]string{"ETCDCTL_PASSWORD": "wrong"}
	assert.Equal(t, "v", env.ok(t, "--etcd-user", "root:s3cret", "get", "a"))
	env.env = map[string]string{"ETCDCTL_USER": "root:wrong"}
	assert.Equal(t, "v", env.ok(t, "--etcd-password", "s3cret", "get", "a"))
	tg.fails(t, 2, []string{"give it once"}, "--etcd-user", "root:s3cret", "--etcd-password", "s3cret", "get", "a")

	r := tg.run(t, "", "--timeout", "5s", "get", "a")
	assert.Equal(t, 1, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "v")
	r = tg.run(t, "", "--timeout", "5s", "--etcd-user", "root:wrong", "get", "a")
	assert.Equal(t, 1, r.code, r.stderr)
	// The refusal names the store as IMPL:ADDR:ROOT, not the address as
	// if it were a path ("/127.0.0.1:...").
	assert.Contains(t, r.stderr, "topoctl: PermissionDenied: permission denied: etcd2:"+addr+":/"+t.Name()+": etcd2topo: connecting to "+addr+": ")
	assert.NotContains(t, r.stderr, "/"+addr)
}

// ZooKeeper digest auth: --zk-auth (or TOPOCTL_ZK_AUTH) adds the session's
// credentials, so znodes readable only by that user can be read.
func TestZooKeeperAuth(t *testing.T) {
	t.Parallel()
	addr := zktest.Start(t)
	root := "/" + t.Name()
	c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.AddAuth("digest", []byte("alice:pw")))
	_, err = c.Create(root, nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, err = c.Create(root+"/secret", []byte("hidden"), 0, zk.DigestACL(zk.PermAll, "alice", "pw"))
	require.NoError(t, err)

	tg := target{impl: "zk2", addr: addr, root: root}
	// (zk2topo maps NoAuth to InvalidArgument today; issue 10 item 15 makes
	// it PermissionDenied.)
	r := tg.fails(t, 1, []string{"/secret", "not authenticated"}, "--timeout", "5s", "get", "secret")
	assert.Empty(t, r.stdout)
	assert.Equal(t, "hidden", tg.ok(t, "--zk-auth", "digest:alice:pw", "get", "secret"))
	// stat shows the znode's ACL, read with the same credentials.
	assert.Regexp(t, `(?m)^  acl: +digest:alice:\S+:cdrwa$`, tg.ok(t, "--zk-auth", "digest:alice:pw", "stat", "secret"))
	env := tg
	env.env = map[string]string{"TOPOCTL_ZK_AUTH": "digest:alice:pw"}
	assert.Equal(t, "hidden", env.ok(t, "get", "secret"))
	// The file flag wins over the variable of the value.
	authFile := filepath.Join(t.TempDir(), "auth")
	require.NoError(t, os.WriteFile(authFile, []byte("digest:alice:pw\n"), 0o600))
	env.env = map[string]string{"TOPOCTL_ZK_AUTH": "digest:alice:wrong"}
	assert.Equal(t, "hidden", env.ok(t, "--zk-auth-file", authFile, "get", "secret"))
	tg.fails(t, 1, []string{"InvalidArgument"}, "--zk-auth", "nocolon", "get", "secret")
}

// The stores' own conventions give the address when topoctl's are unset:
// ETCDCTL_ENDPOINTS, CONSUL_HTTP_ADDR.
func TestConventionalAddress(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	tg := target{noFlags: true, env: map[string]string{"ETCDCTL_ENDPOINTS": addr, envRoot: "/" + t.Name(), envDataDir: t.TempDir()}}
	tg.ok(t, "put", "a", "v")
	explicit := target{impl: "etcd2", addr: addr, root: "/" + t.Name()}
	assert.Equal(t, "v", explicit.ok(t, "get", "a"))

	closed := freeClosedAddr(t)
	consul := target{noFlags: true, env: map[string]string{envImplementation: "consul", "CONSUL_HTTP_ADDR": closed, envRoot: "r"}}
	consul.fails(t, 1, []string{"Unavailable", closed}, "get", "a")
}

// A --config file (or $TOPOCTL_CONFIG) gives connection and auth
// settings; a flag, then a variable, wins over it.
func TestConfigFile(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.ok(t, "put", "f", "v")
	conf := filepath.Join(t.TempDir(), "topoctl.conf")
	require.NoError(t, os.WriteFile(conf, []byte("# test\ntopo-implementation = memory\ntopo-global-server-address: "+tg.addr+"\ntopo-global-root = \"/elsewhere\"\ntimeout = 5s\n"), 0o600))
	noFlags := target{noFlags: true, env: map[string]string{envConfig: conf}}
	noFlags.fails(t, 1, []string{"NoNode"}, "get", "f")
	assert.Equal(t, "v", noFlags.ok(t, "--topo-global-root", tg.root, "get", "f"))
	noFlags.env[envRoot] = tg.root
	assert.Equal(t, "v", noFlags.ok(t, "get", "f"))
	assert.Equal(t, "v", target{noFlags: true}.ok(t, "--config", conf, "--topo-global-root", tg.root, "get", "f"))

	// A trailing comment is not part of the value; a quoted '#' and one
	// inside a word are.
	require.NoError(t, os.WriteFile(conf, []byte("topo-implementation = memory # the store\ntopo-global-server-address: "+tg.addr+"\t# where\ntopo-global-root = \"/a #b\" # quoted\n"), 0o600))
	cfg := target{noFlags: true}
	cfg.ok(t, "--config", conf, "put", "g", "w")
	assert.Equal(t, "w", cfg.ok(t, "--topo-implementation", "memory", "--topo-global-server-address", tg.addr, "--topo-global-root", "/a #b", "get", "g"))
	require.NoError(t, os.WriteFile(conf, []byte("topo-implementation = memory # the store\ntopo-global-server-address = "+tg.addr+"\ntopo-global-root = "+tg.root+" # the test's root\n"), 0o600))
	assert.Equal(t, "v", cfg.ok(t, "--config", conf, "get", "f"))
	require.NoError(t, os.WriteFile(conf, []byte("topo-global-root = \"/a\" b\n"), 0o600))
	noFlags.fails(t, 2, []string{conf + ":1", "double-quoted"}, "get", "f")

	require.NoError(t, os.WriteFile(conf, []byte("output = json\n"), 0o600))
	noFlags.fails(t, 2, []string{conf + ":1", "cannot be set in a config file"}, "get", "f")
	require.NoError(t, os.WriteFile(conf, []byte("nonsense\n"), 0o600))
	noFlags.fails(t, 2, []string{conf + ":1"}, "get", "f")

	// A file far larger than any settings file (or an endless one) is
	// refused after a bounded read, not read whole.
	huge := "# " + strings.Repeat("x", maxConfigFile) + "\ntopo-implementation = memory\n"
	require.NoError(t, os.WriteFile(conf, []byte(huge), 0o600))
	noFlags.fails(t, 2, []string{"larger than", "not a settings file"}, "get", "f")
	target{noFlags: true, env: map[string]string{envConfig: "/dev/zero"}}.fails(t, 2, []string{"not a settings file"}, "get", "f")
}

// Consul with ACLs (default deny): --consul-token, --consul-token-file,
// their variables (topoctl's, then consul's own CONSUL_HTTP_TOKEN and
// CONSUL_HTTP_TOKEN_FILE) and a --config setting send the token; a
// read-only token reads and its writes fail with PermissionDenied, writing
// nothing; no token is refused.
func TestConsulToken(t *testing.T) {
	t.Parallel()
	agent := consultest.StartAgentWithOptions(t, consultest.AgentOptions{ACL: true})
	mgmt, ro := agent.ManagementToken(), agent.ReadOnlyToken(t)
	dir := t.TempDir()
	mgmtFile, roFile := filepath.Join(dir, "mgmt"), filepath.Join(dir, "ro")
	require.NoError(t, os.WriteFile(mgmtFile, []byte(mgmt+"\n"), 0o600))
	require.NoError(t, os.WriteFile(roFile, []byte(ro+"\n"), 0o600))
	conf := filepath.Join(dir, "topoctl.conf")
	require.NoError(t, os.WriteFile(conf, []byte("consul-token = "+mgmt+"\n"), 0o600))

	tg := target{impl: "consul", addr: agent.Addr(), root: "acl"}
	tg.fails(t, 1, []string{"PermissionDenied", "/f"}, "--timeout", "10s", "put", "f", "v")
	tg.ok(t, "--consul-token", mgmt, "put", "f", "v")
	assert.Equal(t, "v", tg.ok(t, "--consul-token-file", mgmtFile, "get", "f"))
	assert.Equal(t, "v", tg.ok(t, "--config", conf, "get", "f"))
	for _, env := range []map[string]string{
		{"TOPOCTL_CONSUL_TOKEN": mgmt},
		{"TOPOCTL_CONSUL_TOKEN_FILE": mgmtFile},
		{"CONSUL_HTTP_TOKEN": mgmt},
		{"CONSUL_HTTP_TOKEN_FILE": mgmtFile},
		{"TOPOCTL_CONSUL_TOKEN": mgmt, "CONSUL_HTTP_TOKEN": ro},
	} {
		e := tg
		e.env = env
		e.ok(t, "put", "f", "v")
	}

	// A read-only token reads; its writes, deletes and locks are refused.
	rot := tg
	rot.env = map[string]string{"CONSUL_HTTP_TOKEN": ro}
	assert.Equal(t, "v", rot.ok(t, "get", "f"))
	assert.Equal(t, "f\n", rot.ok(t, "ls", "/"))
	rot.fails(t, 1, []string{"PermissionDenied", "/f"}, "put", "f", "w")
	rot.fails(t, 1, []string{"PermissionDenied", "/f"}, "rm", "f")
	rot.fails(t, 1, []string{"PermissionDenied"}, "--timeout", "10s", "lock", "--try", "/", "--", "true")
	// The flag wins over the variable.
	rot.fails(t, 1, []string{"PermissionDenied"}, "--consul-token", ro, "put", "f", "w")
	e := tg
	e.env = map[string]string{"CONSUL_HTTP_TOKEN": ro}
	e.ok(t, "--consul-token-file", mgmtFile, "put", "g", "x")
	assert.Equal(t, "v", tg.ok(t, "--consul-token", mgmt, "get", "f"))
}
