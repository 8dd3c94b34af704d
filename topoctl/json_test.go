package topoctl

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// jsonKey is the one field-name style of topoctl's JSON: snake_case.
var jsonKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// checkJSONLines checks the shape of one command's -o json output: every
// line is one JSON value; no value is null (empty values are "" or []);
// every key is snake_case; every "version" (and "*_version") is a number,
// as is every "fencing_token". The values under "decoded" (protobuf JSON,
// the message's own names) and "env" (environment variable names) are data,
// not field names. It returns the decoded lines.
func checkJSONLines(t *testing.T, what, out string) []any {
	t.Helper()
	var vals []any
	for line := range strings.Lines(out) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var v any
		require.NoError(t, dec.Decode(&v), "%s: not one JSON value per line: %q", what, line)
		require.False(t, dec.More(), "%s: more than one JSON value on a line: %q", what, line)
		checkJSONValue(t, what, "$", v)
		vals = append(vals, v)
	}
	require.NotEmpty(t, vals, "%s printed no JSON", what)
	return vals
}

func checkJSONValue(t *testing.T, what, at string, v any) {
	t.Helper()
	switch v := v.(type) {
	case nil:
		assert.Fail(t, "null in JSON output", "%s: %s is null", what, at)
	case []any:
		for i, e := range v {
			checkJSONValue(t, what, at+"["+strconv.Itoa(i)+"]", e)
		}
	case map[string]any:
		for k, e := range v {
			assert.Regexp(t, jsonKey, k, "%s: key %s.%s is not snake_case", what, at, k)
			if k == "version" || strings.HasSuffix(k, "_version") || k == "fencing_token" {
				assert.IsType(t, json.Number(""), e, "%s: %s.%s is not a number: %#v", what, at, k, e)
			}
			if k == "decoded" || k == "env" {
				assert.NotNil(t, e, "%s: %s.%s is null", what, at, k)
				continue
			}
			checkJSONValue(t, what, at+"."+k, e)
		}
	}
}

// TestJSONOutput runs every command under -o json, on memorytopo (serve
// and cluster on a real etcd), and checks the shape of what it prints
// (checkJSONLines), including that rm and rm -R print JSON and that an
// empty value is "" rather than null or left out.
func TestJSONOutput(t *testing.T) {
	t.Parallel()
	// A store of its own per run (-count=N runs in one process).
	tg := target{impl: "memory", addr: t.TempDir(), root: "/topo"}
	j := func(args ...string) []any {
		t.Helper()
		out := tg.ok(t, append([]string{"-o", "json"}, args...)...)
		return checkJSONLines(t, strings.Join(args, " "), out)
	}
	bg := func(want string, args ...string) {
		t.Helper()
		b := tg.start(t, append([]string{"-o", "json"}, args...)...)
		b.waitOutput(t, want)
		b.stop(t)
		checkJSONLines(t, strings.Join(args, " "), b.stdout.String())
	}

	put := j("put", "/ks/Keyspace", "v")[0].(map[string]any)
	assert.Equal(t, "/ks/Keyspace", put["path"])
	j("put", "/ks/empty", "")
	j("put", "/ks/shards/0/Shard", "\x12\x02\x08\x01")
	got := j("get", "/ks/empty")[0].(map[string]any)
	assert.Equal(t, "", got["value"], "an empty value is \"\"")
	j("get", "--decode", "raw", "/ks/shards/0/Shard")
	items := j("get", "-R", "/ks/")[0].([]any)
	require.Len(t, items, 3)
	for _, it := range items {
		assert.Contains(t, it, "value", "get -R shows every value, empty ones too")
	}
	j("get", "-R", "--keys-only", "/ks/")
	j("ls", "/ks")
	j("ls", "-l", "-R", "/")
	j("tree", "-l", "/")
	j("stat", "/ks/Keyspace")
	j("stat", "/ks")

	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "in", "a"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in", "a", "f"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in", "empty"), nil, 0o600))
	j("import", "--dry-run", filepath.Join(dir, "in"), "/imported")
	j("import", filepath.Join(dir, "in"), "/imported")
	j("export", filepath.Join(dir, "out"))
	to := "memory:" + tg.addr + "-copy:/c"
	j("copy", "--dry-run", "--to", to)
	j("copy", "--to", to)
	j("put", "/imported/empty", "now different")
	diff := tg.run(t, "", "-o", "json", "diff", "--to", to)
	require.Equal(t, ExitFailure, diff.code, diff.stderr)
	d := checkJSONLines(t, "diff", diff.stdout)[0].(map[string]any)
	require.Len(t, d["differences"], 1)
	assert.Equal(t, map[string]any{"path": "/imported/empty", "kind": "differs", "from_bytes": json.Number("13"), "to_bytes": json.Number("0")},
		d["differences"].([]any)[0], "an empty side of a difference is 0, not left out")

	j("cell", "set", "zone1", "--server-address", "x", "--root", "/zone1")
	j("cell", "ls")
	j("cell", "alias", "create", "region1", "--cells", "zone1")
	j("cell", "alias", "get", "region1")
	j("cell", "alias", "update", "region1", "--cells", "zone1,zone2")
	j("cell", "alias", "ls")
	j("cell", "alias", "delete", "region1")
	j("leader", "primary")
	j("version")

	bg(`"fencing_token"`, "lock", "/ks")
	bg(`"elected"`, "elect", "--id", "me", "primary")
	bg(`"path"`, "watch", "/ks/empty")
	bg(`"path"`, "watch", "-R", "/ks/")

	rm := j("rm", "/ks/empty")[0].(map[string]any)
	assert.Equal(t, map[string]any{"path": "/ks/empty", "deleted": json.Number("1")}, rm)
	rmR := j("rm", "-R", "--force", "/ks")[0].(map[string]any)
	assert.Equal(t, map[string]any{"path": "/ks", "deleted": json.Number("2"), "reserved": []any{}}, rmR)

	// serve and cluster, on etcd.
	etcd := target{impl: "etcd2", addr: etcdtest.Start(t), root: "/" + t.Name()}
	checkJSONLines(t, "cluster status", etcd.ok(t, "-o", "json", "cluster", "status"))
	addrs, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	srv := target{noFlags: true, env: map[string]string{envDataDir: t.TempDir()}}
	s := srv.start(t, "-o", "json", "serve", "--listen-client-address", addrs[0], "--listen-peer-address", addrs[1])
	s.waitOutput(t, `"client_url"`)
	checkJSONLines(t, "serve", s.stdout.String())
	after := target{impl: "etcd2", addr: addrs[0], root: "/x"}
	checkJSONLines(t, "cluster size", after.ok(t, "-o", "json", "cluster", "size", "3"))
	s.stop(t)
	var buf bytes.Buffer
	buf.WriteString(s.stdout.String())
	checkJSONLines(t, "serve (stopped)", buf.String())
}
