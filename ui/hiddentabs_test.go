package ui_test

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/memorytopo/memtest"
	"github.com/topokit/topokit/ui"
)

// setHidden makes the page's tab hidden or shown again, as switching
// tabs does (headless Chromium shows every tab).
func (p *page) setHidden(hidden bool) {
	p.t.Helper()
	state := "visible"
	if hidden {
		state = "hidden"
	}
	p.run("make the tab "+state, `(Object.defineProperty(document, "visibilityState", { value: "`+state+`", configurable: true }),
		Object.defineProperty(document, "hidden", { value: `+map[bool]string{true: "true", false: "false"}[hidden]+`, configurable: true }),
		document.dispatchEvent(new Event("visibilitychange")), true)`)
}

// TestBrowserManyTabs: a browser opens at most six connections to a
// server over HTTP/1.1 (topoctl ui's plain http), and each live stream
// holds one: pages left open in hidden tabs pause their streams, so that
// a seventh page still loads and goes live; a page shown again is live
// again, with what changed while it was hidden.
func TestBrowserManyTabs(t *testing.T) {
	conn := memtest.New(t, memtest.Options{}).Server.GlobalCell()
	_, err := conn.Create(context.Background(), "d/x", []byte("v"))
	require.NoError(t, err)
	s, err := ui.New(ui.Options{Conn: conn, Name: "store"})
	require.NoError(t, err)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	var tabs []*page
	for range 7 {
		p := &page{t: t, ctx: newTab(t)}
		p.do("open the page", chromedp.Navigate(s.URL(ts.URL)))
		p.wait("the page to load, live", `document.body.dataset.ready === "true" && `+isLive)
		p.open("/d")
		p.setHidden(true)
		tabs = append(tabs, p)
	}
	for _, p := range tabs {
		p.wait("the stream paused", has("#live", "paused while the tab is hidden"))
	}
	_, err = conn.Create(context.Background(), "d/while-hidden", []byte("v"))
	require.NoError(t, err)
	p := tabs[0]
	p.setHidden(false)
	p.wait("live again, with the change made while hidden", isLive+` && !!document.querySelector('a[data-path="/d/while-hidden"]')`)
}
