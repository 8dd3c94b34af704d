package ui_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/ui"
)

// Every answer the page waits for is checked, when it arrives, against
// what the user asked for since: these tests hold one answer (see holdJS),
// do something else, let the answer go, and look at the page.

// pageOf lists n files dir/<prefix>0.. in dir (names sort in that order
// for n <= 10).
func pageOf(dir, prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s/%s%d", dir, prefix, i))
	}
	return out
}

func paths(files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = "/" + f
	}
	return out
}

// pageSize2 shows directories two entries a page.
func pageSize2(o *ui.Options) { o.PageSize = 2 }

// moreUntil presses More and waits for n rows.
func (p *page) moreUntil(n int) {
	p.t.Helper()
	p.click("#more")
	p.wait(fmt.Sprintf("%d rows", n), fmt.Sprintf(`document.querySelectorAll("#entries tbody tr").length === %d`, n))
}

// openFile clicks the listed file path and waits until the file pane
// shows it.
func (p *page) openFile(path string) {
	p.t.Helper()
	p.click(`a[data-path=` + strconv.Quote(path) + `]`)
	p.wait(path, `!document.querySelector("#file").hidden && document.querySelector("#file-path").textContent === `+strconv.Quote(path))
}

// editReviewed opens the editor on the file shown, replaces its text with
// value and reviews the change (which enables Save).
func (p *page) editReviewed(value string) {
	p.t.Helper()
	p.click("#edit")
	p.fill("#editor", value)
	p.click("#review")
	p.wait("the diff", has("#diff .add", "+ "+value))
}

// saveHeld presses Save and waits until the save is asked, its answer
// held (release "PUT /api/file" lets it go).
func (p *page) saveHeld() {
	p.t.Helper()
	p.hold("PUT /api/file")
	p.click("#save")
	p.waitHeld("the save", "PUT /api/file", 1)
}

// deleteHeld deletes the file shown, path, confirming the question that
// names it, and waits until the delete is asked, its answer held (release
// "DELETE /api/file" lets it go).
func (p *page) deleteHeld(path string) {
	p.t.Helper()
	p.hold("DELETE /api/file")
	p.click("#delete-file")
	p.wait("the confirmation", has("#modal-text", "Delete the file "+path))
	p.click("#modal-ok")
	p.waitHeld("the delete of "+path, "DELETE /api/file", 1)
}

// requireValue checks that the store holds want at path.
func requireValue(t *testing.T, conn topo.Conn, path, want string) {
	t.Helper()
	got, _, err := conn.Get(context.Background(), path)
	require.NoError(t, err)
	require.Equal(t, want, string(got), path)
}

// TestBrowserStaleMoreDropped: a page of a directory asked for with More,
// answered after the user opened another directory, is not appended to
// the other one; More then gives the other directory's pages, each once.
func TestBrowserStaleMoreDropped(t *testing.T) {
	a, b := pageOf("long-a", "a", 5), pageOf("long-b", "b", 5)
	p, _, _ := stalePage(t, append(append([]string{}, a...), b...), pageSize2)
	p.open("/long-a")
	require.Equal(t, paths(a[:2]), p.rows())
	p.hold("offset=")
	p.click("#more")
	p.waitHeld("long-a's second page", "offset=", 1)
	p.open("/long-b")
	p.release("offset=")
	require.Equal(t, paths(b[:2]), p.rows(), "long-a's page was appended to long-b")
	p.moreUntil(4)
	p.moreUntil(5)
	require.Equal(t, paths(b), p.rows())
	p.wait("More hidden at the end", `document.querySelector("#more").hidden`)
}

