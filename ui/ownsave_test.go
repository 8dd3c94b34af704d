package ui_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/connect"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestBrowserZooKeeperRecreateNotOwn: on ZooKeeper a file deleted and
// created again numbers its versions from 0 again. Another writer that
// deletes the file the page saved, text typed meanwhile (the editor stays
// open), and creates it again with the value the page's save replaced, at
// the version it replaced, is told; so is one that writes, while the
// page edits that file, the value the page's save wrote at the version it
// wrote. Both were taken for the page's own save (a version and value it
// wrote over, or wrote) and never told. Another writer's value at the
// version edited is told and not overwritten: the editor's save
// overwrote it, never shown; nor is it deleted by a delete of the value
// shown.
func TestBrowserZooKeeperRecreateNotOwn(t *testing.T) {
	ctx := context.Background()
	srv, err := connect.Settings{}.Open(ctx, "zk2", zktest.Start(t), "/vui4")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	conn := srv.GlobalCell()
	p, _ := stalePageOn(t, conn, []string{"d/x"}, asWritable)
	p.open("/d")
	p.openFile("/d/x")
	p.wait("version 0", has("#file-info", "version 0 "))

	p.editReviewed("mine")
	p.saveHeld()
	p.fill("#editor", "typed")
	p.release("PUT /api/file")
	p.wait("the text kept", `!document.querySelector("#unsaved").hidden`)
	requireValue(t, conn, "d/x", "mine")

	// Another writer deletes x (told), then creates it again with "v",
	// at version 0 again.
	require.NoError(t, conn.Delete(ctx, "d/x", nil))
	p.wait("the delete told", toastSays("/d/x was deleted in the store"))
	const file = "GET /api/file?path=%2Fd%2Fx"
	p.hold(file)
	_, err = conn.Create(ctx, "d/x", []byte("v"))
	require.NoError(t, err)
	p.waitHeld("the re-read of x", file, 1)
	p.release(file)
	require.Contains(t, p.toasts(), "/d/x changed in the store", "another writer's change was taken for the page's own save")

	// x is opened again (version 0) and edited; another writer writes
	// "mine" at version 1, the version and value the page's save wrote
	// before: told too.
	p.click("#cancel-edit")
	p.click(`a[data-path="/d/x"]`)
	p.wait("version 0", has("#file-info", "version 0 "))
	p.click("#edit")
	p.hold(file)
	_, err = conn.Update(ctx, "d/x", []byte("mine"), nil)
	require.NoError(t, err)
	p.waitHeld("the re-read of x", file, 1)
	p.release(file)
	require.Equal(t, 2, countOf(p.toasts(), "/d/x changed in the store"), "another writer's change was taken for the page's own save")

	// Another writer deletes x and creates it again with "w", at version
	// 0, the version edited, with another value: told, and a save of the
	// editor is refused (it overwrote "w", never shown).
	require.NoError(t, conn.Delete(ctx, "d/x", nil))
	p.wait("the delete told", `window.toasts.filter((m) => m === "/d/x was deleted in the store").length === 2`)
	p.hold(file)
	_, err = conn.Create(ctx, "d/x", []byte("w"))
	require.NoError(t, err)
	p.waitHeld("the re-read of x", file, 1)
	p.release(file)
	require.Equal(t, 3, countOf(p.toasts(), "/d/x changed in the store"), "a change at the version edited was not told")
	p.fill("#editor", "typed")
	p.click("#review")
	p.click("#save")
	p.wait("the conflict", `!document.querySelector("#conflict").hidden`)
	requireValue(t, conn, "d/x", "w")

	// x is shown ("w", version 0); another writer deletes it and creates
	// it again with "z", at version 0 (the page's re-reads held): the
	// page's delete of what it shows is refused (it deleted "z", never
	// shown).
	p.click("#cancel-edit")
	p.click(`a[data-path="/d/x"]`)
	p.wait("w at version 0", has("#file-info", "version 0 ")+" && "+has("#show-text", "w"))
	p.hold(file)
	require.NoError(t, conn.Delete(ctx, "d/x", nil))
	_, err = conn.Create(ctx, "d/x", []byte("z"))
	require.NoError(t, err)
	p.deleteHeld("/d/x")
	p.release("DELETE /api/file")
	p.wait("the refusal", `!document.querySelector("#error").hidden`)
	requireValue(t, conn, "d/x", "z")
}

// TestPutBaseValue: a write (or a delete) with base (the value the page
// edited or showed, hex) is refused as a conflict, writing nothing, when
// the file holds another value at the version given.
func TestPutBaseValue(t *testing.T) {
	h := newHarness(t, true)
	v := h.put("a/b", "theirs").String()
	status, body := h.write("PUT", "/api/file", `{"path":"/a/b","version":"`+v+`","base":"6d696e65","format":"text","value":"y"}`)
	require.Equal(t, http.StatusConflict, status, body)
	require.Contains(t, body, `"current"`)
	require.Equal(t, "theirs", h.value("a/b"))
	status, body = h.write("PUT", "/api/file", `{"path":"/a/b","version":"`+v+`","base":"`+hex.EncodeToString([]byte("theirs"))+`","format":"text","value":"y"}`)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "y", h.value("a/b"))

	// So is a delete with base.
	v = h.put("a/b", "theirs").String()
	status, body = h.write("DELETE", "/api/file?path=/a/b&version="+v, `{"base":"79"}`)
	require.Equal(t, http.StatusConflict, status, body)
	require.Equal(t, "theirs", h.value("a/b"))
	status, body = h.write("DELETE", "/api/file?path=/a/b&version="+v, `{"base":"`+hex.EncodeToString([]byte("theirs"))+`"}`)
	require.Equal(t, http.StatusOK, status, body)
}

// TestPutBaseSum: baseSha256 (the SHA-256 of the value, as GET /api/file
// answers it in sha256) is checked as base is, for a write and a delete.
func TestPutBaseSum(t *testing.T) {
	h := newHarness(t, true)
	sum := func(s string) string { b := sha256.Sum256([]byte(s)); return hex.EncodeToString(b[:]) }
	v := h.put("a/b", "theirs").String()
	status, body := h.do("GET", "/api/file?path=/a/b", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, sum("theirs"), decodeJSON(t, body)["sha256"])
	status, body = h.write("PUT", "/api/file", `{"path":"/a/b","version":"`+v+`","baseSha256":"`+sum("mine")+`","format":"text","value":"y"}`)
	require.Equal(t, http.StatusConflict, status, body)
	require.Equal(t, "theirs", h.value("a/b"))
	status, body = h.write("PUT", "/api/file", `{"path":"/a/b","version":"`+v+`","baseSha256":"`+sum("theirs")+`","format":"text","value":"y"}`)
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, "y", h.value("a/b"))

	v = h.put("a/b", "theirs").String()
	status, body = h.write("DELETE", "/api/file?path=/a/b&version="+v, `{"baseSha256":"`+sum("y")+`"}`)
	require.Equal(t, http.StatusConflict, status, body)
	require.Equal(t, "theirs", h.value("a/b"))
	status, body = h.write("DELETE", "/api/file?path=/a/b&version="+v, `{"baseSha256":"`+sum("theirs")+`"}`)
	require.Equal(t, http.StatusOK, status, body)
}
