package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/connect"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/ui"
)

// On etcd, with the page's files read through a cache as topoctl ui reads
// them, the entries the tree lists under a held lock's "locks" directory
// and an election's directory show what stat shows (version, size, the
// owning lease) and open like any file: the cache holds files
// only, so the page reads them from the store, and shows the holder's
// description decoded (a Vitess holder's JSON as that document).
func TestCoordinationEntriesOpen(t *testing.T) {
	ctx := context.Background()
	srv, err := connect.Settings{}.Open(ctx, "etcd2", etcdtest.Start(t), "/uientries")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	conn := srv.GlobalCell()
	c, err := cache.New(conn, "", cache.Options{LeaveConnOpen: true})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	s, err := ui.New(ui.Options{Conn: conn, Files: c})
	require.NoError(t, err)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	get := func(path string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest("GET", ts.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+s.Token())
		resp, err := ts.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var m map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
		return resp.StatusCode, m
	}

	_, err = conn.Create(ctx, "keyspaces/commerce/Keyspace", nil)
	require.NoError(t, err)
	lock, err := conn.Lock(ctx, "keyspaces/commerce", `{"Action":"Reshard","HostName":"h1"}`)
	require.NoError(t, err)
	defer func() { _ = lock.Unlock(ctx) }()
	el, err := conn.NewLeaderParticipation("vtctld", "p1")
	require.NoError(t, err)
	defer el.Stop()
	_, err = el.WaitForLeadership()
	require.NoError(t, err)

	for dir, want := range map[string]string{
		"/keyspaces/commerce/locks": "\"Action\": \"Reshard\"",
		"/elections/vtctld/locks":   "\"p1\"",
	} {
		status, m := get("/api/dir?path=" + dir)
		require.Equal(t, http.StatusOK, status, "%s: %v", dir, m)
		entries, _ := m["entries"].([]any)
		require.Len(t, entries, 1, dir)
		entry := entries[0].(map[string]any)
		assert.Equal(t, true, entry["ephemeral"], dir)
		assert.NotEmpty(t, entry["version"], "%s: the entry's version, as stat shows it", dir)
		assert.NotNil(t, entry["size"], "%s: the entry's size", dir)
		assert.Regexp(t, `^lease [0-9a-f]+$`, entry["owner"], "%s: the entry's owner", dir)
		p := entry["path"].(string)
		status, m = get("/api/file?path=" + p)
		require.Equal(t, http.StatusOK, status, "%s opens: %v", p, m)
		assert.Contains(t, m["decoded"], want, "%s is shown decoded", p)
	}
}
