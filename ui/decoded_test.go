package ui_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

// A file is shown decoded as topoctl get --decode shows it: a record
// holding a field its type lacks (a newer Vitess's) is decoded with the
// field under "@unknown", and is not offered for editing as JSON, which
// would drop it; a metadata file and a lock's description show the text
// or JSON they hold. A record that decodes fully is editable as JSON.
func TestFileDecodedAsCLI(t *testing.T) {
	h := newHarness(t, true)
	keyspace := protowire.AppendTag(nil, 8, protowire.BytesType)
	keyspace = protowire.AppendString(keyspace, "semi_sync")
	h.put("keyspaces/ks/Keyspace", string(keyspace))
	newer := protowire.AppendTag(keyspace, 999, protowire.VarintType)
	newer = protowire.AppendVarint(newer, 7)
	h.put("keyspaces/newer/Keyspace", string(newer))
	h.put("metadata/owner", "team-vitess")

	file := func(p string) map[string]any {
		t.Helper()
		status, body := h.do("GET", "/api/file?path="+p, "", nil)
		require.Equal(t, http.StatusOK, status, body)
		return decodeJSON(t, body)
	}
	m := file("/keyspaces/ks/Keyspace")
	assert.Contains(t, m["decoded"], `"durabilityPolicy": "semi_sync"`)
	assert.Equal(t, true, m["jsonEdit"], "a record that decodes fully edits as JSON")

	m = file("/keyspaces/newer/Keyspace")
	assert.Empty(t, m["decodeError"])
	assert.Contains(t, m["decoded"], `"durabilityPolicy": "semi_sync"`)
	assert.Contains(t, m["decoded"], `"@unknown"`)
	assert.Nil(t, m["jsonEdit"], "a record with fields its type lacks does not edit as JSON")

	m = file("/metadata/owner")
	assert.Equal(t, `"team-vitess"`, m["decoded"])
	assert.Nil(t, m["jsonEdit"])
}
