package ui_test

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestBrowserEditKeepsCarriageReturns: a text file with CRLF line ends
// opened in the editor is not changed by it. A textarea turns every "\r\n"
// into "\n", so the editor opened such a file as text already changed:
// Review showed every line changed without an edit, Save was enabled, and
// a save of a one-line edit rewrote every line end of the file.
func TestBrowserEditKeepsCarriageReturns(t *testing.T) {
	p, _, conn := stalePage(t, nil, asWritable)
	ctx := context.Background()
	const value = "one\r\ntwo\r\n"
	_, err := conn.Create(ctx, "d/x", []byte(value))
	require.NoError(t, err)
	p.open("/d")
	p.openFile("/d/x")
	p.click("#edit")
	p.click("#review")
	require.Equal(t, "(no change)", p.text("#diff"), "the review of the file opened, not edited")
	st, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]any](`[document.querySelector("#editor").value, document.querySelector("#format").value,
		document.querySelector("#format option[value=text]").disabled, document.querySelector("#save").disabled]`))
	require.NoError(t, err)
	require.Equal(t, []any{hex.EncodeToString([]byte(value)), "hex", true, true}, st, "editor value, format, text format disabled, save disabled")
	p.fill("#editor", hex.EncodeToString([]byte(value+"three")))
	p.click("#review")
	p.wait("the diff", has("#diff .add", "+ "))
	p.click("#save")
	p.wait("the save", toastSays("saved /d/x"))
	requireValue(t, conn, "d/x", value+"three")
}
