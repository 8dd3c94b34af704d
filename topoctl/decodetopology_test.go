package topoctl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// vitessTopology is Vitess's own topology (testdata/vitess/README.md):
// global/ and zone1/, each a cell's files.
const vitessTopology = "../testdata/vitess/vitess-local"

// filesUnder lists the files under dir as store paths ("/a/b"), sorted.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		paths = append(paths, "/"+filepath.ToSlash(rel))
		return err
	}))
	slices.Sort(paths)
	return paths
}

// "topoctl get -R --decode /", as an operator types it, prints every
// record of Vitess's topology decoded, with no flag beyond the connection
// (no --protoset, no mode after --decode): readable JSON below each path,
// and with -o json one document per record, each with "decoded".
func TestGetDecodeVitessTopology(t *testing.T) {
	t.Parallel()
	mem := memoryTarget(t)
	for _, cell := range []string{"global", "zone1"} {
		t.Run(cell, func(t *testing.T) {
			tg := mem.withRoot("/vitess/" + cell)
			dir := filepath.Join(vitessTopology, cell)
			tg.ok(t, "import", dir)
			want := filesUnder(t, dir)
			require.NotEmpty(t, want)

			r := tg.run(t, "", "get", "-R", "--decode", "/")
			require.Equal(t, 0, r.code, r.stderr)
			assert.Empty(t, r.stderr, "every record decodes: no note")
			assert.NotContains(t, r.stdout, "needs --protoset")
			for _, p := range want {
				assert.Contains(t, r.stdout, p+"\n{", "%s is shown as JSON", p)
			}

			out := tg.ok(t, "get", "-R", "--decode", "-o", "json", "/")
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				var d struct {
					Path        string
					Decoded     json.RawMessage
					DecodeError string `json:"decode_error"`
				}
				require.NoError(t, json.Unmarshal([]byte(l), &d), l)
				assert.Empty(t, d.DecodeError, d.Path)
				assert.True(t, strings.HasPrefix(string(d.Decoded), "{"), "%s: decoded %s", d.Path, d.Decoded)
				got = append(got, d.Path)
			}
			assert.Equal(t, want, got, "one document per record")
		})
	}
}

// A bare --decode is the readable JSON; "--decode json PATH", "PATH
// --decode raw" and "--decode=json" keep their meaning, in get and watch.
func TestDecodeFlagSpellings(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	putCellInfo(t, tg, "zone1", "/vitess/zone1")
	const p = "/cells/zone1/CellInfo"
	const readable = "{\n  \"serverAddress\": \"127.0.0.1:2379\",\n  \"root\": \"/vitess/zone1\"\n}\n"
	const raw = "1: \"127.0.0.1:2379\"\n2: \"/vitess/zone1\"\n"
	for _, args := range [][]string{
		{"get", "--decode", p},
		{"get", p, "--decode"},
		{"get", "--decode", "json", p},
		{"get", p, "--decode", "json"},
		{"get", "--decode=json", p},
	} {
		assert.Equal(t, readable, tg.ok(t, args...), "%v", args)
	}
	for _, args := range [][]string{
		{"get", "--decode", "raw", p},
		{"get", p, "--decode", "raw"},
		{"get", "--decode=raw", p},
	} {
		assert.Equal(t, raw, tg.ok(t, args...), "%v", args)
	}
	assert.Equal(t, p+"\n"+readable, tg.ok(t, "get", "-R", "--decode", "/cells/"))
	assert.Equal(t, p+"\n"+raw, tg.ok(t, "get", "-R", "--decode", "raw", "/cells/"))
	tg.fails(t, 2, []string{"want raw or json"}, "get", "--decode=yaml", p)

	w := tg.start(t, "watch", "--decode", p)
	w.waitOutput(t, p+" 1\n"+readable)
	assert.Equal(t, 0, w.stop(t))
	w = tg.start(t, "watch", p, "--decode", "raw")
	w.waitOutput(t, p+" 1\n"+raw)
	assert.Equal(t, 0, w.stop(t))

	assert.Equal(t, []string{"get", "--decode=json", "-R", "--", "--decode", "raw"},
		joinDecodeValue([]string{"get", "--decode", "json", "-R", "--", "--decode", "raw"}), "after -- nothing is a flag")
}

// get FILE --decode, like get -R --decode, shows a lock's, an election's
// and a metadata file as the JSON or text they hold, with no --protoset
// (on etcd, where a lock's and a candidate's files are readable keys).
func TestGetDecodeLockElectionMetadata(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	tg := target{impl: "etcd2", addr: addr, root: "/decodetext"}
	tg.ok(t, "put", "keyspaces/commerce/Keyspace", "")
	holder := tg.start(t, "lock", "keyspaces/commerce")
	holder.waitOutput(t, "holding the lock")
	el := tg.start(t, "elect", "--id", "p1", "e1")
	el.waitOutput(t, "elected p1")
	tg.ok(t, "put", "metadata/owner", "team-vitess")

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer cli.Close()
	keyUnder := func(dir string) string {
		t.Helper()
		resp, err := cli.Get(t.Context(), tg.root+dir, clientv3.WithPrefix())
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1, dir)
		return strings.TrimPrefix(string(resp.Kvs[0].Key), tg.root)
	}
	lockFile := keyUnder("/keyspaces/commerce/locks/")
	candidate := keyUnder("/elections/e1/locks/")

	var lock string
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "get", "--decode", "json", lockFile)), &lock), "topoctl's lock holds text")
	assert.True(t, strings.HasPrefix(lock, "topoctl lock on "), lock)
	// Vitess describes a lock's holder in JSON: shown as that document.
	_, err = cli.Put(t.Context(), tg.root+"/keyspaces/customer/locks/7587", `{"Action":"Reshard","HostName":"h1","UserName":"vt"}`)
	require.NoError(t, err)
	assert.Equal(t, "{\n  \"Action\": \"Reshard\",\n  \"HostName\": \"h1\",\n  \"UserName\": \"vt\"\n}\n",
		tg.ok(t, "get", "--decode", "/keyspaces/customer/locks/7587"))
	assert.Equal(t, "\"p1\"\n", tg.ok(t, "get", candidate, "--decode"), "a candidate's id is text")
	assert.Equal(t, "\"team-vitess\"\n", tg.ok(t, "get", "--decode", "json", "/metadata/owner"))

	// The same as get -R --decode shows them.
	docs := tg.ok(t, "get", "-R", "--decode", "-o", "json", "/metadata/")
	assert.Contains(t, docs, `"decoded":"team-vitess"`)

	assert.Equal(t, 0, el.stop(t))
	assert.Equal(t, 0, holder.stop(t))
}
