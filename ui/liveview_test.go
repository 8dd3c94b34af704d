package ui_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// What the page shows after its re-reads: one that failed, one of a
// listing the user extended with More, a save of a file another writer
// deleted. These use the holds of holdJS.

// TestBrowserLiveReadFails: a re-read that fails for another reason than
// 404 (the server answers 500, or the fetch itself fails) leaves the badge
// saying the view is not live, and why; the page reads again, and says
// "live" only once a read succeeded. The page dropped the error and the
// badge said "live" over a listing that missed a change.
func TestBrowserLiveReadFails(t *testing.T) {
	p, _, conn, ts := stalePageServer(t, []string{"d/x"}, nil)
	ctx := context.Background()
	p.open("/d")
	const dir = "GET /api/dir?path=%2Fd"

	// A live reload after a change answers 500.
	p.hold(dir)
	_, err := conn.Create(ctx, "d/n", []byte("v"))
	require.NoError(t, err)
	p.waitHeld("the live reload", dir, 1)
	p.failHeld(dir, 500, "store unreachable")
	require.NotContains(t, p.rows(), "/d/n")
	require.Contains(t, p.text("#live"), "not live", "the badge says live over a listing whose re-read failed")
	require.Contains(t, p.text("#live"), "store unreachable")
	p.waitHeld("the read tried again", dir, 1)
	require.Contains(t, p.text("#live"), "not live")
	p.release(dir)
	p.wait("n listed, live", `!!document.querySelector('tr[data-path="/d/n"]') && `+isLive)

	// The read after the stream restarted fails to be fetched.
	p.hold(dir)
	ts.CloseClientConnections()
	p.waitHeld("the read after the restart", dir, 1)
	p.failHeld(dir, 0, "Failed to fetch")
	require.Contains(t, p.text("#live"), "not live", "the badge says live after the read that followed the restart failed")
	p.waitHeld("the read tried again", dir, 1)
	require.Contains(t, p.text("#live"), "not live")
	p.release(dir)
	p.wait("live", isLive)
	require.Equal(t, []string{"/d/n", "/d/x"}, p.rows())
}

// TestBrowserReloadKeepsMorePages: a live reload of a listing the user
// extended with More shows as many entries as were shown, with no gap and
// no duplicate, More continuing after them. The reload drew only the
// first page: the pages added with More were gone.
func TestBrowserReloadKeepsMorePages(t *testing.T) {
	files := pageOf("long", "f", 5)
	p, _, conn := stalePage(t, files, pageSize2)
	ctx := context.Background()
	p.open("/long")
	p.moreUntil(4)
	_, err := conn.Create(ctx, "long/a-new", []byte("v"))
	require.NoError(t, err)
	p.wait("the live reload", `!!document.querySelector('tr[data-path="/long/a-new"]')`)
	all := append([]string{"/long/a-new"}, paths(files)...)
	require.Equal(t, all[:4], p.rows(), "the reload dropped the pages added with More")
	require.False(t, p.hidden("#more"))

	require.NoError(t, conn.Delete(ctx, "long/f0", nil))
	p.wait("the live reload", `!document.querySelector('tr[data-path="/long/f0"]')`)
	all = append([]string{"/long/a-new"}, paths(files[1:])...)
	require.Equal(t, all[:4], p.rows())
	p.moreUntil(5)
	require.Equal(t, all, p.rows())
	p.wait("More hidden at the end", `document.querySelector("#more").hidden`)

	// All shown: a file added is shown too.
	_, err = conn.Create(ctx, "long/z-new", []byte("v"))
	require.NoError(t, err)
	p.wait("the live reload", `!!document.querySelector('tr[data-path="/long/z-new"]')`)
	require.Equal(t, append(all, "/long/z-new"), p.rows())
	require.True(t, p.hidden("#more"))
}

