package topoctl

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// export --decode writes every record of Vitess's topology decoded, with
// no other flag: each at PATH.json holding what get --decode prints for
// it; --decode raw writes wire dumps at PATH.txt; a file that does not
// decode is written as stored, with a note; and a decoded path that
// another file already takes fails before anything is written.
func TestExportDecode(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t).withRoot("/vitess/global")
	src := filepath.Join(vitessTopology, "global")
	tg.ok(t, "import", src)

	dir := filepath.Join(t.TempDir(), "decoded")
	r := tg.run(t, "", "export", "--decode", dir)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr, "every record decodes: no note")
	want := filesUnder(t, src)
	var wantJSON []string
	for _, p := range want {
		wantJSON = append(wantJSON, p+".json")
		b, err := os.ReadFile(filepath.Join(dir, p+".json"))
		require.NoError(t, err)
		assert.Equal(t, tg.ok(t, "get", "--decode", p), string(b), p)
	}
	assert.Equal(t, wantJSON, filesUnder(t, dir))

	raw := filepath.Join(t.TempDir(), "raw")
	tg.ok(t, "export", "--decode", "raw", raw, "/cells")
	b, err := os.ReadFile(filepath.Join(raw, "zone1", "CellInfo.txt"))
	require.NoError(t, err)
	assert.Equal(t, tg.ok(t, "get", "--decode", "raw", "/cells/zone1/CellInfo"), string(b))

	tg.ok(t, "put", "/keyspaces/broken/Keyspace", "\xff\xff")
	some := filepath.Join(t.TempDir(), "some")
	r = tg.run(t, "", "export", "--decode", some, "/keyspaces")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "note: /keyspaces/broken/Keyspace is exported as stored")
	b, err = os.ReadFile(filepath.Join(some, "broken", "Keyspace"))
	require.NoError(t, err)
	assert.Equal(t, "\xff\xff", string(b))
	assert.FileExists(t, filepath.Join(some, "commerce", "Keyspace.json"))

	tg.ok(t, "put", "/keyspaces/commerce/Keyspace.json", "{}")
	clash := filepath.Join(t.TempDir(), "clash")
	tg.fails(t, 1, []string{"InvalidPath", "Keyspace.json", "nothing written"}, "export", "--decode", clash, "/keyspaces/commerce")
	_, err = os.Stat(clash)
	assert.True(t, os.IsNotExist(err), "nothing written")
}