// TestBrowserMoreAcrossReload: a page asked for before a live reload of the
// directory is dropped when it arrives after the reload (the listing it
// continues is gone: appending it left a gap); More then continues the
// reloaded listing. Two presses of More before an answer append one page.
func TestBrowserMoreAcrossReload(t *testing.T) {
	files := pageOf("long", "f", 5)
	p, _, conn := stalePage(t, files, pageSize2)
	p.open("/long")
	p.wait("the live stream", isLive)
	p.hold("offset=")
	p.click("#more")
	p.waitHeld("the second page", "offset=", 1)
	_, err := conn.Create(context.Background(), "long/a-new", []byte("v"))
	require.NoError(t, err)
	p.wait("the live reload", `!!document.querySelector('tr[data-path="/long/a-new"]')`)
	p.release("offset=")
	all := append([]string{"/long/a-new"}, paths(files)...)
	require.Equal(t, all[:2], p.rows(), "a page of the listing before the reload was appended")
	p.moreUntil(4)
	require.Equal(t, all[:4], p.rows())

	// Two presses, one page.
	p.hold("offset=")
	p.click("#more")
	p.click("#more")
	p.waitHeld("two asks of the third page", "offset=", 2)
	p.release("offset=")
	require.Equal(t, all, p.rows(), "each press appended the page")
	p.wait("More hidden at the end", `document.querySelector("#more").hidden`)
}

// TestBrowserReloadDuringNavigation: a live reload of the directory shown,
// asked for while another directory was being opened and answered after
// it was shown, is dropped.
func TestBrowserReloadDuringNavigation(t *testing.T) {
	p, _, conn := stalePage(t, []string{"stale-a/x", "fresh-b/y"}, nil)
	p.open("/stale-a")
	p.wait("the live stream", isLive)
	p.hold("fresh-b")
	p.fill("#path", "/fresh-b")
	p.click("#pathbar button[type=submit]")
	p.waitHeld("fresh-b's listing", "fresh-b", 1)
	p.hold("stale-a")
	_, err := conn.Create(context.Background(), "stale-a/z", []byte("v"))
	require.NoError(t, err)
	p.waitHeld("the live reload of stale-a", "stale-a", 1)
	p.release("fresh-b")
	require.Equal(t, "/fresh-b (1 entries)", p.text("#dir-title"))
	p.release("stale-a")
	require.Equal(t, "/fresh-b (1 entries)", p.text("#dir-title"), "the reload of stale-a was drawn over fresh-b")
	require.Equal(t, []string{"/fresh-b/y"}, p.rows())
}

// TestBrowserReloadsOutOfOrder: of two live reloads of the directory
// shown, the older, answered last, is dropped (it lacked the file the
// newer one showed).
func TestBrowserReloadsOutOfOrder(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x"}, nil)
	ctx := context.Background()
	p.open("/d")
	p.wait("the live stream", isLive)
	p.hold("/api/dir?path=%2Fd")
	_, err := conn.Create(ctx, "d/n1", []byte("v"))
	require.NoError(t, err)
	p.waitHeld("the first reload", "/api/dir?path=%2Fd", 1)
	p.unhold("/api/dir?path=%2Fd")
	_, err = conn.Create(ctx, "d/n2", []byte("v"))
	require.NoError(t, err)
	p.wait("the second reload", `!!document.querySelector('tr[data-path="/d/n2"]')`)
	p.release("/api/dir?path=%2Fd")
	require.Equal(t, []string{"/d/n1", "/d/n2", "/d/x"}, p.rows(), "the older reload was drawn over the newer")
}

// TestBrowserStaleFile: a file asked for, answered after the user opened
// another file (or another directory, which closes the file, or began to
// edit the file shown), is not shown.
func TestBrowserStaleFile(t *testing.T) {
	p, _, _ := stalePage(t, []string{"d/x", "d/y", "e/z"}, asWritable)
	p.open("/d")
	p.hold("path=%2Fd%2Fx")
	p.click(`a[data-path="/d/x"]`)
	p.waitHeld("x", "path=%2Fd%2Fx", 1)
	p.openFile("/d/y")
	p.release("path=%2Fd%2Fx")
	require.Equal(t, "/d/y", p.text("#file-path"), "x was shown over y")

	p.hold("path=%2Fd%2Fx")
	p.click(`a[data-path="/d/x"]`)
	p.waitHeld("x again", "path=%2Fd%2Fx", 1)
	p.open("/e")
	p.wait("the file closed", `document.querySelector("#file").hidden`)
	p.release("path=%2Fd%2Fx")
	require.True(t, p.hidden("#file"), "x was shown under /e")

	// Editing the file shown after asking for another: the edit wins.
	p.open("/d")
	p.click(`a[data-path="/d/y"]`)
	p.wait("y again", `document.querySelector("#file-path").textContent === "/d/y" && !document.querySelector("#file").hidden`)
	p.hold("path=%2Fd%2Fx")
	p.click(`a[data-path="/d/x"]`)
	p.waitHeld("x a third time", "path=%2Fd%2Fx", 1)
	p.click("#edit")
	p.fill("#editor", "mine")
	p.release("path=%2Fd%2Fx")
	require.Equal(t, "/d/y", p.text("#file-path"), "x was shown over y's editor")
	require.False(t, p.hidden("#editor-box"), "x's answer closed y's editor")
}

