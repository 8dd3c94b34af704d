package ui_test

import (
	"context"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo/memtest"
	"github.com/topokit/topokit/ui"
)

// Tests of answers that arrive late: the page's fetches of chosen URLs are
// sent at once (the server answers with the store as it is then), but
// their answers are handed to the page only when the test lets them go,
// after the user did something else. See holdJS.

// stalePage opens the page over a new memorytopo store holding files
// (value "v" each), with the options changed by edit (nil: the defaults),
// and returns it with the store and its global cell.
func stalePage(t *testing.T, files []string, edit func(*ui.Options)) (*page, *memtest.Store, topo.Conn) {
	t.Helper()
	p, store, conn, _ := stalePageServer(t, files, edit)
	return p, store, conn
}

// stalePageServer is stalePage that also returns the page's HTTP server
// (CloseClientConnections breaks the page's live stream).
func stalePageServer(t *testing.T, files []string, edit func(*ui.Options)) (*page, *memtest.Store, topo.Conn, *httptest.Server) {
	t.Helper()
	store := memtest.New(t, memtest.Options{})
	conn := store.Server.GlobalCell()
	p, ts := stalePageOn(t, conn, files, edit)
	return p, store, conn, ts
}

// stalePageOn is stalePageServer over conn (a real server's, say).
func stalePageOn(t *testing.T, conn topo.Conn, files []string, edit func(*ui.Options)) (*page, *httptest.Server) {
	t.Helper()
	for _, f := range files {
		_, err := conn.Create(context.Background(), f, []byte("v"))
		require.NoError(t, err)
	}
	opts := ui.Options{Conn: conn, Name: "store"}
	if edit != nil {
		edit(&opts)
	}
	s, err := ui.New(opts)
	require.NoError(t, err)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	p := &page{t: t, ctx: newTab(t)}
	p.do("open the page", chromedp.Navigate(s.URL(ts.URL)))
	p.wait("the page to load, live", `document.body.dataset.ready === "true" && `+isLive)
	p.run("install the holds", holdJS)
	return p, ts
}

// holdJS makes the page's fetches whose "METHOD URL" contains one of
// window.holds.match wait: the request is sent at once, its answer is
// kept in window.holds.held until the test lets it go (arrived says
// when the server has answered it: the store was read). window.holds.used
// counts the answers let go that the page has used, window.holds.busy the
// fetches not held whose answers the page has not used yet: an answer is
// used when a task queued behind the promise callbacks that read it runs
// (a fetch those callbacks start is counted before that). A held answer's
// fail(status, error) hands the page an answer of that status and error
// instead (status 0: the fetch fails, as when the server is unreachable).
const holdJS = `(() => {
	if (window.holds) return true;
	const orig = window.fetch;
	const h = window.holds = { match: [], held: [], used: 0, busy: 0 };
	const track = (sent, used) => sent.then((r) => {
		const json = r.json.bind(r);
		r.json = () => json().finally(() => setTimeout(used, 0));
		return r;
	}, (e) => { setTimeout(used, 0); throw e; });
	window.fetch = (u, o) => {
		const key = ((o && o.method) || "GET") + " " + String(u);
		const sent = orig(u, o);
		if (!h.match.some((m) => key.includes(m))) {
			h.busy++;
			return track(sent, () => { h.busy--; });
		}
		return new Promise((res, rej) => {
			const x = { key, arrived: false, go: () => {
				h.busy++;
				track(sent, () => { h.busy--; h.used++; }).then(res, rej);
			}, fail: (status, error) => {
				h.busy++;
				const r = status ? Promise.resolve(new Response(JSON.stringify({ error }), { status, headers: { "Content-Type": "application/json" } }))
					: Promise.reject(new TypeError(error));
				track(r, () => { h.busy--; h.used++; }).then(res, rej);
			} };
			sent.then(() => { x.arrived = true; }, () => { x.arrived = true; });
			h.held.push(x);
		});
	};
	return true;
})()`

// run evaluates the JavaScript expression js (which returns true).
func (p *page) run(what, js string) {
	p.t.Helper()
	_, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](js))
	require.NoError(p.t, err, what)
}

