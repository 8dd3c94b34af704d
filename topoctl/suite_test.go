package topoctl

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/topokit/topokit/proto/topodatapb"
)

// capabilities says what a backend supports, for the scenarios that differ.
type capabilities struct {
	history bool // GetVersion works
}

// runSuite runs every end-to-end scenario against fresh targets from
// newTarget (a fresh root or store per call).
func runSuite(t *testing.T, newTarget func(t *testing.T) target, caps capabilities) {
	scenarios := []struct {
		name string
		fn   func(t *testing.T, tg target, caps capabilities)
	}{
		{"FilesAndListing", testFilesAndListing},
		{"PutSources", testPutSources},
		{"CompareAndSet", testCompareAndSet},
		{"GetVersion", testGetVersion},
		{"Decode", testDecode},
		{"Rm", testRm},
		{"BadInput", testBadInput},
		{"Watch", testWatch},
		{"WatchRecursive", testWatchRecursive},
		{"Lock", testLock},
		{"Elect", testElect},
		{"CopyDiff", testCopyDiff},
		{"ImportExport", testImportExport},
		{"Cell", testCell},
		{"CellAlias", testCellAlias},
		{"Errors", testErrors},
		{"Reads", testReads},
		{"Txn", func(t *testing.T, tg target, _ capabilities) { testTxn(t, tg) }},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			sc.fn(t, newTarget(t), caps)
		})
	}
}

func testFilesAndListing(t *testing.T, tg target, _ capabilities) {
	// An empty store lists as an empty root.
	require.Empty(t, tg.ok(t, "ls", "/"))

	v1 := strings.TrimSpace(tg.ok(t, "put", "/keyspaces/ks/Keyspace", "k1"))
	tg.ok(t, "put", "keyspaces/ks/shards/0/Shard", "s0")
	tg.ok(t, "put", "RoutingRules", "rr")

	assert.Equal(t, "RoutingRules\nkeyspaces\n", tg.ok(t, "ls"))
	assert.Equal(t, "Keyspace\nshards\n", tg.ok(t, "ls", "/keyspaces/ks"))
	assert.Equal(t, "/RoutingRules\n/keyspaces\n/keyspaces/ks\n/keyspaces/ks/Keyspace\n/keyspaces/ks/shards\n/keyspaces/ks/shards/0\n/keyspaces/ks/shards/0/Shard\n",
		tg.ok(t, "ls", "-R", "/"))

	long := tg.ok(t, "ls", "-l", "/keyspaces/ks")
	lines := strings.Split(strings.TrimSpace(long), "\n")
	require.Len(t, lines, 2)
	assert.Equal(t, []string{"file", "-", v1, "Keyspace"}, strings.Fields(lines[0]))
	assert.Equal(t, []string{"directory", "-", "-", "shards"}, strings.Fields(lines[1]))

	// ls of a file lists that file.
	assert.Equal(t, "Keyspace\n", tg.ok(t, "ls", "/keyspaces/ks/Keyspace"))

	var entries []entry
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "ls", "-l", "-R", "--output", "json", "/keyspaces")), &entries))
	require.Len(t, entries, 5)
	assert.Equal(t, entry{Name: "Keyspace", Path: "/keyspaces/ks/Keyspace", Type: "file", Version: jsonVersion(v1)}, entries[1])

	assert.Equal(t, "/keyspaces\n└── ks\n    ├── Keyspace\n    └── shards\n        └── 0\n            └── Shard\n", tg.ok(t, "tree", "/keyspaces"))
	assert.Contains(t, tg.ok(t, "tree", "-l", "/keyspaces"), "Keyspace  [file, version "+v1+"]")
	var tree []entry
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "tree", "-o", "json", "/")), &tree))
	require.Len(t, tree, 2)
	assert.Equal(t, "keyspaces", tree[1].Name)
	assert.Equal(t, "shards", tree[1].Children[0].Children[1].Name)

	assert.Equal(t, "k1", tg.ok(t, "get", "/keyspaces/ks/Keyspace"))
	var got struct {
		Path    string
		Version jsonVersion
		Value   []byte
	}
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "get", "-o", "json", "keyspaces/ks/Keyspace")), &got))
	assert.Equal(t, "/keyspaces/ks/Keyspace", got.Path)
	assert.Equal(t, jsonVersion(v1), got.Version)
	assert.Equal(t, []byte("k1"), got.Value)

	tg.fails(t, 1, []string{"NoNode", "nope"}, "get", "/nope")
	tg.fails(t, 1, []string{"NoNode", "nope"}, "ls", "/nope")
}

func testPutSources(t *testing.T, tg target, _ capabilities) {
	// From an argument, a file and standard input, byte for byte.
	tg.ok(t, "put", "a", "from-arg")
	assert.Equal(t, "from-arg", tg.ok(t, "get", "a"))

	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	f := filepath.Join(t.TempDir(), "v")
	require.NoError(t, os.WriteFile(f, bin, 0o600))
	tg.ok(t, "put", "b", "--file", f)
	assert.Equal(t, string(bin), tg.ok(t, "get", "b"))

	r := tg.run(t, "from\nstdin\n", "put", "c")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "from\nstdin\n", tg.ok(t, "get", "c"))

	var put map[string]any
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "put", "-o", "json", "d", "x")), &put))
	assert.Equal(t, "/d", put["path"])
	assert.IsType(t, float64(0), put["version"], "a number")

	// --create refuses an existing file and leaves it alone.
	tg.fails(t, 1, []string{"NodeExists", "a"}, "put", "--create", "a", "other")
	assert.Equal(t, "from-arg", tg.ok(t, "get", "a"))
	tg.ok(t, "put", "--create", "e", "new")
	assert.Equal(t, "new", tg.ok(t, "get", "e"))

	// Both an argument and --file is a usage error.
	tg.fails(t, 2, []string{"not both"}, "put", "a", "x", "--file", f)
	tg.fails(t, 2, []string{"--file"}, "put", "a", "--file", filepath.Join(t.TempDir(), "missing"))
}

