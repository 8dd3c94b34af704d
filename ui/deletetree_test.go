package ui_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/connect"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/memorytopo/memtest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
	"github.com/topokit/topokit/ui"
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
// is refused when other files are there, as many, or the same files
// written since; without a listing it is refused too (it cannot say which
// files the user confirmed).
func TestDeleteTreeConfirmsListing(t *testing.T) {
	h := newHarness(t, true)
	h.put("d/a", "1")
	h.put("d/b", "2")
	listing := h.listing("/d")
	h.put("d/b", "changed") // written since: the listing changes
	assert.NotEqual(t, listing, h.listing("/d"))
	listing = h.listing("/d")
	require.NoError(t, h.conn.Delete(context.Background(), "d/b", nil))
	h.put("d/c", "3")
	status, body := h.write("POST", "/api/delete-tree", `{"path":"/d","count":2,"listing":"`+listing+`"}`)
	require.Equal(t, http.StatusConflict, status, body)
	assert.Equal(t, "3", h.value("d/c"))
	status, body = h.write("POST", "/api/delete-tree", `{"path":"/d","count":2}`)
	require.Equal(t, http.StatusBadRequest, status, body)
	assert.Contains(t, body, "no listing")
	assert.Equal(t, "3", h.value("d/c"))
	status, body = h.write("POST", "/api/delete-tree", `{"path":"/d","count":2,"listing":"`+h.listing("/d")+`"}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.EqualValues(t, 2, decodeJSON(t, body)["deleted"])
}

// listing is the "listing" GET /api/count answers for dir.
func (h *harness) listing(dir string) string {
	h.t.Helper()
	status, body := h.do("GET", "/api/count?path="+dir, "", nil)
	require.Equal(h.t, http.StatusOK, status, body)
	l, _ := decodeJSON(h.t, body)["listing"].(string)
	require.NotEmpty(h.t, l, body)
	return l
}

// TestDeleteTreeKeepsWriteSinceCount: a file another writer rewrote after
// the count the user confirmed, or deleted and created again (on
// ZooKeeper at the version counted, with another value), is not deleted,
// nor is any other file: the delete answers 409. The delete compared the
// paths only and removed the file whatever its version: a lost write.
func TestDeleteTreeKeepsWriteSinceCount(t *testing.T) {
	for _, b := range []struct{ impl, addr string }{
		{"memory", ""}, {"etcd2", etcdtest.Start(t)}, {"zk2", zktest.Start(t)}, {"consul", consultest.Start(t)},
	} {
		t.Run(b.impl, func(t *testing.T) {
			ctx := context.Background()
			var conn topo.Conn
			if b.impl == "memory" {
				conn = memtest.New(t, memtest.Options{}).Server.GlobalCell()
			} else {
				srv, err := connect.Settings{}.Open(ctx, b.impl, b.addr, "/uidelete")
				require.NoError(t, err)
				t.Cleanup(srv.Close)
				conn = srv.GlobalCell()
			}
			h := newHarnessOn(t, conn, true)
			h.put("d/a", "1")
			h.put("d/b", "2")
			del := func(listing string) (int, string) {
				return h.write("POST", "/api/delete-tree", `{"path":"/d","count":2,"listing":"`+listing+`"}`)
			}

			listing := h.listing("/d")
			h.put("d/b", "theirs")
			status, body := del(listing)
			require.Equal(t, http.StatusConflict, status, body)
			assert.Equal(t, "1", h.value("d/a"))
			assert.Equal(t, "theirs", h.value("d/b"), "a write made after the count was deleted")

			// Deleted and created again: ZooKeeper numbers its versions
			// from 0 again, the version counted.
			require.NoError(t, conn.Delete(ctx, "d/b", nil))
			_, err := conn.Create(ctx, "d/b", []byte("2"))
			require.NoError(t, err)
			listing = h.listing("/d")
			require.NoError(t, conn.Delete(ctx, "d/b", nil))
			_, err = conn.Create(ctx, "d/b", []byte("again"))
			require.NoError(t, err)
			status, body = del(listing)
			require.Equal(t, http.StatusConflict, status, body)
			assert.Equal(t, "1", h.value("d/a"))
			assert.Equal(t, "again", h.value("d/b"), "a file created again after the count was deleted")

			status, body = del(h.listing("/d"))
			require.Equal(t, http.StatusOK, status, body)
			assert.EqualValues(t, 2, decodeJSON(t, body)["deleted"])
		})
	}
}

// rewriteAfterList is a Conn whose List, once armed, lets another writer
// rewrite a file after listing: between the delete's check of the listing
// and its deletes.
type rewriteAfterList struct {
	topo.Conn
	armed       atomic.Bool
	path, value string
}

func (c *rewriteAfterList) List(ctx context.Context, prefix string) ([]topo.KVInfo, error) {
	kvs, err := c.Conn.List(ctx, prefix)
	if c.armed.CompareAndSwap(true, false) {
		if _, uerr := c.Conn.Update(ctx, c.path, []byte(c.value), nil); uerr != nil {
			return nil, uerr
		}
	}
	return kvs, err
}

// TestDeleteTreeAtListedVersions: a file another writer rewrites after the
// delete listed the subtree and found it as confirmed is kept: each file
// is deleted at the version listed, and the delete stops with 409. It was
// deleted whatever its version.
func TestDeleteTreeAtListedVersions(t *testing.T) {
	files := &rewriteAfterList{path: "d/b", value: "theirs"}
	h := newHarness(t, true, func(o *ui.Options) { files.Conn = o.Conn; o.Files = files })
	h.put("d/a", "1")
	h.put("d/b", "2")
	listing := h.listing("/d")
	files.armed.Store(true)
	status, body := h.write("POST", "/api/delete-tree", `{"path":"/d","count":2,"listing":"`+listing+`"}`)
	require.Equal(t, http.StatusConflict, status, body)
	assert.Contains(t, body, "another writer changed a file")
	assert.Equal(t, "theirs", h.value("d/b"), "a write made after the listing was deleted")
}
