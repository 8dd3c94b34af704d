package ui_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// Faults of state the page kept too long: what the live stream could not
// tell (changes made before it started), text typed while a save was
// asked, the editor of a file deleted. These use the holds of holdJS.

// editorValue is the text in the editor.
func (p *page) editorValue() string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector("#editor").value`))
	require.NoError(p.t, err)
	return v
}

// held is the number of answers matching match held now.
func (p *page) held(match string) int {
	p.t.Helper()
	n, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](`window.holds.held.filter((x) => x.key.includes(`+strconv.Quote(match)+`)).length`))
	require.NoError(p.t, err)
	return n
}

// TestBrowserListingBeforeStream: a file created after the listing of a
// directory was read, but before the page's live stream of the directory
// started, is listed. The stream was opened once the listing was drawn
// and tells only the changes made once it is set: the page showed the
// listing without the file, said "live", and never showed it.
func TestBrowserListingBeforeStream(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x"}, nil)
	p.wait("the live stream of /", isLive)
	const dir = "GET /api/dir?path=%2Fd"
	p.hold(dir)
	p.fill("#path", "/d")
	p.click("#pathbar button[type=submit]")
	p.waitHeld("the listing of /d", dir, 1)
	_, err := conn.Create(context.Background(), "d/n", []byte("v"))
	require.NoError(t, err)
	p.release(dir)
	p.wait("/d, live", has("#dir-title", "/d (")+" && "+isLive)
	p.wait("n listed", `!!document.querySelector('tr[data-path="/d/n"]')`)
	require.Equal(t, []string{"/d/n", "/d/x"}, p.rows())
}

// TestBrowserFileBeforeReload: a change of a file streamed while the file
// was being opened (its answer read before the change, drawn after the
// live reload the change caused, which found no file shown) is shown: the
// page showed the old value for good.
func TestBrowserFileBeforeReload(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x"}, nil)
	p.open("/d")
	p.wait("the live stream", isLive)
	const file = "GET /api/file?path=%2Fd%2Fx"
	p.hold(file)
	p.click(`a[data-path="/d/x"]`)
	p.waitHeld("x", file, 1)
	_, err := conn.Update(context.Background(), "d/x", []byte("changed"), nil)
	require.NoError(t, err)
	p.wait("the live reload of /d", `!!document.querySelector('#entries tr.changed[data-path="/d/x"]')`)
	p.release(file)
	p.wait("x's new value", has("#show-text", "changed"))
}

// typedDuringSave opens a writable page on d/x, saves "first" and types
// "second" while the save is asked, and waits until the save is answered.
func typedDuringSave(t *testing.T) (*page, topo.Conn) {
	t.Helper()
	p, _, conn := stalePage(t, []string{"d/x"}, asWritable)
	p.open("/d")
	p.openFile("/d/x")
	p.editReviewed("first")
	p.saveHeld()
	p.fill("#editor", "second")
	p.release("PUT /api/file")
	p.wait("the toast", toastSays("saved /d/x"))
	return p, conn
}

// TestBrowserTypedDuringSave: text typed while a save is asked is kept
// when the save succeeds (the editor was closed and the text lost): the
// editor stays open on the version written, says the text is not saved,
// and the next Save writes it over that version. The Store tab shows the
// version written (it said "(shown when the file is opened again)").
func TestBrowserTypedDuringSave(t *testing.T) {
	p, conn := typedDuringSave(t)
	requireValue(t, conn, "d/x", "first")
	require.False(t, p.hidden("#editor-box"), "the editor was closed: what was typed since is lost")
	require.Equal(t, "second", p.editorValue())
	require.Contains(t, p.text("#unsaved"), "not saved")
	p.wait("x as saved", has("#show-text", "first"))
	// The Store tab tells the version written (from the save's answer).
	_, v, err := conn.Get(context.Background(), "d/x")
	require.NoError(t, err)
	p.click(`.subtab[data-show="meta"]`)
	require.Contains(t, p.text("#show-meta"), "version: "+v.String(), "the Store tab after a save")
	p.wait("Save enabled", `!document.querySelector("#save").disabled`)
	p.click("#save")
	p.wait("the second save shown", has("#show-text", "second")+` && document.querySelector("#editor-box").hidden`)
	require.True(t, p.hidden("#error"), "the page said: %s", p.text("#error"))
	requireValue(t, conn, "d/x", "second")
}

// TestBrowserDeleteClosesEditor: deleting the file being edited closes
// its editor (it stayed open, the pane hidden, Save enabled, until another
// file was opened); nothing the page still holds writes the file again. A
// Save pressed while the delete is asked is refused by the store (the
// version it writes over is gone), which creates nothing: the page says
// the file was deleted.
func TestBrowserDeleteClosesEditor(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x", "d/y"}, asWritable)
	ctx := context.Background()
	p.open("/d")
	p.openFile("/d/x")
	p.editReviewed("mine")
	p.deleteHeld("/d/x")
	p.click("#save")
	p.wait("the save refused, x told deleted", `!document.querySelector("#conflict-deleted").hidden`)
	_, _, err := conn.Get(ctx, "d/x")
	require.True(t, topo.IsErrType(err, topo.NoNode), "the save created x again: %v", err)
	p.release("DELETE /api/file")
	p.wait("x gone from the listing", `!document.querySelector('a[data-path="/d/x"]')`)
	require.True(t, p.hidden("#file"))
	require.True(t, p.hidden("#editor-box"), "the editor of the deleted file stayed open")
	p.wait("Save disabled", `document.querySelector("#save").disabled`)

	// Even a press of the (hidden) Save sends nothing.
	p.hold("PUT /api/file")
	p.run("press Save", `(document.querySelector("#save").disabled = false, document.querySelector("#save").click(), true)`)
	require.Zero(t, p.held("PUT /api/file"), "a save of the deleted file was sent")
	_, _, err = conn.Get(ctx, "d/x")
	require.True(t, topo.IsErrType(err, topo.NoNode), "x was created again: %v", err)

	// The next file opened is shown without an editor.
	p.openFile("/d/y")
	require.True(t, p.hidden("#editor-box"))
}

// TestBrowserLiveAfterLastRead: when the live stream restarts again
// before the page read what it shows after the previous start, the badge
// says "live" only once the read after the last start is drawn. The read
// after the first start was drawn with a file created before the second
// start missing, and the badge said "live" over it.
func TestBrowserLiveAfterLastRead(t *testing.T) {
	p, _, conn, ts := stalePageServer(t, []string{"d/x"}, nil)
	p.open("/d")
	const dir = "GET /api/dir?path=%2Fd"
	p.hold(dir)
	p.run("forget the badge's states", `(window.liveStates = [], true)`)
	ts.CloseClientConnections()
	p.waitHeld("the read after the first restart", dir, 1)
	// n is created after that read: streamed, and read again (held).
	_, err := conn.Create(context.Background(), "d/n", []byte("v"))
	require.NoError(t, err)
	p.waitHeld("the read after n streamed", dir, 2)
	p.run("forget the badge's states", `(window.liveStates = [], true)`)
	ts.CloseClientConnections()
	p.wait("the stream restarted", `window.liveStates.includes("connecting…") || window.liveStates.includes("reconnecting…")`)
	p.waitHeld("the read after the second restart", dir, 3)
	// Only the read after the first restart, which misses n, is let go.
	want, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](`(() => {
		const h = window.holds;
		const x = h.held.shift();
		x.go();
		return h.used + 1;
	})()`))
	require.NoError(t, err)
	p.wait("the first read used", `window.holds.used >= `+strconv.Itoa(want)+` && window.holds.busy === 0`)
	require.NotContains(t, p.rows(), "/d/n")
	require.NotEqual(t, "live", p.text("#live"), "the badge says live over a listing read before the stream's last start")
	p.release(dir)
	p.wait("n listed, live", `!!document.querySelector('tr[data-path="/d/n"]') && `+isLive)
}

// TestBrowserLiveDeletes: a file shown and the last file of the directory
// shown, deleted by another writer, are gone from the page once the
// change streamed: their reads answered 404, which the page dropped,
// showing both for good under "live".
func TestBrowserLiveDeletes(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x"}, nil)
	p.open("/d")
	p.openFile("/d/x")
	require.NoError(t, conn.Delete(context.Background(), "d/x", nil))
	p.wait("x gone from the listing", `!document.querySelector('a[data-path="/d/x"]')`)
	p.wait("x's pane closed", `document.querySelector("#file").hidden`)
	require.Equal(t, "/d (0 entries)", p.text("#dir-title"))
}

// TestBrowserTypedDuringSaveConflict: the text kept after a save is
// written over the version that save wrote, as a compare-and-set: when
// another writer changed the file since, Save writes nothing and shows
// the conflict.
func TestBrowserTypedDuringSaveConflict(t *testing.T) {
	p, conn := typedDuringSave(t)
	p.wait("the text kept", `!document.querySelector("#unsaved").hidden && !document.querySelector("#save").disabled`)
	_, err := conn.Update(context.Background(), "d/x", []byte("other"), nil)
	require.NoError(t, err)
	p.wait("the change told", toastSays("/d/x changed in the store"))
	p.click("#save")
	p.wait("the conflict", `!document.querySelector("#conflict").hidden`)
	require.Contains(t, p.text("#conflict-value"), "other")
	requireValue(t, conn, "d/x", "other")
	require.Equal(t, "second", p.editorValue())
}

// TestBrowserSavedWhileOtherOpenFailed: a save answered while another
// file was being opened, whose open then failed (the editor stays open),
// leaves the editor on the version it wrote: the next Save writes over
// it. The editor stayed on the version before the save, so the next Save
// lost to the page's own write and said another writer changed the file.
func TestBrowserSavedWhileOtherOpenFailed(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x", "d/y"}, asWritable)
	p.open("/d")
	p.openFile("/d/x")
	p.editReviewed("first")
	p.saveHeld()
	// y is deleted, the live reload of the listing held: y is still
	// listed, and its open answers 404.
	p.hold("GET /api/dir")
	require.NoError(t, conn.Delete(context.Background(), "d/y", nil))
	p.waitHeld("the live reload", "GET /api/dir", 1)
	p.click(`a[data-path="/d/y"]`)
	p.wait("y's open failed", `!document.querySelector("#error").hidden`)
	p.release("PUT /api/file")
	p.wait("the toast", toastSays("saved /d/x"))
	requireValue(t, conn, "d/x", "first")
	require.False(t, p.hidden("#editor-box"))
	p.fill("#editor", "second")
	p.click("#review")
	p.wait("Save enabled", `!document.querySelector("#save").disabled`)
	p.click("#save")
	p.wait("the second save answered", `!document.querySelector("#conflict").hidden || document.querySelector("#editor-box").hidden`)
	require.True(t, p.hidden("#conflict"), "the page's own save was told as another writer's: %s", p.text("#conflict-msg"))
	p.wait("x saved", has("#show-text", "second"))
	requireValue(t, conn, "d/x", "second")
	p.release("GET /api/dir")
}