func testCompareAndSet(t *testing.T, tg target, _ capabilities) {
	v1 := strings.TrimSpace(tg.ok(t, "put", "f", "one"))
	v2 := strings.TrimSpace(tg.ok(t, "put", "--if-version", v1, "f", "two"))
	assert.NotEqual(t, v1, v2)

	// A stale version: BadVersion, nothing written.
	tg.fails(t, 1, []string{"BadVersion", "f"}, "put", "--if-version", v1, "f", "three")
	assert.Equal(t, "two", tg.ok(t, "get", "f"))
	// A version on an absent file never creates it.
	tg.fails(t, 1, []string{"NoNode", "g"}, "put", "--if-version", v1, "g", "x")
	tg.fails(t, 1, []string{"NoNode"}, "get", "g")

	tg.fails(t, 1, []string{"BadVersion", "f"}, "rm", "--if-version", v1, "f")
	assert.Equal(t, "two", tg.ok(t, "get", "f"))
	tg.ok(t, "rm", "--if-version", v2, "f")
	tg.fails(t, 1, []string{"NoNode"}, "get", "f")

	tg.fails(t, 2, []string{"--if-version", "bad version"}, "put", "--if-version", "-3", "f", "x")
	tg.fails(t, 2, []string{"exclude"}, "put", "--create", "--if-version", "1", "f", "x")
}

func testGetVersion(t *testing.T, tg target, caps capabilities) {
	v1 := strings.TrimSpace(tg.ok(t, "put", "h", "old"))
	tg.ok(t, "put", "h", "new")
	if caps.history {
		assert.Equal(t, "old", tg.ok(t, "get", "--version", v1, "h"))
		assert.Equal(t, "new", tg.ok(t, "get", "h"))
		return
	}
	tg.fails(t, 1, []string{"NoImplementation", "keeps no history"}, "get", "--version", v1, "h")
}

// cellInfoProtoset is a FileDescriptorSet holding topokit's topodata.proto,
// written to a temporary file.
func cellInfoProtoset(t *testing.T) string {
	fds := &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{
		protodesc.ToFileDescriptorProto(topodatapb.File_topokit_topodata_topodata_proto),
	}}
	b, err := proto.Marshal(fds)
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "topodata.protoset")
	require.NoError(t, os.WriteFile(f, b, 0o600))
	return f
}

func testDecode(t *testing.T, tg target, _ capabilities) {
	ci, err := proto.Marshal(&topodatapb.CellInfo{ServerAddress: "127.0.0.1:2379", Root: "/vitess/zone1"})
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "ci")
	require.NoError(t, os.WriteFile(f, ci, 0o600))
	tg.ok(t, "put", "cells/zone1/CellInfo", "--file", f)

	assert.Equal(t, "1: \"127.0.0.1:2379\"\n2: \"/vitess/zone1\"\n", tg.ok(t, "get", "--decode", "raw", "cells/zone1/CellInfo"))

	ps := cellInfoProtoset(t)
	out := tg.ok(t, "get", "--decode", "json", "--protoset", ps, "--type", "topokit.topodata.CellInfo", "cells/zone1/CellInfo")
	var m map[string]string
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	assert.Equal(t, map[string]string{"serverAddress": "127.0.0.1:2379", "root": "/vitess/zone1"}, m)

	// The type is found from the file's name, and from the compiled-in
	// types without a protoset.
	assert.JSONEq(t, out, tg.ok(t, "get", "--decode", "json", "--protoset", ps, "cells/zone1/CellInfo"))
	assert.JSONEq(t, out, tg.ok(t, "get", "--decode", "json", "cells/zone1/CellInfo"))

	var got struct {
		Decoded map[string]string
	}
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "get", "-o", "json", "--decode", "json", "--protoset", ps, "cells/zone1/CellInfo")), &got))
	assert.Equal(t, "/vitess/zone1", got.Decoded["root"])

	// A nested message and a varint in the raw dump.
	nested := protoWire(t)
	require.NoError(t, os.WriteFile(f, nested, 0o600))
	tg.ok(t, "put", "nested", "--file", f)
	assert.Equal(t, "1: 150\n3 {\n  1: \"a\"\n  2: 7\n}\n4: \"\\xff\\x00\"\n", tg.ok(t, "get", "--decode", "raw", "nested"))

	tg.ok(t, "put", "garbage", "\xff\xff\xff")
	tg.fails(t, 1, []string{"not protobuf"}, "get", "--decode", "raw", "garbage")
	tg.fails(t, 1, []string{"not a topokit.topodata.CellInfo"}, "get", "--decode", "json", "--type", "topokit.topodata.CellInfo", "garbage")
	tg.fails(t, 2, []string{"no such message"}, "get", "--decode", "json", "--protoset", ps, "--type", "no.Such", "nested")
	tg.fails(t, 2, []string{"give --type"}, "get", "--decode", "json", "--protoset", ps, "nested")
	tg.fails(t, 2, []string{"--decode"}, "get", "--decode", "xml", "nested")
	require.NoError(t, os.WriteFile(f, []byte{0xff, 0xff, 0xff}, 0o600))
	tg.fails(t, 2, []string{"not a FileDescriptorSet"}, "get", "--decode", "json", "--protoset", f, "--type", "x.Y", "nested")
}

// protoWire builds: field 1 varint 150, field 3 message {1: "a", 2: 7},
// field 4 bytes ff 00.
func protoWire(t *testing.T) []byte {
	t.Helper()
	return []byte{0x08, 0x96, 0x01, 0x1a, 0x05, 0x0a, 0x01, 'a', 0x10, 0x07, 0x22, 0x02, 0xff, 0x00}
}

