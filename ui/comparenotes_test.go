package ui_test

import (
	"context"
	topotest "github.com/topokit/topokit/topo/test"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/memorytopo/memtest"
	"github.com/topokit/topokit/ui"
)

// TestCompareNamesFilesNotCompared: files at reserved paths that another
// tool wrote cannot be compared; topoctl diff names them (and exits 1)
// rather than calling the trees identical, and so does the compare view:
// the answer lists them per side.
func TestCompareNamesFilesNotCompared(t *testing.T) {
	h := newHarness(t, false, func(o *ui.Options) { o.Conn = topotest.ForeignReservedConn{Conn: o.Conn} })
	h.put("a/same", "s")
	h.put("b/same", "s")
	h.put("a/foreign-locks/cfg", "foreign")
	status, body := h.do("GET", "/api/compare?a=/a&b=/b", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	m := decodeJSON(t, body)
	assert.Empty(t, m["differences"])
	assert.Equal(t, []any{"/a/locks/cfg"}, m["notComparedA"], body)
	assert.Empty(t, m["notComparedB"], body)
}

// TestBrowserCompareNotes: the compare view names the files it could not
// compare (as topoctl diff does, rather than showing the trees as the
// same), shows an empty side as "(empty)", not as nothing, and says when
// neither tree holds any file (a mistyped path).
func TestBrowserCompareNotes(t *testing.T) {
	conn := topotest.ForeignReservedConn{Conn: memtest.New(t, memtest.Options{}).Server.GlobalCell()}
	_, err := conn.Create(context.Background(), "a/empty", nil)
	require.NoError(t, err)
	p, _ := stalePageOn(t, conn, []string{"a/same", "b/same", "b/empty", "a/foreign-locks/cfg"}, nil)
	p.click("#tab-compare")
	p.fill("#compare-a", "/a")
	p.fill("#compare-b", "/b")
	p.click("#compare-form button[type=submit]")
	p.wait("the comparison", has("#compare-summary", "1 differences between /a (2 files) and /b (2 files); 1 files not compared"))
	p.wait("the file not compared", has("#compare-results .kind-not-compared", "not compared")+" && "+has("#compare-results code", "/a/locks/cfg"))
	p.wait("the empty side", has("#compare-results pre", "(empty)"))
	p.fill("#compare-a", "/nosuch")
	p.fill("#compare-b", "/nosuch2")
	p.click("#compare-form button[type=submit]")
	p.wait("no files on either side", has("#compare-summary", "neither holds any file"))
}

// TestBrowserDeleteTreeNamesWhatStays: a recursive delete cannot delete
// files at reserved paths that another tool wrote (topoctl rm -R names
// them and exits 1); the page's confirmation and its report of the
// delete say how many stay, rather than promising the whole subtree.
func TestBrowserDeleteTreeNamesWhatStays(t *testing.T) {
	conn := topotest.ForeignReservedConn{Conn: memtest.New(t, memtest.Options{}).Server.GlobalCell()}
	p, _ := stalePageOn(t, conn, []string{"ks/Keyspace", "ks/shards/0/Shard", "ks/foreign-locks/cfg"}, asWritable)
	p.open("/ks")
	p.click("#delete-tree")
	p.wait("the confirmation", has("#modal-text", "Delete 2 files at or under /ks?")+" && "+has("#modal-text", "1 other file there cannot be deleted from the page"))
	p.click("#modal-ok")
	p.wait("the report of the delete", `window.toasts.some((m) => m.includes("deleted 2 files under /ks") && m.includes("1 file stays"))`)
}
