package topoctl

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// Backends of this test binary for txn: txnFake applies transactions one
// at a time over memorytopo (checking every condition, then writing: a
// stand-in for a backend's atomic Txn, for the command's own behaviour),
// txnNone has no transactions.
const (
	txnFake = "topoctl-test-txn"
	txnNone = "topoctl-test-notxn"
)

func init() {
	mem := memorytopo.NewFactory()
	var mu sync.Mutex
	for name, impl := range map[string]bool{txnFake: true, txnNone: false} {
		if err := topo.RegisterFactory(name, topo.FactoryFunc(func(cell, addr, root string) (topo.Conn, error) {
			c, err := mem.Create(cell, name+"/"+addr, root)
			if err != nil {
				return nil, err
			}
			return &txnConn{Conn: c, mu: &mu, impl: impl}, nil
		})); err != nil {
			panic(err)
		}
	}
}

type txnConn struct {
	topo.Conn
	mu   *sync.Mutex
	impl bool
}

func (c *txnConn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	if !c.impl {
		return nil, topo.NewError(topo.NoImplementation, "txn")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	fail := func(i int, code topo.ErrorCode) error {
		return &topo.TxnError{Index: i, Kind: ops[i].Kind, Err: topo.NewError(code, ops[i].Path)}
	}
	for i, op := range ops {
		_, v, err := c.Get(ctx, op.Path)
		exists := err == nil
		if err != nil && !topo.IsErrType(err, topo.NoNode) {
			return nil, err
		}
		switch {
		case op.Kind == topo.TxnIfAbsent && exists, op.Kind == topo.TxnCreate && exists:
			return nil, fail(i, topo.NodeExists)
		case !exists && (op.Kind == topo.TxnIfPresent || op.Kind == topo.TxnIfVersion || op.Kind == topo.TxnDelete || op.Kind == topo.TxnUpdate && op.Version != nil):
			return nil, fail(i, topo.NoNode)
		case exists && op.Version != nil && v.String() != op.Version.String():
			return nil, fail(i, topo.BadVersion)
		}
	}
	vs := make([]topo.Version, len(ops))
	for i, op := range ops {
		var err error
		switch op.Kind {
		case topo.TxnCreate:
			vs[i], err = c.Create(ctx, op.Path, op.Contents)
		case topo.TxnUpdate:
			vs[i], err = c.Update(ctx, op.Path, op.Contents, nil)
		case topo.TxnDelete:
			err = c.Delete(ctx, op.Path, nil)
		}
		if err != nil {
			return nil, err
		}
	}
	return vs, nil
}

// testTxn is the txn scenario, on a backend whose Txn works.
func testTxn(t *testing.T, tg target) {
	va := strings.TrimSpace(tg.ok(t, "put", "a", "one"))
	tg.ok(t, "put", "c", "doomed")

	// Lines on stdin: conditions and writes, the new versions printed.
	r := tg.run(t, "# move a's value\nif-version /a "+va+"\nif-absent /b\ncreate /b \"copied \\\"one\\\"\"\nput /a two "+va+"\ndel /c\n", "txn")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	assert.Regexp(t, `^/b \d+$`, lines[0])
	assert.Regexp(t, `^/a \d+$`, lines[1])
	vb := strings.Fields(lines[0])[1]
	va2 := strings.Fields(lines[1])[1]
	assert.Equal(t, `copied "one"`, tg.ok(t, "get", "b"))
	assert.Equal(t, "two", tg.ok(t, "get", "a"))
	assert.Equal(t, va2, strings.Fields(tg.ok(t, "ls", "-l", "/"))[2+4*0], "ls -l shows the version txn printed")
	tg.fails(t, 1, []string{"NoNode"}, "get", "c")

	// A condition that fails: exit 1, naming the op and why; nothing
	// written.
	f := tg.fails(t, 1, []string{"topoctl: BadVersion: transaction op 1 (if-version /a) failed, nothing was written"},
		"txn", writeTemp(t, "update /b three\nif-version /a "+va+"\n"))
	assert.Empty(t, f.stdout)
	assert.Equal(t, `copied "one"`, tg.ok(t, "get", "b"), "nothing written")
	tg.fails(t, 1, []string{"NodeExists: transaction op 0 (create /b) failed"}, "txn", writeTemp(t, "create /b x\nupdate /a y\n"))
	tg.fails(t, 1, []string{"NoNode: transaction op 0 (if-present /c) failed"}, "txn", writeTemp(t, "if-present /c\nupdate /a y\n"))
	assert.Equal(t, "two", tg.ok(t, "get", "a"), "nothing written")

	// JSON, from a file, with binary values; JSON output.
	in := `[{"op":"if-version","path":"/b","version":` + vb + `},
	        {"op":"update","path":"/b","value_base64":"AAEC","version":` + vb + `},
	        {"op":"create","path":"/d/e","value":""},
	        {"op":"delete","path":"/a"}]`
	out := tg.ok(t, "-o", "json", "txn", writeTemp(t, in))
	vals := checkJSONLines(t, "txn", out)
	ops := vals[0].(map[string]any)["ops"].([]any)
	require.Len(t, ops, 4)
	assert.Equal(t, map[string]any{"index": jsonNum(0), "op": "if-version", "path": "/b"}, ops[0])
	assert.Equal(t, "update", ops[1].(map[string]any)["op"])
	assert.Contains(t, ops[1], "version")
	assert.Contains(t, ops[2], "version")
	assert.NotContains(t, ops[3], "version")
	assert.Equal(t, "\x00\x01\x02", tg.ok(t, "get", "b"))
	assert.Equal(t, "", tg.ok(t, "get", "d/e"))
	tg.fails(t, 1, []string{"NoNode"}, "get", "a")
}

func jsonNum(n int) any { return json.Number(strconv.Itoa(n)) }

// TestTxn: the txn command on a backend with transactions (txnFake), and
// its usage errors, found before anything is sent.
func TestTxn(t *testing.T) {
	t.Parallel()
	// A store of its own per run (-count=N runs in one process).
	tg := target{impl: txnFake, addr: t.TempDir(), root: "/r"}
	testTxn(t, tg)

	for _, c := range []struct{ in, want string }{
		{"", "no operations"},
		{"# only a comment\n", "no operations"},
		{"frobnicate /a\n", `line 1 (op 0): unknown op "frobnicate"`},
		{"if-version /a\n", "line 1 (op 0): if-version needs a version"},
		{"if-version /a x\n", "line 1 (op 0): version: "},
		{"if-absent /a 3\n", `too many fields after "if-absent"`},
		{`[{"op":"if-absent","path":"/a","version":3}]`, "if-absent takes no version"},
		{"update /a x\ndelete /a\n", "transaction op 1 (delete /a) is malformed"},
		{"create /a\n", `"create" needs a value`},
		{"create /a v 3\n", "too many fields"},
		{"update /a one two 3\n", "too many fields"},
		{"delete\n", `"delete" needs a path`},
		{"create /a/locks/x v\n", "transaction op 0 (create /a/locks/x) is malformed: invalid path"},
		{"create /a \"unterminated\n", "line 1: bad quoted field"},
		{`[{"op":"create","path":"/a"}]`, `op 0: "create" needs a value`},
		{`[{"op":"create","path":"/a","value":"x","value_base64":"eA=="}]`, "not both"},
		{`[{"op":"update","path":"/a","value_base64":"!"}]`, "value_base64"},
		{`[{"op":"update","path":"/a","value":"x","extra":1}]`, `unknown field "extra"`},
		{`[{"op":"if-version","path":"/a","version":"7"}]`, "transaction JSON"},
		{`[] []`, "more than one value"},
		{`[]`, "no operations"},
	} {
		r := tg.run(t, c.in, "txn")
		assert.Equal(t, ExitUsage, r.code, "%q: %s", c.in, r.stderr)
		assert.Contains(t, r.stderr, c.want, "%q", c.in)
	}
	big := "create /big \"" + strings.Repeat("x", topo.MaxValueSize+1) + "\"\n"
	tg.fails(t, ExitUsage, []string{"op 0", "more than the 524288 bytes"}, "txn", writeTemp(t, big))
	tg.fails(t, ExitUsage, []string{"no such file"}, "txn", filepath.Join(t.TempDir(), "absent"))
	r := runMain(t.Context(), tg.argv([]string{"txn"}), streams{Stdin: strings.NewReader(""), StdinIsTerminal: func() bool { return true }})
	assert.Equal(t, ExitUsage, r)
	tg.fails(t, 1, []string{"NoNode"}, "get", "big")

	none := target{impl: txnNone, addr: t.TempDir(), root: "/r"}
	none.fails(t, 1, []string{"NoImplementation: ", "does not implement transactions"}, "txn", writeTemp(t, "create /x y\n"))
}

// writeTemp writes s to a new temporary file and returns its path.
func writeTemp(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "in")
	require.NoError(t, os.WriteFile(p, []byte(s), 0o600))
	return p
}
