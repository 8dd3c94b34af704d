package topoctl

import (
	"net"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// A first user ran "topoctl serve" on other ports and found every command
// using them with no flags, while topoctl --help said that no flags meant
// 127.0.0.1:2379. The help names the address serve recorded, and the
// default address is that record.
func TestRootHelpNamesRecordedAddress(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(endpointFile(dir), []byte("127.0.0.1:32479\n"), 0o600))
	s := settings{getenv: func(k string) string {
		if k == envDataDir {
			return dir
		}
		return ""
	}}
	require.Equal(t, "127.0.0.1:32479", s.defaultAddress())
	help := strings.Join(strings.Fields(target{noFlags: true}.ok(t, "--help")), " ")
	assert.Contains(t, help, "at the client address serve recorded in its default data directory (127.0.0.1:2379 unless serve was given --listen-client-address)")
}

// --output json is not for reading commands only: put says what it wrote
// in JSON, and the flag's help says so.
func TestOutputHelpCoversWrites(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	assert.JSONEq(t, `{"path":"/a","version":1}`, tg.ok(t, "-o", "json", "put", "/a", "b"))
	help := target{noFlags: true}.ok(t, "--help")
	assert.NotContains(t, help, "output format of reading commands")
	assert.Regexp(t, regexp.MustCompile(`-o, --output string\s+output format: text or json \(JSON on stdout, one value per line, from reading and writing commands alike`), help)
}

// A lock wait that --timeout ends says so, names the holder and what to
// do, as the quickstart shows it (on etcd, the default store), instead of
// a bare "deadline exceeded".
func TestQuickstartLockTimeoutMessage(t *testing.T) {
	t.Parallel()
	tg := target{impl: "etcd2", addr: etcdtest.Start(t), root: "/vitess/global"}
	tg.ok(t, "put", "/keyspaces/commerce/Keyspace", "k")
	hold := tg.start(t, "lock", "/keyspaces/commerce", "--", "sh", "-c", "echo held; exec sleep 600")
	hold.waitOutput(t, "held")
	r := tg.fails(t, 1, nil, "--timeout", "1s", "lock", "/keyspaces/commerce", "--", "echo", "later")
	want := quickstartOutput(t, "topoctl --timeout 1s lock /keyspaces/commerce").String()
	want = strings.ReplaceAll(want, regexp.QuoteMeta("127.0.0.1:2379"), regexp.QuoteMeta(tg.addr))
	assert.Regexp(t, regexp.MustCompile(want), r.stderr)
}

// A port already taken says what to do, as serve's does: ui and
// --metrics-address name the flag that picks another.
func TestListenAddressInUseSaysWhatToDo(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = busy.Close() })
	addr := busy.Addr().String()
	tg := memoryTarget(t)
	tg.fails(t, 1, []string{"address already in use", "pick another port with --listen)"}, "ui", "--listen", addr)
	tg.fails(t, 1, []string{"--metrics-address: ", "address already in use", "pick another port)"}, "--metrics-address", addr, "watch", "--wait", "/x")
}

// A first user's "topoctl -i memory put /a b" then "get /a" failed with a
// bare NoNode: a file missing from a memory store now says why it may be
// (each command starts with an empty store), as an empty root did; a
// NoNode that topoctl explains, or from another store, gets no such note.
func TestMemoryNoNodeSaysPerProcess(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	const why = "; a memory store lives only as long as its topoctl process: each command starts with an empty one"
	for _, args := range [][]string{{"get", "/a"}, {"stat", "/a"}, {"rm", "/a"}, {"cell", "get", "z"}} {
		tg.fails(t, 1, []string{"NoNode: node doesn't exist: /", why}, args...)
	}
	tg.ok(t, "put", "/d/f", "v")
	r := tg.fails(t, 1, []string{"NoNode: /d is a directory, not a file"}, "get", "/d")
	assert.NotContains(t, r.stderr, why)
	et := target{impl: "etcd2", addr: etcdtest.Start(t), root: "/r"}
	r = et.fails(t, 1, []string{"NoNode: node doesn't exist: /a"}, "get", "/a")
	assert.NotContains(t, r.stderr, why)
}

// --type takes Vitess's full name of a record (what a Vitess user knows)
// with no --protoset: it names the built-in type.
func TestTypeVitessFullName(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.ok(t, "put", "/cells/zone1/CellInfo", "\n\x0e127.0.0.1:2379\x12\r/vitess/zone1")
	out := tg.ok(t, "get", "--decode", "--type", "topodata.CellInfo", "/cells/zone1/CellInfo")
	assert.JSONEq(t, `{"serverAddress":"127.0.0.1:2379","root":"/vitess/zone1"}`, out)
}

// A cell whose CellInfo names no server address (cell set with --root
// only, or Vitess's in-memory test cells) fails to open saying how to
// give it one, on the real store that refuses the empty address.
func TestCellWithoutAddressSaysWhatToDo(t *testing.T) {
	t.Parallel()
	tg := target{impl: "etcd2", addr: etcdtest.Start(t), root: "/vitess/global"}
	tg.ok(t, "cell", "set", "zone2", "--root", "/vitess/zone2")
	tg.fails(t, 1, []string{"InvalidArgument: cell zone2: ", `(its CellInfo names no server address: set one with "topoctl cell set zone2 --server-address ADDR")`}, "--cell", "zone2", "ls")
	tg.ok(t, "cell", "set", "zone2", "--server-address", tg.addr)
	tg.ok(t, "--cell", "zone2", "put", "/a", "b")
}
