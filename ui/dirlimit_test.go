package ui_test

import (
	"math"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/ui"
)

// TestDirLimitChecked: GET /api/dir's limit is checked with the page's
// other parameters: a non-numeric, negative, zero or out-of-range limit
// is a 400 naming limit; a limit above the cap is cut to it; and an
// offset past the end, up to the largest int and with any limit, answers
// an empty page (next -1), not a broken connection.
func TestDirLimitChecked(t *testing.T) {
	h := newHarness(t, false, func(o *ui.Options) { o.PageSize = 2 })
	h.put("d/a", "1")
	h.put("d/b", "22")
	h.put("d/c", "333")
	for _, l := range []string{"x", "-1", "0", "1.5", "99999999999999999999999"} {
		status, body := h.do("GET", "/api/dir?path=/d&limit="+l, "", nil)
		assert.Equal(t, http.StatusBadRequest, status, "limit=%s: %s", l, body)
		assert.Contains(t, body, "limit", "limit=%s", l)
	}
	status, body := h.do("GET", "/api/dir?path=/d&limit="+strconv.Itoa(math.MaxInt), "", nil)
	require.Equal(t, http.StatusOK, status, body)
	m := decodeJSON(t, body)
	assert.Len(t, m["entries"], 3)
	assert.EqualValues(t, -1, m["next"])
	for _, off := range []int{3, 4, math.MaxInt - 1, math.MaxInt} {
		for _, l := range []string{"", "&limit=1", "&limit=10000", "&limit=" + strconv.Itoa(math.MaxInt)} {
			status, body := h.do("GET", "/api/dir?path=/d&offset="+strconv.Itoa(off)+l, "", nil)
			require.Equal(t, http.StatusOK, status, "offset=%d%s: %s", off, l, body)
			m := decodeJSON(t, body)
			assert.Empty(t, m["entries"], "offset=%d%s", off, l)
			assert.EqualValues(t, -1, m["next"], "offset=%d%s", off, l)
			assert.EqualValues(t, 3, m["total"], "offset=%d%s", off, l)
		}
	}
}