// hidden says whether the first element matching sel is hidden.
func (p *page) hidden(sel string) bool {
	p.t.Helper()
	h, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.querySelector(`+strconv.Quote(sel)+`).hidden`))
	require.NoError(p.t, err)
	return h
}

// toastSays is the JavaScript condition "the last toast held text" (a
// toast hides itself after a while: its text stays).
func toastSays(text string) string {
	return `document.querySelector("#toast").textContent.includes(` + strconv.Quote(text) + `)`
}

// asWritable makes the page writable.
func asWritable(o *ui.Options) { o.Writable = true }

// TestBrowserFileReloadKeepsEditor: a live reload of the open file,
// answered after the user began to edit it, neither closes the editor nor
// replaces what was typed; the page says the file changed.
func TestBrowserFileReloadKeepsEditor(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x"}, asWritable)
	p.open("/d")
	p.wait("the live stream", isLive)
	p.click(`a[data-path="/d/x"]`)
	p.wait("x", has("#show-text", "v"))
	p.hold("GET /api/file?path=%2Fd%2Fx")
	_, err := conn.Update(context.Background(), "d/x", []byte("changed"), nil)
	require.NoError(t, err)
	p.waitHeld("the live reload of x", "GET /api/file?path=%2Fd%2Fx", 1)
	p.click("#edit")
	p.fill("#editor", "mine")
	p.release("GET /api/file?path=%2Fd%2Fx")
	require.False(t, p.hidden("#editor-box"), "the reload closed the editor")
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`document.querySelector("#editor").value`))
	require.NoError(t, err)
	require.Equal(t, "mine", v)
	p.wait("the toast", toastSays("/d/x changed in the store"))
}

// TestBrowserStaleSearch: a search answered after the user opened a
// directory does not cover the directory.
func TestBrowserStaleSearch(t *testing.T) {
	p, _, _ := stalePage(t, []string{"d/x", "e/y"}, nil)
	p.hold("/api/search")
	p.fill("#search", "/d")
	p.click("#searchbar button[type=submit]")
	p.waitHeld("the search", "/api/search", 1)
	p.open("/e")
	p.release("/api/search")
	require.True(t, p.hidden("#search-results"), "the search's answer covered /e")
	require.False(t, p.hidden("#entries"))
	require.Equal(t, []string{"/e/y"}, p.rows())
}

// TestBrowserStaleCoordination: the locks under a path, answered after
// the user asked for another path's, are not shown.
func TestBrowserStaleCoordination(t *testing.T) {
	p, _, conn := stalePage(t, []string{"a/f", "b/f"}, nil)
	ctx := context.Background()
	for _, d := range []string{"a", "b"} {
		l, err := conn.Lock(ctx, d, "holder-"+d)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Unlock(context.Background()) })
	}
	p.click("#tab-coordination")
	p.wait("both locks", has("#locks td", "holder-a")+" && "+has("#locks td", "holder-b"))
	p.hold("/api/coordination?path=%2Fa")
	p.fill("#coord-path", "/a")
	p.click("#coord-form button[type=submit]")
	p.waitHeld("a's locks", "/api/coordination?path=%2Fa", 1)
	p.fill("#coord-path", "/b")
	p.click("#coord-form button[type=submit]")
	p.wait("b's lock only", has("#locks td", "holder-b")+" && !"+has("#locks td", "holder-a"))
	p.release("/api/coordination?path=%2Fa")
	require.Contains(t, p.text("#locks"), "holder-b")
	require.NotContains(t, p.text("#locks"), "holder-a", "a's locks were shown for /b")
}

// TestBrowserStaleCompare: a comparison answered after the user asked for
// another is not shown (it was appended to the other's results).
func TestBrowserStaleCompare(t *testing.T) {
	p, _, _ := stalePage(t, []string{"a/x", "b/y", "c/x", "d/x"}, nil)
	p.click("#tab-compare")
	p.hold("/api/compare?a=%2Fa&")
	p.fill("#compare-a", "/a")
	p.fill("#compare-b", "/b")
	p.click("#compare-form button[type=submit]")
	p.waitHeld("a against b", "/api/compare?a=%2Fa&", 1)
	p.fill("#compare-a", "/c")
	p.fill("#compare-b", "/d")
	p.click("#compare-form button[type=submit]")
	p.wait("c against d", has("#compare-summary", "0 differences between /c"))
	p.release("/api/compare?a=%2Fa&")
	require.Equal(t, "0 differences between /c (1 files) and /d (1 files)", p.text("#compare-summary"))
	require.Empty(t, p.text("#compare-results"), "a against b was shown for c against d")
}

// TestBrowserStaleSave: the answer to a save of x (here: refused, another
// writer changed x), arriving after the user left x's editor and began
// editing y, is not shown in y's editor: its "edit on top of the new
// value" would have saved y's text as x.
func TestBrowserStaleSave(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x", "d/y"}, asWritable)
	ctx := context.Background()
	p.open("/d")
	p.openFile("/d/x")
	p.editReviewed("x by the page")
	_, err := conn.Update(ctx, "d/x", []byte("x by another writer"), nil)
	require.NoError(t, err)
	p.saveHeld()
	p.click("#cancel-edit")
	p.openFile("/d/y")
	p.click("#edit")
	p.fill("#editor", "y by the page")
	p.release("PUT /api/file")
	require.True(t, p.hidden("#conflict"), "x's conflict was shown in y's editor")
	require.False(t, p.hidden("#editor-box"), "y's editor was closed")
	require.Contains(t, p.text("#error"), "/d/x", "the page says x was not saved")
	requireValue(t, conn, "d/x", "x by another writer")
}

// TestBrowserStaleSaved: the answer to a save of x that succeeded, arriving
// after the user opened y and began editing it, neither closes y's editor
// nor shows x.
func TestBrowserStaleSaved(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x", "d/y"}, asWritable)
	p.open("/d")
	p.openFile("/d/x")
	p.editReviewed("x by the page")
	p.saveHeld()
	p.click("#cancel-edit")
	p.openFile("/d/y")
	p.click("#edit")
	p.release("PUT /api/file")
	p.wait("the toast", toastSays("saved /d/x"))
	require.Equal(t, "/d/y", p.text("#file-path"), "x was shown over y")
	require.False(t, p.hidden("#editor-box"), "y's editor was closed")
	requireValue(t, conn, "d/x", "x by the page")
}

// TestBrowserStaleVersion: an earlier version of x, answered after the
// user opened y, is not shown under y.
func TestBrowserStaleVersion(t *testing.T) {
	p, _, _ := stalePage(t, []string{"d/x", "d/y"}, nil)
	p.open("/d")
	p.openFile("/d/x")
	p.click(`.subtab[data-show="history"]`)
	p.hold("/api/version")
	p.fill("#history-version", "1")
	p.click("#history-form button[type=submit]")
	p.waitHeld("x's version", "/api/version", 1)
	p.openFile("/d/y")
	p.release("/api/version")
	require.Empty(t, p.text("#history-value"), "x's version was shown under y")
}

// TestBrowserStaleDelete: the answer to a delete of x, arriving after the
// user opened y, leaves y open.
func TestBrowserStaleDelete(t *testing.T) {
	p, _, _ := stalePage(t, []string{"d/x", "d/y"}, asWritable)
	p.open("/d")
	p.openFile("/d/x")
	p.deleteHeld("/d/x")
	p.openFile("/d/y")
	p.release("DELETE /api/file")
	p.wait("x gone from the listing", `!document.querySelector('a[data-path="/d/x"]')`)
	require.False(t, p.hidden("#file"), "the delete of x closed y")
	require.Equal(t, "/d/y", p.text("#file-path"))
}

// TestBrowserStaleCacheBadge: the cache's health, asked for while it was
// healthy and answered after a newer answer said stale, is not shown.
func TestBrowserStaleCacheBadge(t *testing.T) {
	p, store, _ := stalePage(t, []string{"d/a"}, func(o *ui.Options) {
		c, err := cache.New(o.Conn, "", cache.Options{LeaveConnOpen: true, MaxStaleness: time.Hour, ProbeInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		o.Files = c
	})
	p.wait("a healthy cache", has("#cache", "cache healthy"))
	p.hold("/api/cache")
	p.waitHeld("a healthy answer", "/api/cache", 1)
	p.unhold("/api/cache")
	store.Client.Partition()
	p.wait("a stale cache", has("#cache", "cache stale since "))
	p.release("/api/cache")
	require.Contains(t, p.text("#cache"), "cache stale since ", "the older, healthy answer was shown")
	store.Client.Heal()
}

// TestBrowserDeleteKeepsNavigation: the answer to a delete of a file,
// arriving while another directory is being opened, reloads the directory
// shown without dropping the one being opened (it opened the directory
// shown again, which superseded the other).
func TestBrowserDeleteKeepsNavigation(t *testing.T) {
	p, _, _ := stalePage(t, []string{"d/x", "d/y", "e/z"}, asWritable)
	p.open("/d")
	p.openFile("/d/x")
	p.deleteHeld("/d/x")
	p.hold("path=%2Fe")
	p.fill("#path", "/e")
	p.click("#pathbar button[type=submit]")
	p.waitHeld("e's listing", "path=%2Fe", 1)
	p.release("DELETE /api/file")
	p.wait("x gone from the listing", `!document.querySelector('a[data-path="/d/x"]')`)
	p.release("path=%2Fe")
	require.Equal(t, "/e (1 entries)", p.text("#dir-title"), "the delete's reload of /d superseded the opening of /e")
	require.Equal(t, []string{"/e/z"}, p.rows())
}

// TestBrowserStaleCreate: the answer to a creation, arriving after the
// user opened another file, lists the new file but leaves the other
// open.
func TestBrowserStaleCreate(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x", "d/y"}, asWritable)
	p.open("/d")
	p.hold("PUT /api/file")
	p.click("#new-file")
	p.wait("the path question", has("#modal-text", "Create a file"))
	p.fill("#modal-input", "n")
	p.click("#modal-ok")
	p.wait("the contents question", has("#modal-text", "Contents of /d/n"))
	p.fill("#modal-input", "new")
	p.click("#modal-ok")
	p.waitHeld("the creation", "PUT /api/file", 1)
	p.openFile("/d/y")
	p.release("PUT /api/file")
	p.wait("n listed", `!!document.querySelector('a[data-path="/d/n"]')`)
	p.wait("the toast", toastSays("created /d/n"))
	require.Equal(t, "/d/y", p.text("#file-path"), "n was shown over y")
	requireValue(t, conn, "d/n", "new")
}

// TestBrowserStaleDeleteTree: the answer to a recursive delete, arriving
// after the user opened another directory, leaves that directory shown
// (it opened the deleted directory's parent).
func TestBrowserStaleDeleteTree(t *testing.T) {
	p, _, conn := stalePage(t, []string{"t/x", "t/y", "e/z"}, asWritable)
	p.open("/t")
	p.hold("POST /api/delete-tree")
	p.click("#delete-tree")
	p.wait("the confirmation", has("#modal-text", "Delete 2 files at or under /t?"))
	p.click("#modal-ok")
	p.waitHeld("the delete", "POST /api/delete-tree", 1)
	p.open("/e")
	p.release("POST /api/delete-tree")
	p.wait("the toast", toastSays("deleted 2 files under /t"))
	require.Equal(t, "/e (1 entries)", p.text("#dir-title"), "the delete opened /t's parent over /e")
	_, err := conn.List(context.Background(), "t/")
	require.True(t, topo.IsErrType(err, topo.NoNode), "the subtree is gone: %v", err)
}

// TestBrowserStaleChangeMarks: changes streamed for a directory, applied
// after the user opened another, mark no row of the other (a change of
// /d/x marked /e/x).
func TestBrowserStaleChangeMarks(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x", "e/x"}, nil)
	p.open("/d")
	p.wait("the live stream", isLive)
	p.openFile("/d/x")
	p.hold("GET /api/file?path=%2Fd%2Fx")
	_, err := conn.Update(context.Background(), "d/x", []byte("changed"), nil)
	require.NoError(t, err)
	p.waitHeld("the live reload of x", "GET /api/file?path=%2Fd%2Fx", 1)
	p.open("/e")
	p.release("GET /api/file?path=%2Fd%2Fx")
	require.Equal(t, []string{"/e/x"}, p.rows())
	require.Empty(t, p.text(`#entries tr.changed`), "/d/x's change marked /e/x")
}

