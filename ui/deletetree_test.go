package ui_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBrowserDeleteTreeRefusesOtherFiles: a recursive delete confirmed
// for the files counted is refused when the subtree holds other files by
// then, as many of them: the delete removed a file created after the
// count, which the user never confirmed, because only the number was
// compared.
func TestBrowserDeleteTreeRefusesOtherFiles(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/a", "d/b"}, asWritable)
	ctx := context.Background()
	p.open("/d")
	p.click("#delete-tree")
	p.wait("the confirmation", has("#modal-text", "Delete 2 files at or under /d?"))
	// Another writer replaces d/b with d/c while the question is asked.
	require.NoError(t, conn.Delete(ctx, "d/b", nil))
	_, err := conn.Create(ctx, "d/c", []byte("new"))
	require.NoError(t, err)
	p.click("#modal-ok")
	p.wait("the answer", `document.querySelector("#error").textContent !== "" || window.toasts.some((m) => m.startsWith("deleted"))`)
	requireValue(t, conn, "d/c", "new")
	requireValue(t, conn, "d/a", "v")
	require.Contains(t, p.text("#error"), "the subtree changed")
}

// TestDeleteTreeConfirmsListing: delete-tree with the listing of a count
// is refused when other files are there, as many; without a listing only
// the count is compared.
func TestDeleteTreeConfirmsListing(t *testing.T) {
	h := newHarness(t, true)
	h.put("d/a", "1")
	h.put("d/b", "2")
	status, body := h.do("GET", "/api/count?path=/d", "", nil)
	require.Equal(t, http.StatusOK, status)
	listing, _ := decodeJSON(t, body)["listing"].(string)
	require.NotEmpty(t, listing, body)
	h.put("d/b", "changed") // a changed value is the same file
	status, body = h.do("GET", "/api/count?path=/d", "", nil)
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, listing, decodeJSON(t, body)["listing"])
	require.NoError(t, h.conn.Delete(context.Background(), "d/b", nil))
	h.put("d/c", "3")
	status, body = h.write("POST", "/api/delete-tree", `{"path":"/d","count":2,"listing":"`+listing+`"}`)
	require.Equal(t, http.StatusConflict, status, body)
	assert.Equal(t, "3", h.value("d/c"))
	status, body = h.write("POST", "/api/delete-tree", `{"path":"/d","count":2}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.EqualValues(t, 2, decodeJSON(t, body)["deleted"])
}