func testRm(t *testing.T, tg target, _ capabilities) {
	tg.ok(t, "put", "d/x", "1")
	tg.ok(t, "put", "d/sub/y", "2")
	tg.ok(t, "put", "dz", "3") // shares the prefix "d" but is not under d/
	tg.ok(t, "rm", "d/x")
	tg.fails(t, 1, []string{"NoNode", "d/x"}, "rm", "d/x")

	tg.fails(t, 2, []string{"--force"}, "rm", "-R", "d")
	assert.Equal(t, "2", tg.ok(t, "get", "d/sub/y"))
	r := tg.run(t, "", "rm", "-R", "--force", "/d")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "deleted 1 file under /d")
	tg.fails(t, 1, []string{"NoNode"}, "get", "d/sub/y")
	assert.Equal(t, "3", tg.ok(t, "get", "dz"))
	assert.Equal(t, "dz\n", tg.ok(t, "ls", "/"))

	// rm -R of a path with nothing under it deletes nothing, says so and
	// exits 0 (as docs/quickstart.md says; etcdctl del --prefix and
	// consul kv delete -recurse do the same).
	r = tg.run(t, "", "rm", "-R", "--force", "/nothing")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "deleted 0 files under /nothing\n")
	assert.Contains(t, r.stderr, "note: there were no files under /nothing in ")
	var j map[string]any
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "rm", "-R", "--force", "-o", "json", "/nothing")), &j))
	assert.Equal(t, map[string]any{"path": "/nothing", "deleted": float64(0), "reserved": []any{}}, j)
}

func testBadInput(t *testing.T, tg target, _ capabilities) {
	for _, args := range [][]string{
		{"get", "a//b"},
		{"get", "a/../b"},
		{"put", "a/", "x"},
		{"put", "/", "x"},
		{"ls", "a//b"},
		{"rm", "a/./b"},
		{"watch", "a//b"},
	} {
		tg.fails(t, 1, []string{"InvalidPath"}, args...)
	}
	// Too large a value: InvalidArgument, nothing written.
	big := filepath.Join(t.TempDir(), "big")
	require.NoError(t, os.WriteFile(big, make([]byte, 512*1024+1), 0o600))
	tg.fails(t, 1, []string{"InvalidArgument", "big"}, "put", "big", "--file", big)
	tg.fails(t, 1, []string{"NoNode"}, "get", "big")

	tg.fails(t, 2, []string{"unknown command"}, "frobnicate")
	tg.fails(t, 2, []string{"unknown flag"}, "ls", "--frob")
	tg.fails(t, 2, []string{"takes 1 argument"}, "get")
	tg.fails(t, 2, []string{"--output"}, "ls", "--output", "yaml")
	tg.fails(t, 2, []string{"IMPL:ADDR:ROOT"}, "copy", "--to", "nocolons")
	tg.fails(t, 2, []string{"needs --to"}, "copy")
}

func testWatch(t *testing.T, tg target, _ capabilities) {
	// A file not created yet, or a directory: the line says what to run
	// instead (it said only "node doesn't exist").
	tg.fails(t, 1, []string{"NoNode: /w does not exist (watch --wait /w waits for it to be created)"}, "watch", "w")
	tg.ok(t, "put", "wd/f", "v")
	tg.fails(t, 1, []string{"NoNode: /wd is a directory, not a file (ls /wd lists it; watch -R /wd follows every file under it)"}, "watch", "wd")
	tg.ok(t, "rm", "wd/f")
	// --wait waits for the file to be created, then watches it.
	waiting := tg.start(t, "watch", "--wait", "later")
	require.Eventually(t, func() bool { return strings.Contains(waiting.stderr.String(), "waiting for it to be created") }, time.Minute, 5*time.Millisecond)
	tg.ok(t, "put", "laterx", "not it")
	vl := strings.TrimSpace(tg.ok(t, "put", "later", "now"))
	waiting.waitOutput(t, "/later "+vl+" \"now\"\n")
	assert.NotContains(t, waiting.stdout.String(), "laterx")
	require.Equal(t, 0, waiting.stop(t), waiting.stderr.String())
	v1 := strings.TrimSpace(tg.ok(t, "put", "w", "one"))
	bg := tg.start(t, "watch", "w")
	bg.waitOutput(t, "/w "+v1+" \"one\"\n")
	v2 := strings.TrimSpace(tg.ok(t, "put", "w", "two"))
	bg.waitOutput(t, "/w "+v2+" \"two\"\n")
	tg.ok(t, "rm", "w")
	require.Equal(t, 0, bg.wait(t), bg.stderr.String())
	assert.True(t, strings.HasSuffix(bg.stdout.String(), "/w deleted\n"), bg.stdout.String())

	// A long value shows its first 200 bytes on a text line, unless --full.
	long := strings.Repeat("x", 300)
	vlong := strings.TrimSpace(tg.ok(t, "put", "w", long))
	bg = tg.start(t, "watch", "w")
	bg.waitOutput(t, "/w "+vlong+" \""+long[:200]+"\" ... (300 bytes; --full prints all)\n")
	require.Equal(t, 0, bg.stop(t), bg.stderr.String())
	bg = tg.start(t, "watch", "--full", "w")
	bg.waitOutput(t, "/w "+vlong+" \""+long+"\"\n")
	require.Equal(t, 0, bg.stop(t), bg.stderr.String())

	// Interrupted: a normal end.
	tg.ok(t, "put", "w", "three")
	bg = tg.start(t, "watch", "-o", "json", "w")
	bg.waitOutput(t, `"path":"/w"`)
	require.Equal(t, 0, bg.stop(t), bg.stderr.String())
	var ev watchEvent
	require.NoError(t, json.Unmarshal([]byte(strings.Split(bg.stdout.String(), "\n")[0]), &ev))
	assert.Equal(t, []byte("three"), ev.Value)
}

func testWatchRecursive(t *testing.T, tg target, _ capabilities) {
	va := strings.TrimSpace(tg.ok(t, "put", "ks/a", "1"))
	tg.ok(t, "put", "other", "x")
	bg := tg.start(t, "watch", "-R", "ks/")
	bg.waitOutput(t, "/ks/a "+va+" \"1\"\n")
	vb := strings.TrimSpace(tg.ok(t, "put", "ks/sub/b", "2"))
	bg.waitOutput(t, "/ks/sub/b "+vb+" \"2\"\n")
	tg.ok(t, "rm", "ks/a")
	bg.waitOutput(t, "/ks/a deleted\n")
	tg.ok(t, "put", "other", "y")
	vb2 := strings.TrimSpace(tg.ok(t, "put", "ks/sub/b", "3"))
	bg.waitOutput(t, "/ks/sub/b "+vb2+" \"3\"\n")
	require.Equal(t, 0, bg.stop(t), bg.stderr.String())
	assert.NotContains(t, bg.stdout.String(), "other")

	// An empty prefix is not an error.
	bg = tg.start(t, "watch", "-R", "empty/")
	tg.ok(t, "put", "empty/n", "v")
	bg.waitOutput(t, "/empty/n ")
	require.Equal(t, 0, bg.stop(t))
}