// TestBrowserSaveDeletedFile: a save of a file another writer deleted
// while it was edited says so and offers to create the file again with the
// text typed, or to discard it; nothing is written until the user chooses.
// The page showed a plain error.
func TestBrowserSaveDeletedFile(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x", "d/y"}, asWritable)
	ctx := context.Background()
	p.open("/d")
	p.openFile("/d/x")
	p.editReviewed("mine")
	require.NoError(t, conn.Delete(ctx, "d/x", nil))
	p.wait("the delete told", toastSays("/d/x was deleted in the store"))
	p.click("#save")
	p.wait("the conflict", deletedConflictShown)
	require.Contains(t, p.text("#conflict-msg"), "deleted", "the page said: %s", p.text("#error"))
	require.False(t, p.hidden("#conflict-deleted"))
	_, _, err := conn.Get(ctx, "d/x")
	require.True(t, topo.IsErrType(err, topo.NoNode), "written before the user chose: %v", err)
	p.click("#recreate")
	p.wait("x created again", has("#show-text", "mine")+` && document.querySelector("#editor-box").hidden`)
	requireValue(t, conn, "d/x", "mine")

	// Created again by another writer meanwhile: the create is refused,
	// the conflict shows that writer's value.
	p.editReviewed("again")
	require.NoError(t, conn.Delete(ctx, "d/x", nil))
	p.wait("the delete told", toastSays("/d/x was deleted in the store"))
	p.click("#save")
	p.wait("the conflict", deletedConflictShown)
	_, err = conn.Create(ctx, "d/x", []byte("theirs"))
	require.NoError(t, err)
	p.click("#recreate")
	p.wait("the conflict with their value", has("#conflict-value", "theirs"))
	require.True(t, p.hidden("#conflict-deleted"))
	requireValue(t, conn, "d/x", "theirs")

	// Discard: the editor closes, nothing is written.
	p.openFile("/d/y")
	p.editReviewed("gone")
	require.NoError(t, conn.Delete(ctx, "d/y", nil))
	p.wait("the delete told", toastSays("/d/y was deleted in the store"))
	p.click("#save")
	p.wait("the conflict", deletedConflictShown)
	p.click("#discard")
	p.wait("the editor closed", `document.querySelector("#editor-box").hidden`)
	_, _, err = conn.Get(ctx, "d/y")
	require.True(t, topo.IsErrType(err, topo.NoNode), "discard wrote y: %v", err)
}

// deletedConflictShown is the JavaScript condition "the conflict of a
// save of a deleted file is shown": its Recreate button is visible. Not
// #conflict-deleted's hidden alone: a conflict closed by the editor keeps
// it unset inside the hidden #conflict, so that condition held before the
// next save was answered, and a create by another writer could then
// reach the store first (the save then says "changed", no Recreate, and
// the click on it waited until the test's deadline).
const deletedConflictShown = `document.querySelector("#recreate").offsetParent !== null`

// retryJS keeps the page's retries of failed re-reads (timeouts that
// call applyChanges after 1 s or more) from running: window.retries maps
// each one scheduled and not cleared to its delay in ms.
const retryJS = `(() => {
	window.retries = new Map();
	const set = window.setTimeout, clear = window.clearTimeout;
	let id = -1;
	window.setTimeout = (fn, ms, ...args) => {
		if (fn && fn.name === "applyChanges" && ms >= 1000) { window.retries.set(--id, ms); return id; }
		return set(fn, ms, ...args);
	};
	window.clearTimeout = (t) => { window.retries.delete(t); return clear(t); };
	return true;
})()`

// retries are the delays (ms) of the retries scheduled (see retryJS).
func (p *page) retries() []int {
	p.t.Helper()
	r, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]int](`[...window.retries.values()]`))
	require.NoError(p.t, err)
	return r
}

// TestBrowserRetryOncePerReadNotAfterLeaving: a re-read whose file and
// listing both fail is tried again after 1 s (the backoff began at 2 s:
// each failure of the one read doubled it); once another directory is
// open and live, no retry of the one left is scheduled.
func TestBrowserRetryOncePerReadNotAfterLeaving(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x", "e/y"}, nil)
	ctx := context.Background()
	p.open("/d")
	p.openFile("/d/x")
	p.run("hold the retries", retryJS)
	const file, dir = "GET /api/file?path=%2Fd%2Fx", "GET /api/dir?path=%2Fd"
	p.hold(file)
	p.hold(dir)
	_, err := conn.Update(ctx, "d/x", []byte("2"), nil)
	require.NoError(t, err)
	p.waitHeld("the live reload of x", file, 1)
	p.failHeld(file, 500, "store unreachable")
	p.waitHeld("the live reload of d", dir, 1)
	p.failHeld(dir, 500, "store unreachable")
	require.Contains(t, p.text("#live"), "not live")
	require.Equal(t, []int{1000}, p.retries(), "one read that failed twice doubled the backoff")
	p.unhold(file)
	p.unhold(dir)
	p.open("/e")
	require.Empty(t, p.retries(), "the retry of /d stayed scheduled after /e was opened")
}
