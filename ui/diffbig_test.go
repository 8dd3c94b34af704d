package ui_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestBrowserDiffOfLargeFile: the review of a file of thousands of lines
// says "(no change)" when nothing was edited and shows only the line
// edited otherwise. Beyond 4e6 pairs of lines the diff told every line as
// deleted and added again, even with no edit, which also enabled Save.
func TestBrowserDiffOfLargeFile(t *testing.T) {
	p, _, conn := stalePage(t, nil, asWritable)
	ctx := context.Background()
	lines := make([]string, 3000)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %d", i)
	}
	value := strings.Join(lines, "\n")
	_, err := conn.Create(ctx, "d/big", []byte(value))
	require.NoError(t, err)
	p.open("/d")
	p.openFile("/d/big")
	p.click("#edit")
	p.click("#review")
	count := func() []int {
		r, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]int](`["#diff .del", "#diff .add"].map((s) => document.querySelectorAll(s).length)`))
		require.NoError(t, err)
		return r
	}
	require.Equal(t, []int{0, 0}, count(), "lines deleted and added by a review without edit")
	require.Equal(t, "(no change)", p.text("#diff"))
	p.fill("#editor", strings.Replace(value, "line 1500\n", "line 1500 edited\n", 1))
	p.click("#review")
	require.Equal(t, []int{1, 1}, count(), "lines deleted and added by a one-line edit")
	require.Contains(t, p.text("#diff .del"), "line 1500")
	require.Contains(t, p.text("#diff .add"), "line 1500 edited")
}