func testLock(t *testing.T, tg target, caps capabilities) {
	// Lock needs files under the directory.
	tg.fails(t, 1, []string{"NoNode"}, "lock", "ks", "--", "true")
	tg.ok(t, "put", "ks/Keyspace", "k")

	// The command's status and output come through.
	r := tg.run(t, "", "lock", "ks", "--", "sh", "-c", "echo inside; exit 3")
	assert.Equal(t, 3, r.code, r.stderr)
	assert.Equal(t, "inside\n", r.stdout)
	assert.Equal(t, "ok\n", tg.ok(t, "lock", "--ttl", "20s", "ks", "--", "echo", "ok"))

	// The command gets the lock's path and fencing token: positive, and
	// greater for each later holder.
	var tokens []int64
	for range 2 {
		env := tg.ok(t, "lock", "ks", "--", "sh", "-c", `echo "$TOPOCTL_LOCK_PATH $TOPOCTL_LOCK_FENCING_TOKEN"`)
		require.Regexp(t, `^/ks \d+\n$`, env)
		n, err := strconv.ParseInt(strings.Fields(env)[1], 10, 64)
		require.NoError(t, err)
		tokens = append(tokens, n)
	}
	assert.Positive(t, tokens[0])
	assert.Greater(t, tokens[1], tokens[0], "a later holder's fencing token is greater")

	// Held by one run, --try fails at once with NodeExists.
	holder := tg.start(t, "lock", "ks", "--", "sh", "-c", "echo held; exec sleep 600")
	holder.waitOutput(t, "held\n")
	// Every backend names the holder (ZooKeeper's on a session of its own:
	// lock entries are not files there).
	tg.fails(t, 1, []string{"NodeExists", "held by someone else, by \"topoctl lock on ", "echo held"}, "lock", "--try", "ks", "--", "true")
	// The lock entry shows as ephemeral in a full listing.
	assert.Regexp(t, `(?m)ephemeral`, tg.ok(t, "ls", "-l", "ks"))

	// A waiting lock gives up at --timeout.
	tg.fails(t, 1, []string{"Timeout"}, "--timeout", "200ms", "lock", "ks", "--", "true")

	// Interrupted: the command is stopped (SIGTERM), the lock released,
	// exit 130.
	assert.Equal(t, ExitInterrupted, holder.stop(t))
	assert.Contains(t, holder.stderr.String(), "sending SIGTERM to the command's process group")
	assert.Equal(t, "free\n", tg.ok(t, "lock", "--try", "ks", "--", "echo", "free"))

	// With no command, the lock is held until interrupted (exit 0).
	hold := tg.start(t, "lock", "ks")
	hold.waitOutput(t, "holding the lock on /ks (fencing token ")
	assert.Regexp(t, `^holding the lock on /ks \(fencing token \d+\); Ctrl-C or SIGTERM releases it\n$`, hold.stdout.String())
	tg.fails(t, 1, []string{"NodeExists", "held by someone else"}, "lock", "--try", "ks", "--", "true")
	assert.Equal(t, 0, hold.stop(t), hold.stderr.String())
	assert.Equal(t, "free\n", tg.ok(t, "lock", "--try", "ks", "--", "echo", "free"))
	// Nothing is left behind.
	assert.Equal(t, "Keyspace\n", tg.ok(t, "ls", "ks"))

	tg.fails(t, 127, []string{"starting"}, "lock", "ks", "--", "/no/such/command")
	// A named lock needs no directory.
	assert.Equal(t, "named\n", tg.ok(t, "lock", "--named", "no/such/dir", "--", "echo", "named"))
	tg.fails(t, 2, []string{"--named"}, "lock", "--named", "--try", "ks", "--", "true")
	tg.fails(t, 2, []string{"needs a directory"}, "lock")
	tg.fails(t, 2, []string{"drop --ttl"}, "lock", "--try", "--ttl", "5s", "ks", "--", "true")
}

func testElect(t *testing.T, tg target, _ capabilities) {
	r := tg.run(t, "", "leader", "primary")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "has no leader")

	a := tg.start(t, "elect", "primary", "--id", "alpha")
	a.waitOutput(t, "elected alpha\n")
	a.waitOutput(t, "leader alpha\n")
	assert.Equal(t, "alpha\n", tg.ok(t, "leader", "primary"))
	var l map[string]any
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "leader", "-o", "json", "primary")), &l))
	assert.Equal(t, "primary", l["name"])
	assert.Equal(t, "alpha", l["leader"])
	assert.Equal(t, "", l["value"])
	assert.Positive(t, l["token"], "the leader's fencing token")

	obs := tg.start(t, "leader", "--observe", "primary")
	obs.waitOutput(t, "alpha\n")
	b := tg.start(t, "elect", "-o", "json", "primary", "--id", "beta")
	b.waitOutput(t, `{"event":"leader","id":"alpha"}`)
	assert.NotContains(t, b.stdout.String(), "elected")

	require.Equal(t, 0, a.stop(t), a.stderr.String())
	b.waitOutput(t, `{"event":"elected","id":"beta"}`)
	assert.Equal(t, "beta\n", tg.ok(t, "leader", "primary"))
	obs.waitOutput(t, "alpha\nbeta\n")
	require.Equal(t, 0, obs.stop(t), obs.stderr.String())
	require.Equal(t, 0, b.stop(t), b.stderr.String())
	assert.Empty(t, tg.ok(t, "leader", "primary"))

	// Leader values: elect --value publishes, leader and leader --observe
	// show it (etcdctl elect NAME VALUE / elect -l).
	jobs := tg.start(t, "leader", "--observe", "-o", "json", "withvalue")
	c := tg.start(t, "elect", "withvalue", "--id", "gamma", "--value", "10.0.0.7:8080")
	c.waitOutput(t, "elected gamma\n")
	assert.Equal(t, "gamma 10.0.0.7:8080\n", tg.ok(t, "leader", "withvalue"))
	jobs.waitOutput(t, `"leader":"gamma","value":"10.0.0.7:8080"`)
	require.Equal(t, 0, c.stop(t), c.stderr.String())
	jobs.waitOutput(t, `{"name":"withvalue","leader":"","value":"","token":0}`)
	require.Equal(t, 0, jobs.stop(t), jobs.stderr.String())
}

