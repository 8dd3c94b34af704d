package ui_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// What the live view tells about the file shown: the page's own saves,
// a file opened from a search outside the directory shown, an open
// answered across a restart of the stream. These use the holds of holdJS.

// toasts are the messages the page toasted, in order.
func (p *page) toasts() []string {
	p.t.Helper()
	r, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`window.toasts`))
	require.NoError(p.t, err)
	return r
}

// TestBrowserOwnSaveNotTold: the change a save of the page wrote, streamed
// and read again before the save's answer came, is not told as another
// writer's ("changed in the store": it was); a change by another writer
// made while a save is asked still is.
func TestBrowserOwnSaveNotTold(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x"}, asWritable)
	p.open("/d")
	p.openFile("/d/x")
	const file = "GET /api/file?path=%2Fd%2Fx"
	const changed = "/d/x changed in the store"

	// The save's own change is read again (held) before the save answers.
	p.editReviewed("mine")
	p.hold(file)
	p.saveHeld()
	p.waitHeld("the re-read of x after the save's change streamed", file, 1)
	p.release(file)
	require.NotContains(t, p.toasts(), changed, "the page's own save was told as another writer's change")
	p.release("PUT /api/file")
	p.wait("x saved and shown", has("#show-text", "mine")+` && document.querySelector("#editor-box").hidden`)
	require.NotContains(t, p.toasts(), changed, "the page's own save was told as another writer's change")

	// Another writer changes x after the save wrote it, before its answer.
	p.editReviewed("again")
	p.hold(file)
	p.saveHeld()
	p.waitHeld("the re-read of x after the save's change streamed", file, 1)
	_, err := conn.Update(context.Background(), "d/x", []byte("theirs"), nil)
	require.NoError(t, err)
	p.waitHeld("the re-read of x after their change streamed", file, 2)
	p.release(file)
	p.release("PUT /api/file")
	p.wait("their value shown", has("#show-text", "theirs"))
	require.Contains(t, p.toasts(), changed, "another writer's change during a save was not told")
	requireValue(t, conn, "d/x", "theirs")

	// The same, text typed during the save (the editor stays open), the
	// re-reads answered after the save's answer.
	p.run("forget the toasts", `(window.toasts = [], true)`)
	p.editReviewed("third")
	p.hold(file)
	p.saveHeld()
	p.fill("#editor", "typed")
	p.waitHeld("the re-read of x after the save's change streamed", file, 1)
	_, err = conn.Update(context.Background(), "d/x", []byte("theirs again"), nil)
	require.NoError(t, err)
	p.waitHeld("the re-read of x after their change streamed", file, 2)
	p.release("PUT /api/file")
	p.wait("the text kept", `!document.querySelector("#unsaved").hidden`)
	p.release(file)
	require.Contains(t, p.toasts(), changed, "another writer's change during a save was not told")
	require.Equal(t, 1, countOf(p.toasts(), changed))
}

// countOf is the number of times s is in list.
func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// TestBrowserSearchedFileLive: a file opened from the search results that
// lies outside the directory shown follows the store, and so does a file
// being edited while another directory is opened: the live stream
// followed only the directory, and the file showed its old value for good
// under "live" (its editor was never told of a change).
func TestBrowserSearchedFileLive(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x", "e/y", "f/z"}, asWritable)
	ctx := context.Background()
	p.open("/d")
	p.fill("#search", "/e")
	p.click("#searchbar button[type=submit]")
	p.wait("the search results", `!!document.querySelector('#search-results a[data-path="/e/y"]')`)
	p.openFile("/e/y")
	p.wait("live", isLive)
	_, err := conn.Update(ctx, "e/y", []byte("changed"), nil)
	require.NoError(t, err)
	p.wait("y's new value", has("#show-text", "changed"))

	// y is edited while /f is opened: its change is told.
	p.editReviewed("mine")
	p.open("/f")
	_, err = conn.Update(ctx, "e/y", []byte("again"), nil)
	require.NoError(t, err)
	p.wait("y's change told", toastSays("/e/y changed in the store"))
	_, err = conn.Create(ctx, "f/n", []byte("v"))
	require.NoError(t, err)
	p.wait("n listed", `!!document.querySelector('tr[data-path="/f/n"]')`)
}

// TestBrowserOpenAcrossRestart: a file's open asked before the live
// stream restarted and answered after the read that followed the restart
// is not shown under "live" until it is read again (its answer may miss a
// change made while the stream was down). It was drawn under "live", then
// read again.
func TestBrowserOpenAcrossRestart(t *testing.T) {
	p, _, _, ts := stalePageServer(t, []string{"d/x"}, nil)
	p.open("/d")
	const file = "GET /api/file?path=%2Fd%2Fx"
	p.hold(file)
	p.click(`a[data-path="/d/x"]`)
	p.waitHeld("the open of x", file, 1)
	p.run("forget the badge's states", `(window.liveStates = [], true)`)
	ts.CloseClientConnections()
	p.wait("the stream restarted, live", `window.liveStates.some((s) => s.endsWith("connecting…")) && `+isLive)
	// The open's answer is let go, the read after it held.
	p.letGo("let go", file, "x.go()", true)
	p.wait("x shown", has("#show-text", "v"))
	require.NotEqual(t, "live", p.text("#live"), "an open answered before the stream's last start is shown under live")
	p.waitHeld("the re-read of x", file, 1)
	require.NotEqual(t, "live", p.text("#live"))
	p.release(file)
	p.wait("live", isLive)
}