// hold makes the answers to the page's fetches whose "METHOD URL"
// contains match wait for release.
func (p *page) hold(match string) {
	p.t.Helper()
	p.run("install the holds", holdJS)
	p.run("hold "+match, `(window.holds.match.push(`+strconv.Quote(match)+`), true)`)
}

// unhold stops holding new fetches matching match; those held stay held.
func (p *page) unhold(match string) {
	p.t.Helper()
	p.run("unhold "+match, `(window.holds.match = window.holds.match.filter((m) => m !== `+strconv.Quote(match)+`), true)`)
}

// waitHeld waits until n answers matching match are held, each answered
// by the server (so the store was read for them before what the test
// does next).
func (p *page) waitHeld(what, match string, n int) {
	p.t.Helper()
	p.wait(what+" held", `window.holds.held.filter((x) => x.key.includes(`+strconv.Quote(match)+`) && x.arrived).length === `+strconv.Itoa(n))
}

// release stops holding fetches matching match, lets the held answers
// matching it go (in the order they were asked for) and waits until the
// page has used them and the answers to the fetches it made since (none
// held).
func (p *page) release(match string) {
	p.t.Helper()
	p.letGo("release", match, "x.go()", false)
}

// failHeld hands the page, for each held answer matching match, one of
// status with the error message error instead (status 0: the fetch fails,
// as when the server cannot be reached), and waits as release does; new
// fetches matching match stay held.
func (p *page) failHeld(match string, status int, error string) {
	p.t.Helper()
	p.letGo("fail", match, "x.fail("+strconv.Itoa(status)+", "+strconv.Quote(error)+")", true)
}

// letGo stops holding fetches matching match (unless keep), runs the JavaScript
// statement do on each held answer x matching it (in the order they were
// asked for) and waits until the page has used them and the answers to
// the fetches it made since (none held).
func (p *page) letGo(what, match, do string, keep bool) {
	p.t.Helper()
	if !keep {
		p.unhold(match)
	}
	m := strconv.Quote(match)
	want, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](`(() => {
		const h = window.holds;
		const go = h.held.filter((x) => x.key.includes(`+m+`));
		h.held = h.held.filter((x) => !x.key.includes(`+m+`));
		const want = h.used + go.length;
		go.forEach((x) => { `+do+`; });
		return want;
	})()`))
	require.NoError(p.t, err, what+" "+match)
	p.wait("the answers to "+match+" used", `window.holds.used >= `+strconv.Itoa(want)+` && window.holds.busy === 0`)
}

// open opens the directory dir from the path bar and waits until it is
// shown and live (the page reads it again once its live stream started,
// drawing its rows again: a row clicked before may be gone).
func (p *page) open(dir string) {
	p.t.Helper()
	p.fill("#path", dir)
	p.click("#pathbar button[type=submit]")
	p.wait(dir, `document.querySelector("#dir-title").textContent.startsWith(`+strconv.Quote(dir+" (")+`) && `+isLive)
}

// rows are the paths of the directory entries the page lists, in order.
func (p *page) rows() []string {
	p.t.Helper()
	r, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#entries tbody tr")].map((r) => r.dataset.path)`))
	require.NoError(p.t, err)
	return r
}

// TestBrowserStaleReloadKeepsNavigation: a live reload of the directory the
// page showed, answered only after the user opened another directory,
// leaves the other directory shown. It used to draw the old directory's
// listing over the new one (a clean-clone CI run under load saw
// TestBrowserEtcd stay on "/ui (3 entries)" after opening a lock's
// directory).
func TestBrowserStaleReloadKeepsNavigation(t *testing.T) {
	p, _, conn := stalePage(t, []string{"stale-a/x", "fresh-b/y"}, nil)
	p.open("/stale-a")
	p.wait("the live stream", isLive)
	p.hold("stale-a")
	_, err := conn.Create(context.Background(), "stale-a/z", []byte("v"))
	require.NoError(t, err)
	p.waitHeld("the live reload of stale-a", "stale-a", 1)
	p.open("/fresh-b")
	p.release("stale-a")
	require.Equal(t, "/fresh-b (1 entries)", p.text("#dir-title"), "the page shows the directory opened last")
	require.Contains(t, p.text("#entries"), "y")
	require.NotContains(t, p.text("#entries"), "stale-a")
}
