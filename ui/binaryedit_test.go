package ui_test

import (
	"context"
	"encoding/hex"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestBrowserEditBinaryNotAsText: a value that is not text opens in the
// editor as hex, and the text format is not offered for it. It was: the
// editor then showed an empty text, Review showed no change, and a save
// of anything typed there replaced bytes the user never saw.
func TestBrowserEditBinaryNotAsText(t *testing.T) {
	p, _, conn := stalePage(t, nil, asWritable)
	value := []byte{0, 0xff, 'b', 'i', 'n'}
	_, err := conn.Create(context.Background(), "d/x", value)
	require.NoError(t, err)
	p.open("/d")
	p.openFile("/d/x")
	p.click("#edit")
	st, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]any](`[document.querySelector("#editor").value, document.querySelector("#format").value,
		document.querySelector("#format option[value=text]").disabled]`))
	require.NoError(t, err)
	require.Equal(t, []any{hex.EncodeToString(value), "hex", true}, st, "editor value, format, text format disabled")
}

// TestBrowserConflictBinaryNotEmpty: a text edited as text, which another
// writer makes binary meanwhile: the conflict says the value is not text,
// and shows its bytes in hex. It showed it empty.
func TestBrowserConflictBinaryNotEmpty(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/y"}, asWritable)
	value := []byte{0, 0xff, 'b', 'i', 'n'}
	p.open("/d")
	p.openFile("/d/y")
	p.editReviewed("mine")
	_, err := conn.Update(context.Background(), "d/y", value, nil)
	require.NoError(t, err)
	p.click("#save")
	p.wait("the conflict", `!document.querySelector("#conflict").hidden`)
	require.Equal(t, "(not text: 5 bytes, in hex below)\n000000  00 ff 62 69 6e", p.text("#conflict-value"))
	requireValue(t, conn, "d/y", string(value))
}
