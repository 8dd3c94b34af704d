package topoctl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestAcceptance runs the quickstart's acceptance sequence (docs/quickstart.md)
// for real: topoctl serve, import a Vitess-shaped topology (global cell and
// a cell, with a rewritten CellInfo), ls -R, decode records, copy the whole
// store to ZooKeeper and to Consul, diff each against etcd, export from
// Consul and compare byte for byte with the input. It always runs on a
// fixture it builds; when $TOPOKIT_SHARED_DATA, else the repository's
// sibling ../shared/data, holds Vitess's real topology and protoset, it
// runs on those too (and logs when they are not found).
func TestAcceptance(t *testing.T) {
	t.Parallel()
	addrs, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	etcdAddr := addrs[0]
	srv := target{noFlags: true, env: map[string]string{envDataDir: t.TempDir()}}
	serve := srv.start(t, "serve", "--listen-client-address", addrs[0], "--listen-peer-address", addrs[1])
	zkAddr := zktest.Start(t)
	consulAddr := consultest.Start(t)
	serve.waitOutput(t, "Stop it with Ctrl-C")
	stores := acceptanceStores{etcd: etcdAddr, zk: zkAddr, consul: consulAddr, exportDir: t.TempDir()}

	t.Run("fixture", func(t *testing.T) {
		in := buildFixture(t)
		stores.run(t, in, "fixture", func(t *testing.T, cell target) {
			// The record is the fixture's Tablet: field 1 a nested alias
			// {1: "zone1", 2: 100}, field 2 the hostname.
			assert.Equal(t, "1 {\n  1: \"zone1\"\n  2: 100\n}\n2: \"localhost\"\n",
				cell.ok(t, "get", "--decode", "raw", "/tablets/zone1-0000000100/Tablet"))
		})
	})

	if shared := sharedData(t); shared != "" {
		t.Run("vitess-local", func(t *testing.T) {
			ps := filepath.Join(shared, "vitess-topodata.protoset")
			stores.run(t, filepath.Join(shared, "vitess-local"), "vitess", func(t *testing.T, cell target) {
				var tablet map[string]any
				require.NoError(t, json.Unmarshal([]byte(cell.ok(t, "get", "--decode", "json", "--protoset", ps, "--type", "topodata.Tablet",
					"/tablets/zone1-0000000100/Tablet")), &tablet))
				assert.Equal(t, map[string]any{"cell": "zone1", "uid": float64(100)}, tablet["alias"])
				var vs map[string]any
				require.NoError(t, json.Unmarshal([]byte(cell.ok(t, "get", "--decode", "json", "--protoset", ps, "/SrvVSchema")), &vs))
				assert.Contains(t, vs["keyspaces"], "commerce")
				assert.Contains(t, vs["keyspaces"], "customer")

				// Every record decodes with no --type (the built-in map of
				// Vitess record names), the protoset from the environment.
				global := cell.withRoot(strings.TrimSuffix(cell.root, "zone1") + "global")
				for dir, tg := range map[string]target{"global": global, "zone1": cell} {
					tg.env = map[string]string{envProtoset: ps}
					require.NoError(t, filepath.WalkDir(filepath.Join(shared, "vitess-local", dir), func(p string, d os.DirEntry, err error) error {
						if err != nil || d.IsDir() {
							return err
						}
						rel, _ := filepath.Rel(filepath.Join(shared, "vitess-local", dir), p)
						r := tg.run(t, "", "get", "--decode", "json", "/"+filepath.ToSlash(rel))
						assert.Equal(t, 0, r.code, "%s/%s: %s", dir, rel, r.stderr)
						return nil
					}))
				}
				var ks map[string]any
				require.NoError(t, json.Unmarshal([]byte(global.ok(t, "get", "--decode", "json", "--protoset", ps, "/keyspaces/customer/VSchema")), &ks))
				assert.Equal(t, true, ks["sharded"])
				// A short --type, and bytes of another type are an error.
				cell.ok(t, "get", "--decode", "json", "--protoset", ps, "--type", "Tablet", "/tablets/zone1-0000000100/Tablet")
				cell.fails(t, 1, []string{"value is not a topodata.Keyspace"}, "get", "--decode", "json", "--protoset", ps, "--type", "Keyspace", "/tablets/zone1-0000000100/Tablet")
			})
		})
	}
}

// envSharedData names a directory holding vitess-local/ and
// vitess-topodata.protoset, for the optional vitess-local acceptance run.
const envSharedData = "TOPOKIT_SHARED_DATA"

// sharedData returns the directory with the Vitess topology: $TOPOKIT_SHARED_DATA
// when set, else ../shared/data beside the repository. It is optional: when
// it is not found, sharedData logs where it looked and returns "" (the
// fixture run does not need it).
func sharedData(t *testing.T) string {
	var d string
	if env := os.Getenv(envSharedData); env != "" {
		d = env
	} else {
		dir, err := os.Getwd()
		require.NoError(t, err)
		for ; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				break
			}
		}
		// Beside the repository, or beside the directory of worktrees
		// that holds it.
		d = filepath.Join(filepath.Dir(dir), "shared", "data")
		if _, err := os.Stat(d); err != nil {
			d = filepath.Join(filepath.Dir(filepath.Dir(dir)), "shared", "data")
		}
	}
	if _, err := os.Stat(filepath.Join(d, "vitess-local", "global")); err != nil {
		t.Logf("shared Vitess data not found (%v): the vitess-local acceptance run is left out; set %s to a directory holding vitess-local/ and vitess-topodata.protoset to include it", err, envSharedData)
		return ""
	}
	t.Logf("shared Vitess data: %s", d)
	return d
}