// TestBrowserSaveTwice: Save pressed twice before the answer writes x once
// and reports no conflict (the second press raced the page's own write:
// it was refused, and the page said another writer had changed x).
func TestBrowserSaveTwice(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x"}, asWritable)
	p.open("/d")
	p.openFile("/d/x")
	p.editReviewed("x by the page")
	p.saveHeld()
	p.click("#save")
	p.release("PUT /api/file")
	p.wait("the toast", toastSays("saved /d/x"))
	p.wait("x's new value", has("#show-text", "x by the page"))
	require.True(t, p.hidden("#error"), "the page said: %s", p.text("#error"))
	require.True(t, p.hidden("#editor-box"), "the editor stayed open")
	requireValue(t, conn, "d/x", "x by the page")
}

// TestBrowserDeleteKeepsLaterOpen: the answer to a delete of x, arriving
// while y (clicked after the delete) is being opened, does not drop y.
func TestBrowserDeleteKeepsLaterOpen(t *testing.T) {
	p, _, _ := stalePage(t, []string{"d/x", "d/y"}, asWritable)
	p.open("/d")
	p.openFile("/d/x")
	p.deleteHeld("/d/x")
	p.hold("GET /api/file?path=%2Fd%2Fy")
	p.click(`a[data-path="/d/y"]`)
	p.waitHeld("y", "GET /api/file?path=%2Fd%2Fy", 1)
	p.release("DELETE /api/file")
	p.release("GET /api/file?path=%2Fd%2Fy")
	require.False(t, p.hidden("#file"), "y, clicked after the delete, was not shown")
	require.Equal(t, "/d/y", p.text("#file-path"))
}

