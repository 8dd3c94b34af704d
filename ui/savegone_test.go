package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestBrowserSaveConflictWithoutCurrentIsNotDeleted: a lost
// compare-and-set whose answer carries no current value because reading
// it failed (the 409 says nothing of the file being gone) is not told as
// a delete: the page showed "another writer deleted" a file that is
// there, and its "Discard my text" dropped the text and closed the file.
func TestBrowserSaveConflictWithoutCurrentIsNotDeleted(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x"}, asWritable)
	ctx := context.Background()
	p.open("/d")
	p.openFile("/d/x")
	p.editReviewed("mine")
	p.saveHeld()
	// The server's answer when the version changed and the read of the
	// current value failed: 409, no current, no gone.
	p.failHeld("PUT /api/file", 409, "version changed")
	p.unhold("PUT /api/file")
	require.True(t, p.hidden("#conflict-deleted"), "a conflict without current value told as a delete: %s", p.text("#conflict-msg"))
	require.Contains(t, p.text("#error"), "version changed")
	require.Equal(t, "mine", p.editorValue())
	_, _, err := conn.Get(ctx, "d/x")
	require.NoError(t, err)
}

// TestSaveDeletedSaysGone: a compare-and-set on a file deleted meanwhile
// answers 409 with gone, no current; one lost to a change carries current
// and not gone.
func TestSaveDeletedSaysGone(t *testing.T) {
	h := newHarness(t, true)
	v := h.put("d/x", "1")
	h.put("d/x", "2")
	status, body := h.write("PUT", "/api/file", `{"path":"/d/x","version":"`+v.String()+`","value":"3"}`)
	require.Equal(t, http.StatusConflict, status, body)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m))
	assert.NotNil(t, m["current"])
	assert.Nil(t, m["gone"])
	_, v2, err := h.conn.Get(context.Background(), "d/x")
	require.NoError(t, err)
	require.NoError(t, h.conn.Delete(context.Background(), "d/x", nil))
	status, body = h.write("PUT", "/api/file", `{"path":"/d/x","version":"`+v2.String()+`","value":"3"}`)
	require.Equal(t, http.StatusConflict, status, body)
	m = nil
	require.NoError(t, json.Unmarshal([]byte(body), &m))
	assert.Nil(t, m["current"])
	assert.Equal(t, true, m["gone"])
	_, _, err = h.conn.Get(context.Background(), "d/x")
	require.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)
}