func testCopyDiff(t *testing.T, tg target, _ capabilities) {
	src, dst := tg.withRoot(tg.root+"/src"), tg.withRoot(tg.root+"/dst")
	bin := string([]byte{0, 1, 2, 0xff})
	src.ok(t, "put", "a", "1")
	src.ok(t, "put", "ks/b", bin)
	src.ok(t, "put", "ks/c/d", "3")
	// A held lock and an election must not be copied.
	holder := src.start(t, "lock", "ks", "--", "sh", "-c", "echo held; exec sleep 600")
	holder.waitOutput(t, "held\n")
	el := src.start(t, "elect", "e1", "--id", "x")
	el.waitOutput(t, "elected x")

	out := src.ok(t, "copy", "--dry-run", "--to", dst.spec())
	assert.Contains(t, out, "would write /ks/b (4 bytes)")
	assert.Contains(t, out, "dry run: 3 files (3 new, 0 overwritten, 0 identical, 0 deleted)")
	assert.Contains(t, out, "; would write 3 files (6 bytes); nothing written")
	var plan struct {
		DryRun bool `json:"dry_run"`
		Files  []struct{ Path string }
		Bytes  int
	}
	require.NoError(t, json.Unmarshal([]byte(src.ok(t, "copy", "--dry-run", "-o", "json", "--to", dst.spec())), &plan))
	assert.True(t, plan.DryRun)
	assert.Len(t, plan.Files, 3)
	assert.Equal(t, 6, plan.Bytes)
	assert.Empty(t, dst.ok(t, "ls", "/"))

	out = src.ok(t, "copy", "--to", dst.spec())
	assert.Contains(t, out, "copied 3 files (6 bytes)")
	assert.Equal(t, "/a\n/ks\n/ks/b\n/ks/c\n/ks/c/d\n", dst.ok(t, "ls", "-R"))
	assert.Equal(t, bin, dst.ok(t, "get", "ks/b"))
	src.ok(t, "diff", "--to", dst.spec())
	src.ok(t, "diff", "--from", dst.spec(), "--to", src.spec())

	// A second copy skips identical files; a file that differs conflicts
	// before anything is written.
	src.ok(t, "put", "new", "n")
	src.ok(t, "put", "a", "changed-a")
	src.fails(t, 1, []string{"NodeExists", "1 of the 4 files already exists", "nothing was written"}, "copy", "--to", dst.spec())
	dst.fails(t, 1, []string{"NoNode"}, "get", "new")
	out = src.ok(t, "copy", "--dry-run", "--overwrite", "--to", dst.spec())
	assert.Contains(t, out, "would write /a (9 bytes) (overwrite)")
	assert.NotContains(t, out, "/ks/b", "identical files are counted, not listed")
	assert.Contains(t, out, "would write /new (1 byte)\n")
	assert.Contains(t, out, "(1 new, 1 overwritten, 2 identical, 0 deleted)")
	assert.Contains(t, src.ok(t, "copy", "--overwrite", "--to", dst.spec()), "copied 2 files (10 bytes)")
	assert.Contains(t, src.ok(t, "copy", "--to", dst.spec()), "copied 0 files (0 bytes)")
	src.ok(t, "put", "a", "1")
	src.ok(t, "copy", "--overwrite", "--to", dst.spec())
	dst.ok(t, "rm", "new")

	// diff lists every difference and exits 1.
	dst.ok(t, "put", "ks/c/d", "changed")
	dst.ok(t, "put", "extra", "e")
	r := src.run(t, "", "diff", "--to", dst.spec())
	require.Equal(t, 1, r.code, r.stderr)
	assert.Equal(t, "differs: /ks/c/d (1 byte vs 7 bytes)\nonly in from: /new\nonly in to: /extra\n", sortLines(r.stdout))
	var d struct {
		Identical   bool
		Differences []difference
	}
	r = src.run(t, "", "diff", "-o", "json", "--to", dst.spec())
	require.Equal(t, 1, r.code)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &d))
	assert.False(t, d.Identical)
	assert.Len(t, d.Differences, 3)

	// --overwrite, and a sub-tree.
	src.ok(t, "copy", "--overwrite", "--to", dst.spec(), "ks")
	assert.Equal(t, "3", dst.ok(t, "get", "ks/c/d"))
	src.ok(t, "diff", "--to", dst.spec(), "ks")

	// --delete removes what only the destination has (here /extra), after
	// --dry-run names it.
	out = src.ok(t, "copy", "--delete", "--dry-run", "--to", dst.spec())
	assert.Contains(t, out, "would delete /extra\n")
	assert.Contains(t, out, "would write /new (1 byte)\n")
	assert.Contains(t, src.ok(t, "copy", "--delete", "--to", dst.spec()), "copied 1 file (1 byte)")
	assert.Contains(t, src.ok(t, "copy", "--delete", "--to", dst.spec()), "copied 0 files")
	src.ok(t, "diff", "--to", dst.spec())

	// Nothing under the source: an error, nothing written.
	empty := tg.withRoot(tg.root + "/nothing")
	empty.fails(t, 1, []string{"NoNode", "no files under / in", "empty or absent"}, "copy", "--to", dst.spec())
	empty.fails(t, 1, []string{"NoNode", "empty or absent"}, "diff", "--to", tg.withRoot(tg.root+"/nothing2").spec())
	empty.fails(t, 1, []string{"NoNode", "empty or absent"}, "export", filepath.Join(t.TempDir(), "e"))

	// A destination inside the source's tree is refused (each run would
	// copy the last run's copy again, one level deeper); with --delete so
	// is a source inside the destination's (it would delete its own files).
	before := tg.ok(t, "ls", "-R")
	src.fails(t, 1, []string{"InvalidArgument", "inside the source", "nothing was written"}, "copy", "--to", src.withRoot(src.root+"/backup").spec())
	src.fails(t, 1, []string{"InvalidArgument", "inside the source", "nothing was written"}, "copy", "--to", src.withRoot(src.root+"/ks").spec(), "ks")
	tg.withRoot(src.root+"/ks").fails(t, 1, []string{"InvalidArgument", "--delete would delete the source's own files", "nothing was written"}, "copy", "--delete", "--to", src.spec())
	assert.Equal(t, before, tg.ok(t, "ls", "-R"))

	holder.stop(t)
	el.stop(t)
}

