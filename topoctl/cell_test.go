package topoctl

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// cell get prints one cell's row; cell rm removes a cell's CellInfo only
// while the cell's store holds nothing under its root, unless --force.
func TestCellGetRm(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	cellRoot := tg.root + "-zone1"
	cell := tg.withRoot(cellRoot)
	tg.ok(t, "cell", "set", "zone1", "--server-address", tg.addr, "--root", cellRoot)
	tg.ok(t, "cell", "set", "zone2", "--server-address", tg.addr, "--root", tg.root+"-zone2")

	assert.Equal(t, []string{"zone1", tg.addr, cellRoot}, strings.Fields(tg.ok(t, "cell", "get", "zone1")))
	var row cellRow
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "cell", "get", "zone1", "-o", "json")), &row))
	assert.Equal(t, cellRow{"zone1", tg.addr, cellRoot}, row)
	tg.fails(t, 1, []string{"NoNode"}, "cell", "get", "zone9")
	tg.fails(t, 2, []string{"takes 1 argument"}, "cell", "get")

	// A cell with data is refused, and keeps its record.
	cell.ok(t, "put", "tablets/t1/Tablet", "tab")
	r := tg.fails(t, 1, []string{"NodeNotEmpty", "cell zone1 still holds 1 file", "--force"}, "cell", "rm", "zone1")
	assert.Empty(t, r.stdout)
	assert.Equal(t, []string{"zone1", tg.addr, cellRoot}, strings.Fields(tg.ok(t, "cell", "get", "zone1")))

	// An empty cell goes; --force removes one with data, which stays.
	assert.Empty(t, tg.ok(t, "cell", "rm", "zone2"))
	tg.fails(t, 1, []string{"NoNode"}, "cell", "get", "zone2")
	require.NoError(t, json.Unmarshal([]byte(tg.ok(t, "cell", "rm", "zone1", "--force", "-o", "json")), &row))
	assert.Equal(t, cellRow{"zone1", tg.addr, cellRoot}, row)
	assert.Empty(t, tg.ok(t, "cell", "ls"))
	assert.Equal(t, "tab", cell.ok(t, "get", "tablets/t1/Tablet"), "--force leaves the cell's data")
	tg.fails(t, 1, []string{"NoNode"}, "cell", "rm", "zone1")
}

// cell rm of a cell whose store does not answer names that store as
// IMPL:ADDR:ROOT, not as the path "/ADDR", and does not blame the global
// cell's store, which answered.
func TestCellRmUnreachableNamed(t *testing.T) {
	t.Parallel()
	tg := target{impl: "etcd2", addr: etcdtest.Start(t), root: "/" + t.Name()}
	tg.ok(t, "cell", "set", "zone9", "--server-address", "127.0.0.1:1", "--root", "/z9")
	r := tg.fails(t, 1, []string{"cell zone9: cannot read its store", "etcd2:127.0.0.1:1:/z9: "}, "--timeout", "20s", "cell", "rm", "zone9")
	assert.NotContains(t, r.stderr, "/127.0.0.1:1")
	assert.NotContains(t, r.stderr, "(store "+tg.spec()+")")
}
