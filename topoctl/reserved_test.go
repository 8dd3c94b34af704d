package topoctl

import (
	"crypto/rand"
	"encoding/json"
	topotest "github.com/topokit/topokit/topo/test"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// foreignImpl is a test backend: the memory store, with List following
// the contract for foreign files at reserved paths. A file whose path has
// a "foreign-locks" segment stands for one at the same path with "locks"
// (which topokit itself refuses to write): List leaves it out and reports
// it, with every other file, in a PartialResult *topo.Error wrapping
// *topo.ReservedFilesError.
const foreignImpl = "memory-foreign"

func init() {
	mem, err := topo.GetFactory("memory")
	if err != nil {
		panic(err)
	}
	if err := topo.RegisterFactory(foreignImpl, topo.FactoryFunc(func(cell, addr, root string) (topo.Conn, error) {
		c, err := mem.Create(cell, addr, root)
		if err != nil {
			return nil, err
		}
		return topotest.ForeignReservedConn{Conn: c}, nil
	})); err != nil {
		panic(err)
	}
}

// testReservedFiles: files at reserved paths that another tool wrote
// (plant writes one at ks/<rel>) are named on stderr by copy, export,
// diff and rm -R, which exit 1 and carry on with the other files; import
// checks every target path against the reserved-name rule before writing
// anything.
func testReservedFiles(t *testing.T, tg target, rel string, plant func(t *testing.T, path string)) {
	src := tg.withRoot(tg.root + "/src")
	dst := target{impl: "memory", addr: runName(t) + "-dst", root: "/"}
	src.ok(t, "put", "ks/Keyspace", "k")
	src.ok(t, "put", "ks/shards/0/Shard", "s")
	plant(t, "ks/"+rel)
	shown := "/ks/" + strings.ReplaceAll(rel, "foreign-locks", "locks")

	r := src.fails(t, 1, []string{"not copied: " + shown + " in ", "reserved path", "PartialResult", "1 file at reserved paths was not copied"}, "copy", "--to", dst.spec())
	assert.Contains(t, r.stdout, "copied 2 files")
	assert.Equal(t, "/ks\n/ks/Keyspace\n/ks/shards\n/ks/shards/0\n/ks/shards/0/Shard\n", dst.ok(t, "ls", "-R"))
	// The dry run names it too.
	src.fails(t, 1, []string{"not copied: " + shown}, "copy", "--dry-run", "--to", dst.spec())

	r = src.fails(t, 1, []string{"not compared: " + shown, "PartialResult"}, "diff", "--to", dst.spec())
	assert.Contains(t, r.stdout, "identical: 2 files")
	// With -o json a file not compared keeps "identical" false.
	r = src.fails(t, 1, []string{"not compared: " + shown}, "diff", "--to", dst.spec(), "-o", "json")
	var d struct {
		Identical   bool     `json:"identical"`
		NotCompared []string `json:"not_compared"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &d))
	assert.False(t, d.Identical)
	assert.Equal(t, []string{shown}, d.NotCompared)

	exp := filepath.Join(t.TempDir(), "exp")
	src.fails(t, 1, []string{"not exported: " + shown, "PartialResult"}, "export", exp)
	b, err := os.ReadFile(filepath.Join(exp, "ks", "Keyspace"))
	require.NoError(t, err)
	assert.Equal(t, "k", string(b))

	r = src.fails(t, 1, []string{"not deleted: " + shown, "PartialResult", "deleted 2 files under /ks"}, "rm", "-R", "--force", "ks")
	src.fails(t, 1, []string{"NoNode"}, "get", "ks/Keyspace")

	// import refuses a reserved target path before writing anything.
	in := t.TempDir()
	for _, p := range []string{"a/Keyspace", "a/locks/x", "b/Shard"} {
		require.NoError(t, os.MkdirAll(filepath.Join(in, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(in, p), []byte("v"), 0o600))
	}
	src.fails(t, 1, []string{"InvalidPath", "/imp/a/locks/x", "reserved name", "nothing was written"}, "import", in, "imp")
	src.fails(t, 1, []string{"NoNode"}, "get", "imp/a/Keyspace")
	require.NoError(t, os.Remove(filepath.Join(in, "a", "locks", "x")))
	require.NoError(t, os.MkdirAll(filepath.Join(in, "elections"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(in, "elections", "e"), []byte("v"), 0o600))
	src.fails(t, 1, []string{"InvalidPath", "/elections/e", "nothing was written"}, "import", in)
	src.fails(t, 1, []string{"NoNode"}, "get", "a/Keyspace")

	// A source holding only a reserved file under PATH: copy --delete
	// refuses, rather than deleting every destination file under PATH.
	plant(t, "only/"+rel)
	dst.ok(t, "put", "only/keep", "kept")
	r = src.run(t, "", "copy", "--delete", "--to", dst.spec(), "only")
	assert.Equal(t, "kept", dst.ok(t, "get", "only/keep"), "copy --delete of a source with only reserved files deleted the destination's file")
	require.Equal(t, 1, r.code, r.stderr)
	for _, w := range []string{"NoNode", "only files at reserved paths", "nothing was written"} {
		require.Contains(t, r.stderr, w)
	}
}

// runName is t's name made unique per run, so that -count=2 finds no
// store or root left by the run before.
func runName(t *testing.T) string {
	return t.Name() + "-" + rand.Text()[:8]
}

func TestReservedFilesMemory(t *testing.T) {
	t.Parallel()
	tg := target{impl: foreignImpl, addr: runName(t), root: "/r"}
	testReservedFiles(t, tg, "foreign-locks/cfg", func(t *testing.T, p string) {
		tg.withRoot(tg.root+"/src").ok(t, "put", p, "foreign")
	})
}

// On etcd, a key under <dir>/locks/ with no lease, written by a raw client.
func TestReservedFilesEtcd(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	tg := target{impl: "etcd2", addr: addr, root: "/" + runName(t)}
	testReservedFiles(t, tg, "locks/cfg", func(t *testing.T, p string) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}})
		require.NoError(t, err)
		defer cli.Close()
		_, err = cli.Put(t.Context(), tg.root+"/src/"+p, "foreign")
		require.NoError(t, err)
	})
}

// On Consul, a plain key <dir>/Lock (no lock flags, no session), written by
// a raw client.
func TestReservedFilesConsul(t *testing.T) {
	t.Parallel()
	addr := consultest.Start(t)
	tg := target{impl: "consul", addr: addr, root: "/" + runName(t)}
	testReservedFiles(t, tg, "Lock", func(t *testing.T, p string) {
		cli, err := api.NewClient(&api.Config{Address: addr})
		require.NoError(t, err)
		_, err = cli.KV().Put(&api.KVPair{Key: strings.TrimPrefix(tg.root, "/") + "/src/" + p, Value: []byte("foreign")}, nil)
		require.NoError(t, err)
	})
}

// On ZooKeeper, a persistent znode holding data under <dir>/locks/ (not a
// lock entry: no sequence, no session), written by a raw client.
func TestReservedFilesZooKeeper(t *testing.T) {
	t.Parallel()
	addr := zktest.Start(t)
	tg := target{impl: "zk2", addr: addr, root: "/" + runName(t)}
	testReservedFiles(t, tg, "locks/cfg", func(t *testing.T, p string) {
		c, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
		require.NoError(t, err)
		defer c.Close()
		full := tg.root + "/src/" + p
		parts := strings.Split(strings.TrimPrefix(full, "/"), "/")
		for i := 1; i < len(parts); i++ {
			_, err := c.Create("/"+strings.Join(parts[:i], "/"), nil, 0, zk.WorldACL(zk.PermAll))
			if err != nil && err != zk.ErrNodeExists {
				require.NoError(t, err)
			}
		}
		_, err = c.Create(full, []byte("foreign"), 0, zk.WorldACL(zk.PermAll))
		require.NoError(t, err)
	})
}