func sortLines(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slicesSort(lines)
	return strings.Join(lines, "\n") + "\n"
}

func testImportExport(t *testing.T, tg target, _ capabilities) {
	in := t.TempDir()
	files := map[string][]byte{}
	for i := range 20 {
		b := make([]byte, 50+i*37)
		for j := range b {
			b[j] = byte(i*31 + j*7)
		}
		p := filepath.Join("ks"+strconv.Itoa(i%3), "shards", strconv.Itoa(i), "Shard")
		files[p] = b
	}
	files["RoutingRules"] = []byte{}
	for p, b := range files {
		require.NoError(t, os.MkdirAll(filepath.Join(in, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(in, p), b, 0o600))
	}

	out := tg.ok(t, "import", "--dry-run", in)
	assert.Contains(t, out, "dry run: 21 files")
	assert.Empty(t, tg.ok(t, "ls"))
	assert.Contains(t, tg.ok(t, "import", in), "imported 21 files")
	assert.Equal(t, string(files["ks1/shards/4/Shard"]), tg.ok(t, "get", "ks1/shards/4/Shard"))

	// Importing again skips identical files; a changed file conflicts and
	// nothing is written.
	assert.Contains(t, tg.ok(t, "import", in), "imported 0 files (0 bytes)")
	tg.ok(t, "put", "ks1/shards/4/Shard", "changed")
	tg.fails(t, 1, []string{"NodeExists", "/ks1/shards/4/Shard", "1 of the 21 files", "nothing was written"}, "import", in)
	assert.Contains(t, tg.ok(t, "import", "--overwrite", in), "imported 1 file")

	exp := filepath.Join(t.TempDir(), "out")
	assert.Contains(t, tg.ok(t, "export", exp), "exported 21 files")
	requireSameTree(t, in, exp)
	var sum map[string]any
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "export", "-o", "json", filepath.Join(t.TempDir(), "j"))), &sum))
	assert.Equal(t, float64(21), sum["exported"])

	// Export of a sub-tree, then import at another path, round-trips.
	sub := filepath.Join(t.TempDir(), "sub")
	tg.ok(t, "export", sub, "ks2")
	tg.ok(t, "import", sub, "copy/ks2")
	tg.ok(t, "diff", "--from", tg.spec(), "--to", tg.withRoot(tg.root+"/copy").spec(), "ks2")

	tg.fails(t, 2, []string{"not empty"}, "export", exp)
	tg.ok(t, "rm", "-R", "--force", "copy")
	tg.ok(t, "export", "--overwrite", exp)
	requireSameTree(t, in, exp)

	// A file that is also a directory cannot be exported.
	tg.ok(t, "put", "ks0", "clash")
	tg.fails(t, 1, []string{"InvalidPath", "both a file and a directory"}, "export", filepath.Join(t.TempDir(), "x"))

	// A directory with no files is an error, as copy of an empty source.
	tg.fails(t, 1, []string{"no files under", "nothing to import"}, "import", t.TempDir(), "none")
	tg.fails(t, 1, []string{"NoNode"}, "ls", "none")

	// Import refuses symbolic links before writing anything.
	bad := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bad, "a"), []byte("a"), 0o600))
	require.NoError(t, os.Symlink("a", filepath.Join(bad, "b")))
	tg.fails(t, 1, []string{"not a regular file"}, "import", bad, "bad")
	tg.fails(t, 1, []string{"NoNode"}, "get", "bad/a")
}

// requireSameTree checks that two local directories hold the same files
// with the same bytes.
func requireSameTree(t *testing.T, a, b string) {
	t.Helper()
	read := func(root string) map[string]string {
		m := map[string]string{}
		require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			bs, err := os.ReadFile(p)
			m[rel] = fmt.Sprintf("%d bytes, sha256 %x", len(bs), sha256.Sum256(bs))
			return err
		}))
		return m
	}
	require.Equal(t, read(a), read(b))
}

func testCell(t *testing.T, tg target, _ capabilities) {
	cellRoot := tg.root + "-zone1"
	cell := tg.withRoot(cellRoot)
	assert.Empty(t, tg.ok(t, "cell", "ls"))
	tg.ok(t, "cell", "set", "zone1", "--server-address", tg.addr, "--root", cellRoot)
	assert.Equal(t, []string{"zone1", tg.addr, cellRoot}, strings.Fields(tg.ok(t, "cell", "ls")))

	tg.ok(t, "--cell", "zone1", "put", "tablets/t1/Tablet", "tab")
	assert.Equal(t, "tab", cell.ok(t, "get", "tablets/t1/Tablet"))
	assert.Equal(t, "tab", tg.ok(t, "--cell", "zone1", "get", "tablets/t1/Tablet"))
	tg.fails(t, 1, []string{"NoNode"}, "get", "tablets/t1/Tablet")
	tg.fails(t, 1, []string{"NoNode", "cell zone2"}, "--cell", "zone2", "ls")

	// The cell also comes from the environment; the flag wins.
	env := tg
	env.env = map[string]string{envCell: "zone1"}
	assert.Equal(t, "tab", env.ok(t, "get", "tablets/t1/Tablet"))
	env.fails(t, 1, []string{"NoNode"}, "--cell", "global", "get", "tablets/t1/Tablet")

	var cells []cellRow
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "cell", "ls", "-o", "json")), &cells))
	assert.Equal(t, []cellRow{{"zone1", tg.addr, cellRoot}}, cells)
}

