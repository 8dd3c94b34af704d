package ui_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeleteTreeListingWithoutCount: an API client that sends the
// listing GET /api/count answered but no count deletes the files
// confirmed; it is not told that the subtree changed when it did not.
// A count that is given must still match.
func TestDeleteTreeListingWithoutCount(t *testing.T) {
	h := newHarness(t, true)
	h.put("d/a", "1")
	h.put("d/b", "2")
	listing := h.listing("/d")
	status, body := h.write("POST", "/api/delete-tree", `{"path":"/d","count":1,"listing":"`+listing+`"}`)
	require.Equal(t, http.StatusConflict, status, body)
	assert.Equal(t, "2", h.value("d/b"))
	status, body = h.write("POST", "/api/delete-tree", `{"path":"/d","listing":"`+listing+`"}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.EqualValues(t, 2, decodeJSON(t, body)["deleted"])
}
