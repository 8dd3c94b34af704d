package topoctl

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUIDecodesAsGetDecode: the page of topoctl ui shows every record as
// get -R --decode shows it, on both cells of the real Vitess topology in
// testdata, with the types built in and with $TOPOCTL_PROTOSET (Vitess's
// own protoset, which also knows messages topoctl does not compile in:
// a file named ShardReplicationError). A value that does not decode is
// undecoded on both, with the reason on the page.
func TestUIDecodesAsGetDecode(t *testing.T) {
	t.Parallel()
	protoset, err := filepath.Abs(filepath.Join(filepath.Dir(vitessTopology), "vitess-topodata.protoset"))
	require.NoError(t, err)
	for _, env := range []map[string]string{nil, {"TOPOCTL_PROTOSET": protoset}} {
		for _, cell := range []string{"global", "zone1"} {
			name := cell
			if env != nil {
				name += "-protoset"
			}
			t.Run(name, func(t *testing.T) {
				tg := memoryTarget(t).withRoot("/vitess/" + cell)
				tg.env = env
				tg.ok(t, "import", filepath.Join(vitessTopology, cell))
				// Only Vitess's protoset knows this type; the value is one
				// (type 1, tablet_alias {cell: "z1"}).
				tg.ok(t, "put", "/extra/ShardReplicationError", "\x08\x01\x12\x04\x0a\x02z1")
				// Not a Keyspace: bytes that are no protobuf at all.
				tg.ok(t, "put", "/keyspaces/broken/Keyspace", "\xff\xff\xff")

				type doc struct {
					Path        string
					Decoded     json.RawMessage
					DecodeError string `json:"decode_error"`
				}
				var want []doc
				r := tg.run(t, "", "get", "-R", "--decode", "-o", "json", "/")
				for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
					var d doc
					require.NoError(t, json.Unmarshal([]byte(l), &d), l)
					want = append(want, d)
				}
				require.Greater(t, len(want), 10, "stdout: %s\nstderr: %s", r.stdout, r.stderr)

				bg := tg.start(t, "ui", "--listen", "127.0.0.1:0")
				bg.waitOutput(t, "open http")
				line := bg.stdout.String()
				_, u, _ := strings.Cut(strings.TrimSpace(line), "open ")
				pu, err := url.Parse(u)
				require.NoError(t, err)
				token := pu.Query().Get("token")
				base := pu.Scheme + "://" + pu.Host
				for _, w := range want {
					req, err := http.NewRequest("GET", base+"/api/file?"+url.Values{"path": {w.Path}}.Encode(), nil)
					require.NoError(t, err)
					req.Header.Set("Authorization", "Bearer "+token)
					resp, err := http.DefaultClient.Do(req)
					require.NoError(t, err)
					var f struct {
						Decoded     string
						DecodeError string
					}
					require.Equal(t, http.StatusOK, resp.StatusCode, w.Path)
					require.NoError(t, json.NewDecoder(resp.Body).Decode(&f))
					resp.Body.Close()
					if w.DecodeError != "" {
						assert.Empty(t, f.Decoded, "%s: get --decode says %q, the page decodes it", w.Path, w.DecodeError)
						continue
					}
					if assert.NotEmpty(t, f.Decoded, "%s: get --decode decodes it (%s), the page does not (%s)", w.Path, w.Decoded, f.DecodeError) {
						assert.JSONEq(t, string(w.Decoded), f.Decoded, w.Path)
					}
				}
				byPath := map[string]doc{}
				for _, w := range want {
					byPath[w.Path] = w
				}
				assert.NotEmpty(t, byPath["/keyspaces/broken/Keyspace"].DecodeError)
				if env != nil {
					assert.Empty(t, byPath["/extra/ShardReplicationError"].DecodeError, "the protoset decodes it")
				}
			})
		}
	}
}