// testCellAlias: cell alias create, get, update, delete and ls, with
// Vitess's rules (a cell in at most one alias, no alias named like a cell)
// and Vitess's layout (cells_aliases/<alias>/CellsAlias, a CellsAlias
// protobuf).
func testCellAlias(t *testing.T, tg target, _ capabilities) {
	assert.Empty(t, tg.ok(t, "cell", "alias", "ls"))
	assert.Equal(t, "[]\n", tg.ok(t, "cell", "alias", "ls", "-o", "json"))
	tg.ok(t, "cell", "alias", "create", "region1", "--cells", "zone1,zone2")
	tg.ok(t, "cell", "alias", "create", "region1", "--cells", "zone1", "--cells", "zone2") // identical: no-op
	assert.Equal(t, "zone1\nzone2\n", tg.ok(t, "cell", "alias", "get", "region1"))
	var row aliasRow
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "cell", "alias", "get", "region1", "-o", "json")), &row))
	assert.Equal(t, aliasRow{"region1", []string{"zone1", "zone2"}}, row)

	// Vitess's layout: the record is a CellsAlias protobuf at
	// cells_aliases/region1/CellsAlias.
	b, err := proto.Marshal(&topodatapb.CellsAlias{Cells: []string{"zone1", "zone2"}})
	require.NoError(t, err)
	assert.Equal(t, string(b), tg.ok(t, "get", "cells_aliases/region1/CellsAlias"))

	// The rules: another record for the alias, a cell in two aliases, an
	// alias named like a cell.
	tg.fails(t, 1, []string{"NodeExists"}, "cell", "alias", "create", "region1", "--cells", "zone3")
	tg.fails(t, 1, []string{"NodeExists", "zone2", "region1"}, "cell", "alias", "create", "region2", "--cells", "zone2,zone3")
	tg.fails(t, 1, []string{"NodeExists", "zone2", "region1"}, "cell", "alias", "update", "region2", "--cells", "zone2")
	tg.ok(t, "cell", "set", "zone9", "--server-address", "x", "--root", "/x")
	tg.fails(t, 1, []string{"NodeExists", "name of a cell"}, "cell", "alias", "create", "zone9", "--cells", "zone8")
	tg.fails(t, 1, []string{"InvalidArgument"}, "cell", "alias", "create", "region2", "--cells", "global")
	tg.fails(t, ExitUsage, []string{"needs --cells"}, "cell", "alias", "create", "region2")
	tg.fails(t, ExitUsage, []string{"--cell does not apply"}, "--cell", "zone1", "cell", "alias", "ls")
	tg.fails(t, 1, []string{"NoNode"}, "cell", "alias", "get", "region2")

	// update replaces the cells (creating an absent alias); ls lists all.
	tg.ok(t, "cell", "alias", "update", "region1", "--cells", "zone1")
	tg.ok(t, "cell", "alias", "update", "region2", "--cells", "zone2,zone3")
	assert.Equal(t, [][]string{{"region1", "zone1"}, {"region2", "zone2,zone3"}}, fieldsOf(tg.ok(t, "cell", "alias", "ls")))
	var rows []aliasRow
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "cell", "alias", "ls", "-o", "json")), &rows))
	assert.Equal(t, []aliasRow{{"region1", []string{"zone1"}}, {"region2", []string{"zone2", "zone3"}}}, rows)

	tg.ok(t, "cell", "alias", "delete", "region1")
	tg.fails(t, 1, []string{"NoNode"}, "cell", "alias", "delete", "region1")
	tg.fails(t, 1, []string{"NoNode"}, "cell", "alias", "get", "region1")
	assert.Equal(t, [][]string{{"region2", "zone2,zone3"}}, fieldsOf(tg.ok(t, "cell", "alias", "ls")))
}

// fieldsOf splits output into lines of fields.
func fieldsOf(out string) [][]string {
	var rows [][]string
	for l := range strings.Lines(out) {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

// testErrors: error lines say what is wrong, with the paths as typed.
func testErrors(t *testing.T, tg target, caps capabilities) {
	r := tg.run(t, "", "ls", "/")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "the root is empty or absent")

	tg.ok(t, "put", "d/f", "v")
	// A directory given where a file is wanted: the line says so first,
	// not "node doesn't exist".
	for _, cmd := range []string{"get", "rm"} {
		r := tg.fails(t, 1, nil, cmd, "d")
		assert.Regexp(t, `^topoctl: NoNode: /d is a directory, not a file \(ls /d lists it`, r.stderr)
		// Each says the command's own form for a directory: get's reads
		// (it named rm -R --force, which deletes, to a user who wanted
		// to read).
		want := map[string]string{"get": "get -R /d prints every file under it", "rm": "rm -R --force /d deletes every file under it"}[cmd]
		assert.Contains(t, r.stderr, want)
		if cmd == "get" {
			assert.NotContains(t, r.stderr, "rm -R")
		}
		assert.NotContains(t, r.stderr, "doesn't exist")
	}
	// A file given where a lock directory is wanted: the line says it is
	// a file, that locks go on directories, and about --named.
	r = tg.fails(t, 1, nil, "lock", "d/f", "--", "true")
	assert.Regexp(t, `^topoctl: InvalidArgument: /d/f is a file, not a directory: locks are taken on directories \(lock /d\), or use --named`, r.stderr)
	assert.NotContains(t, r.stderr, "doesn't exist")
	// A directory that does not exist (no file under it): the line says
	// what lock takes, and about --named, in the same way.
	r = tg.fails(t, 1, nil, "lock", "nosuchdir", "--", "true")
	assert.Regexp(t, `^topoctl: NoNode: /nosuchdir holds no file: locks are taken on directories that hold at least one file, or use --named to take a named lock on any path\n$`, r.stderr)
	r = tg.fails(t, 1, []string{"NoNode", "/nope"}, "get", "nope")
	assert.NotContains(t, r.stderr, " nope")

	big := filepath.Join(t.TempDir(), "big")
	require.NoError(t, os.WriteFile(big, make([]byte, 512*1024+1), 0o600))
	tg.fails(t, 1, []string{"InvalidArgument", "/big", "524289 bytes", "524288 bytes (512 KiB)"}, "put", "big", "--file", big)

	// Control bytes in a path are escaped on the error line.
	r = tg.run(t, "", "get", "x\x1b[31my")
	require.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `x\x1b[31my`)
	assert.NotContains(t, r.stderr, "\x1b")

	if caps.history {
		v := strings.TrimSpace(tg.ok(t, "put", "h", "one"))
		tg.ok(t, "put", "h", "two")
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		r := tg.fails(t, 1, []string{"NoNode", "/h", "version " + strconv.Itoa(n-1) + " of this file is not kept", "current version is"}, "get", "--version", strconv.Itoa(n-1), "h")
		// Each thing is said once: the file exists, so no "doesn't exist".
		assert.Regexp(t, `^topoctl: NoNode: /h: version `+strconv.Itoa(n-1)+` of this file is not kept \(never one of its versions, or compacted away\); its current version is \d+\n$`, r.stderr)
	}

	// Commands that only group others, and unknown ones, are usage errors.
	tg.fails(t, 2, []string{`unknown command "remove" for "topoctl cell"`, "Run 'topoctl cell --help'"}, "cell", "remove", "zone1")
	tg.fails(t, 2, []string{"topoctl cell needs a subcommand: alias, get, ls, rm, set"}, "cell")
	tg.fails(t, 2, []string{"unknown command"}, "frobnicate")
	// The root flag has no short name: -r is not taken for it.
	tg.fails(t, 2, []string{"unknown shorthand flag: 'r'"}, "ls", "-r", "/keyspaces")
}

