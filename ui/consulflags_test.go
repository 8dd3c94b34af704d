package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/connect"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/ui"
)

// On Consul, a file's flags (a uint64, half of topokit's random write
// nonces above 2^63) reach the page exactly, as a decimal string: a JSON
// number that large loses its last digits in JavaScript, and they were
// shown negative before.
func TestConsulFlagsExact(t *testing.T) {
	ctx := context.Background()
	addr := consultest.Start(t)
	srv, err := connect.Settings{}.Open(ctx, "consul", addr, "uiflags")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	_, err = srv.GlobalCell().Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
	cli, err := api.NewClient(&api.Config{Address: addr})
	require.NoError(t, err)
	_, err = cli.KV().Put(&api.KVPair{Key: "uiflags/f", Value: []byte("x"), Flags: 1<<63 | 5}, nil)
	require.NoError(t, err)

	s, err := ui.New(ui.Options{Conn: srv.GlobalCell()})
	require.NoError(t, err)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	req, err := http.NewRequest("GET", ts.URL+"/api/file?path=/f", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.Token())
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var f struct{ Meta map[string]any }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&f))
	require.Equal(t, "9223372036854775813", f.Meta["flags"])
}
