package topoctl

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// diff --decode shows a record that differs as a line diff of its two
// decoded values (the type chosen by its path, no --protoset), still
// comparing bytes; -o json gives both decoded values.
func TestDiffDecode(t *testing.T) {
	t.Parallel()
	a := memoryTarget(t).withRoot("/a")
	b := a.withRoot("/b")
	putCellInfo(t, a, "zone1", "/vitess/zone1")
	putCellInfo(t, b, "zone1", "/vitess/elsewhere")
	a.ok(t, "put", "notes", "one")
	b.ok(t, "put", "notes", "two")
	a.ok(t, "put", "same", "x")
	b.ok(t, "put", "same", "x")

	r := a.fails(t, 1, nil, "diff", "--to", b.spec(), "--decode")
	assert.Equal(t, "differs: /cells/zone1/CellInfo (31 bytes vs 35 bytes)\n"+
		"--- from /cells/zone1/CellInfo\n"+
		"+++ to /cells/zone1/CellInfo\n"+
		"@@ -1,4 +1,4 @@\n"+
		" {\n"+
		"   \"serverAddress\": \"127.0.0.1:2379\",\n"+
		"-  \"root\": \"/vitess/zone1\"\n"+
		"+  \"root\": \"/vitess/elsewhere\"\n"+
		" }\n"+
		"differs: /notes (3 bytes vs 3 bytes)\n"+
		"  not decoded: from: no message type known for it (--protoset adds types): no message named notes\n", r.stdout)

	r = a.fails(t, 1, nil, "diff", "--to", b.spec(), "-o", "json", "--decode", "json", "/cells/")
	var doc struct {
		Differences []struct {
			Path        string
			FromDecoded map[string]string `json:"from_decoded"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc), r.stdout)
	require.Len(t, doc.Differences, 1)
	assert.Equal(t, map[string]string{"serverAddress": "127.0.0.1:2379", "root": "/vitess/zone1"}, doc.Differences[0].FromDecoded)
	assert.Contains(t, r.stdout, `"to_decoded":{"serverAddress":"127.0.0.1:2379","root":"/vitess/elsewhere"}`)

	// Without --decode, only the sizes.
	r = a.fails(t, 1, nil, "diff", "--to", b.spec(), "/cells/")
	assert.Equal(t, "differs: /cells/zone1/CellInfo (31 bytes vs 35 bytes)\n", r.stdout)
}