type acceptanceStores struct {
	etcd, zk, consul string
	// exportDir holds the exports, kept from one run to the next.
	exportDir string
}

// run is the acceptance sequence on input (a directory with global/ and
// zone1/), under the roots /<name>/global and /<name>/zone1.
// The sequence runs twice, as the quickstart says it can: the second run
// finds everything in place and succeeds.
func (s acceptanceStores) run(t *testing.T, input, name string, decode func(t *testing.T, cell target)) {
	for _, rerun := range []bool{false, true} {
		s.runOnce(t, input, name, decode, rerun)
	}
}

func (s acceptanceStores) runOnce(t *testing.T, input, name string, decode func(t *testing.T, cell target), rerun bool) {
	global := target{impl: "etcd2", addr: s.etcd, root: "/" + name + "/global"}
	cellRoot := "/" + name + "/zone1"

	// --overwrite: a second run finds the CellInfo rewritten below.
	assert.Contains(t, global.ok(t, "import", "--overwrite", filepath.Join(input, "global")), "imported")
	global.ok(t, "cell", "set", "zone1", "--server-address", s.etcd, "--root", cellRoot)
	assert.Equal(t, []string{"zone1", s.etcd, cellRoot}, strings.Fields(global.ok(t, "cell", "ls")))
	assert.Contains(t, global.ok(t, "--cell", "zone1", "import", filepath.Join(input, "zone1")), "imported")

	ls := global.ok(t, "ls", "-R", "/")
	assert.Contains(t, ls, "/cells/zone1/CellInfo\n")
	cellLs := global.ok(t, "--cell", "zone1", "ls", "-R", "/")
	assert.Contains(t, cellLs, "/tablets/zone1-0000000100/Tablet\n")
	cell := global
	cell.root = cellRoot
	assert.Equal(t, cellLs, cell.ok(t, "ls", "-R", "/"))
	decode(t, cell)
	var ci map[string]string
	require.NoError(t, json.Unmarshal([]byte(global.ok(t, "get", "--decode", "json", "/cells/zone1/CellInfo")), &ci))
	assert.Equal(t, map[string]string{"serverAddress": s.etcd, "root": cellRoot}, ci)

	whole := "etcd2:" + s.etcd + ":/" + name
	zk := "zk2:" + s.zk + ":/" + name
	consul := "consul:" + s.consul + ":" + name
	n := countFiles(t, input)
	for _, to := range []string{zk, consul} {
		if rerun {
			assert.Contains(t, global.ok(t, "copy", "--from", whole, "--to", to), "copied 0 files (0 bytes) from "+whole)
		} else {
			assert.Contains(t, global.ok(t, "copy", "--from", whole, "--to", to), "copied "+strconv.Itoa(n)+" files")
		}
		assert.Contains(t, global.ok(t, "diff", "--from", whole, "--to", to), "identical: "+strconv.Itoa(n)+" files")
	}

	out := filepath.Join(s.exportDir, name, "from-consul")
	fromConsul := target{impl: "consul", addr: s.consul, root: name}
	// --overwrite: a second run finds the directory of the first.
	assert.Contains(t, fromConsul.ok(t, "export", "--overwrite", out), "exported "+strconv.Itoa(n)+" files")
	// Byte for byte the input, except the CellInfo we rewrote on purpose,
	// which holds what etcd holds.
	ciPath := filepath.Join("global", "cells", "zone1", "CellInfo")
	assert.Equal(t, global.ok(t, "get", "/cells/zone1/CellInfo"), readFile(t, filepath.Join(out, ciPath)))
	require.NoError(t, os.Remove(filepath.Join(out, ciPath)))
	want := t.TempDir()
	require.NoError(t, os.CopyFS(want, os.DirFS(input)))
	require.NoError(t, os.Remove(filepath.Join(want, ciPath)))
	requireSameTree(t, want, out)
}

func readFile(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	return string(b)
}

func countFiles(t *testing.T, dir string) int {
	n := 0
	require.NoError(t, filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return err
	}))
	return n
}

// buildFixture writes a small Vitess-shaped topology: a global cell with a
// keyspace, a shard and a CellInfo pointing at an in-memory server, and a
// cell zone1 with a tablet and a SrvVSchema.
func buildFixture(t *testing.T) string {
	dir := t.TempDir()
	ci, err := proto.Marshal(&topodatapb.CellInfo{ServerAddress: "vitess-memory", Root: "/zone1"})
	require.NoError(t, err)
	var alias []byte
	alias = protowire.AppendTag(alias, 1, protowire.BytesType)
	alias = protowire.AppendString(alias, "zone1")
	alias = protowire.AppendTag(alias, 2, protowire.VarintType)
	alias = protowire.AppendVarint(alias, 100)
	var tablet []byte
	tablet = protowire.AppendTag(tablet, 1, protowire.BytesType)
	tablet = protowire.AppendBytes(tablet, alias)
	tablet = protowire.AppendTag(tablet, 2, protowire.BytesType)
	tablet = protowire.AppendString(tablet, "localhost")
	files := map[string][]byte{
		"global/cells/zone1/CellInfo":                        ci,
		"global/keyspaces/commerce/Keyspace":                 {},
		"global/keyspaces/commerce/shards/0/Shard":           {0x12, 0x02, 0x08, 0x01},
		"global/keyspaces/customer/shards/-80/Shard":         {0x0a, 0x00},
		"global/RoutingRules":                                {},
		"zone1/tablets/zone1-0000000100/Tablet":              tablet,
		"zone1/SrvVSchema":                                   {0x0a, 0x03, 'a', 'b', 'c', 0xff},
		"zone1/keyspaces/commerce/shards/0/ShardReplication": {0x00, 0x01, 0x02},
	}
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, b, 0o644))
	}
	return dir
}
