package ui_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/stretchr/testify/require"
)

// TestBrowserDirNameWithSpacesOpens: a directory whose name begins or
// ends with a space (written by another tool) opens as itself, from its
// row and from the address on a reload, and the subtree delete names and
// removes it, not the directory of the name without the spaces. The page
// trimmed every directory path, so "/sp " opened "/sp", whose files its
// "Delete subtree…" then deleted.
func TestBrowserDirNameWithSpacesOpens(t *testing.T) {
	p, _, conn := stalePage(t, []string{"sp /x", "sp/y"}, asWritable)
	p.click(`a[data-path="/sp "]`)
	p.wait("a directory", `!document.querySelector("#dir-title").textContent.startsWith("/ (") && `+isLive)
	require.Equal(t, "/sp  (1 entries)", p.text("#dir-title"))
	require.Equal(t, []string{"/sp /x"}, p.rows())
	p.do("reload", chromedp.Reload())
	p.wait("the page to load", `document.body.dataset.ready === "true" && `+isLive)
	require.Equal(t, []string{"/sp /x"}, p.rows(), "after a reload")
	p.click("#delete-tree")
	p.wait("the confirmation", has("#modal-text", "Delete 1 files at or under /sp ?"))
	p.click("#modal-ok")
	p.wait("the delete", toastSays("deleted 1 files under /sp "))
	requireValue(t, conn, "sp/y", "v")
}