// testReads: get -R / --keys-only, stat, version, completion.
func testReads(t *testing.T, tg target, _ capabilities) {
	va := strings.TrimSpace(tg.ok(t, "put", "ks/a", "one"))
	tg.ok(t, "put", "ks/sub/b", "two\nlines")
	tg.ok(t, "put", "ksx", "not under ks/")
	assert.Equal(t, "/ks/a\none\n/ks/sub/b\n\"two\\nlines\"\n", tg.ok(t, "get", "-R", "ks/"))
	// -R (implied by --keys-only) is the directory's subtree; --prefix a
	// plain string prefix.
	assert.Equal(t, "/ks/a\n/ks/sub/b\n", tg.ok(t, "get", "--keys-only", "ks"))
	assert.Equal(t, "/ks/a\n/ks/sub/b\n/ksx\n", tg.ok(t, "get", "--prefix", "--keys-only", "ks"))
	assert.Equal(t, "/ksx\nnot under ks/\n", tg.ok(t, "get", "--prefix", "ksx"))
	tg.fails(t, 2, []string{"give one"}, "get", "-R", "--prefix", "ks")
	var items []struct {
		Path    string
		Version jsonVersion
		Value   []byte
	}
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "get", "-R", "-o", "json", "ks/")), &items))
	require.Len(t, items, 2)
	assert.Equal(t, "/ks/a", items[0].Path)
	assert.Equal(t, jsonVersion(va), items[0].Version)
	assert.Equal(t, []byte("one"), items[0].Value)
	r := tg.run(t, "", "get", "-R", "nothing/")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "no file under /nothing in ")
	assert.Contains(t, r.stderr, "a lock's or an election's entries are not files: ls -R -l lists them")
	r = tg.run(t, "", "get", "--prefix", "nothing")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "no file under the prefix /nothing ")
	tg.fails(t, 2, []string{"apply to one file"}, "get", "-R", "--version", "1", "ks/")
	assert.Equal(t, "6f6e65\n", tg.ok(t, "get", "--hex", "ks/a"))
	assert.Equal(t, "/ks/a\n6f6e65\n/ks/sub/b\n74776f0a6c696e6573\n", tg.ok(t, "get", "-R", "--hex", "ks/"))

	out := tg.ok(t, "stat", "ks/a")
	assert.Contains(t, out, "type:      file\n")
	assert.Contains(t, out, "version:   "+va+"\n")
	assert.Contains(t, out, "size:      3 bytes\n")
	assert.Contains(t, out, "ephemeral: false\n")
	var si statInfo
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "stat", "-o", "json", "/ks")), &si))
	assert.Equal(t, "directory", si.Type)
	require.NotNil(t, si.Entries)
	assert.Equal(t, 2, *si.Entries)
	tg.fails(t, 1, []string{"NoNode", "/ks/none"}, "stat", "ks/none")

	// The store's own metadata, where it has some.
	var fi statInfo
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "stat", "-o", "json", "ks/a")), &fi))
	num := func(k string) string { return fmt.Sprint(fi.Store[k]) }
	switch tg.impl {
	case "etcd2":
		assert.Equal(t, va, num("mod_revision"), "a file's version is its key's ModRevision")
		assert.Equal(t, va, num("create_revision"))
		assert.Equal(t, "1", num("key_version"))
		assert.Equal(t, "", fi.Store["lease"])
		assert.Regexp(t, `(?m)^  mod revision: +`+va+`$`, out)
		assert.Regexp(t, `(?m)^  lease: +-$`, out)
	case "zk2":
		assert.Equal(t, va, num("data_version"), "a file's version is its znode's data version")
		assert.Equal(t, []any{"world:anyone:cdrwa"}, fi.Store["acl"])
		assert.Equal(t, "", fi.Store["ephemeral_owner"])
		assert.Regexp(t, `(?m)^  acl: +world:anyone:cdrwa$`, out)
		assert.Regexp(t, `(?m)^  czxid: +0x[0-9a-f]+$`, out, "zxids in hexadecimal, as ZooKeeper's tools show them")
		assert.Regexp(t, `^0x[0-9a-f]+$`, fi.Store["mzxid"])
		var di statInfo
		require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "stat", "-o", "json", "ks")), &di))
		assert.Equal(t, "2", fmt.Sprint(di.Store["children"]), "a directory is a znode too")
	case "consul":
		assert.Equal(t, va, num("modify_index"), "a file's version is its key's ModifyIndex")
		assert.Equal(t, va, num("create_index"))
		assert.Equal(t, "", fi.Store["session"])
		assert.Regexp(t, `(?m)^  modify index: +`+va+`$`, out)
	default:
		assert.Nil(t, fi.Store, "memorytopo has no metadata of its own")
		assert.NotContains(t, out, "metadata")
	}

	assert.Contains(t, tg.ok(t, "version"), "topoctl ")
	assert.Contains(t, tg.ok(t, "completion", "bash"), "bash completion")
	tg.fails(t, 2, []string{"needs a subcommand"}, "completion")
}