// TestBrowserReopenDuringChange: the directory shown, opened again while
// a file is added to it, ends up listing the file whichever answer comes
// last: the open's (asked before the change) or the live reload's.
func TestBrowserReopenDuringChange(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x"}, nil)
	ctx := context.Background()
	p.open("/d")
	p.wait("the live stream", isLive)
	const dir = "GET /api/dir?path=%2Fd"

	// The open's answer first, then the reload's.
	p.hold(dir)
	p.open("/d")
	p.waitHeld("the open of /d", dir, 1)
	_, err := conn.Create(ctx, "d/n1", []byte("v"))
	require.NoError(t, err)
	p.waitHeld("the live reload of /d", dir, 2)
	p.release(dir)
	require.Equal(t, []string{"/d/n1", "/d/x"}, p.rows(), "the reload's answer was dropped")

	// The reload's answer first, then the open's.
	p.hold(dir)
	p.open("/d")
	p.waitHeld("the open of /d again", dir, 1)
	p.unhold(dir)
	_, err = conn.Create(ctx, "d/n2", []byte("v"))
	require.NoError(t, err)
	p.wait("the live reload", `!!document.querySelector('tr[data-path="/d/n2"]')`)
	p.release(dir)
	require.Equal(t, []string{"/d/n1", "/d/n2", "/d/x"}, p.rows(), "the open's older answer was drawn over the reload's")
}
