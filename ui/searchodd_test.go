package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo/connect"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// TestSearchSkipsOddKeys: a search lists only files the page can open:
// keys another tool wrote that are no canonical path ("s//b", "s/t/")
// are counted ("odd"), not listed. They were listed, and opening one
// answered 400 (invalid path).
func TestSearchSkipsOddKeys(t *testing.T) {
	ctx := context.Background()
	addr := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}})
	require.NoError(t, err)
	defer cli.Close()
	for _, k := range []string{"/s/ok", "/s//b", "/s/t/", "/s/dot/./x"} {
		_, err := cli.Put(ctx, "/uisearch"+k, "v")
		require.NoError(t, err)
	}
	srv, err := connect.Settings{}.Open(ctx, "etcd2", addr, "/uisearch")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	h := newHarnessOn(t, srv.GlobalCell(), false)

	status, body := h.do("GET", "/api/search?prefix=/s", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	m := decodeJSON(t, body)
	var listed []string
	for _, f := range m["files"].([]any) {
		p := f.(map[string]any)["path"].(string)
		listed = append(listed, p)
		st, b := h.do("GET", "/api/file?path="+url.QueryEscape(p), "", nil)
		assert.Equal(t, http.StatusOK, st, "%s: %s", p, b)
	}
	assert.Equal(t, []string{"/s/ok"}, listed)
	assert.EqualValues(t, 3, m["odd"])
	assert.Equal(t, false, m["truncated"])
}
