package ui_test

import (
	"context"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/memorytopo/memtest"
	"github.com/topokit/topokit/ui"
)

// TestBrowserStaleReloadKeepsNavigation: a live reload of the directory the
// page showed, answered only after the user opened another directory,
// leaves the other directory shown. It used to draw the old directory's
// listing over the new one (a clean-clone CI run under load saw
// TestBrowserEtcd stay on "/ui (3 entries)" after opening a lock's
// directory). The page's fetch of the old directory is held until the new
// one is shown, then let go.
func TestBrowserStaleReloadKeepsNavigation(t *testing.T) {
	store := memtest.New(t, memtest.Options{})
	conn := store.Server.GlobalCell()
	ctx := context.Background()
	for _, f := range []string{"stale-a/x", "fresh-b/y"} {
		_, err := conn.Create(ctx, f, []byte("v"))
		require.NoError(t, err)
	}
	s, err := ui.New(ui.Options{Conn: conn, Name: "memory"})
	require.NoError(t, err)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)

	p := &page{t: t, ctx: newTab(t)}
	p.do("open the page", chromedp.Navigate(s.URL(ts.URL)))
	p.wait("the page to load", `document.body.dataset.ready === "true"`)
	open := func(dir string) {
		p.fill("#path", dir)
		p.click("#pathbar button[type=submit]")
		p.wait(dir, `document.querySelector("#dir-title").textContent.startsWith(`+strconv.Quote(dir+" (")+`)`)
	}
	run := func(what, js string) {
		_, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](js))
		require.NoError(t, err, what)
	}
	open("/stale-a")
	p.wait("the live stream", has("#live", "live"))
	// From now on a listing of stale-a waits for the test; once answered,
	// window.applied is set after the page has used the answer (a task
	// queued behind the promise callbacks that use it).
	run("hold stale-a's listings", `(() => {
		window.held = []; window.applied = false;
		const orig = window.fetch;
		window.fetch = (u, o) => {
			if (!String(u).includes("/api/dir?") || !String(u).includes("stale-a")) return orig(u, o);
			return new Promise((res) => window.held.push(() => res(orig(u, o).then((r) => {
				const j = r.json.bind(r);
				r.json = () => j().then((v) => { setTimeout(() => { window.applied = true; }, 0); return v; });
				return r;
			}))));
		};
		return true;
	})()`)
	_, err = conn.Create(ctx, "stale-a/z", []byte("v"))
	require.NoError(t, err)
	p.wait("the live reload of stale-a", `window.held.length === 1`)
	open("/fresh-b")
	run("answer the reload", `(() => { window.held.forEach((f) => f()); return true; })()`)
	p.wait("the reload's answer used", `window.applied === true`)
	require.Equal(t, "/fresh-b (1 entries)", p.text("#dir-title"), "the page shows the directory opened last")
	require.Contains(t, p.text("#entries"), "y")
	require.NotContains(t, p.text("#entries"), "stale-a")
}
