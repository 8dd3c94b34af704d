package ui_test

// Real-browser tests: headless Chromium (Debian package "chromium",
// installed by scripts/test-deps.sh) drives the page over real stores.
// One browser serves the whole test binary; each test opens a tab.
// With TOPOKIT_UI_SCREENSHOTS=DIR the etcd test saves the main views as
// PNGs in DIR (docs/ui.md shows them).

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/connect"
	"github.com/topokit/topokit/topo/copy"
	"github.com/topokit/topokit/topo/decode"
	"github.com/topokit/topokit/topo/inspect"
	"github.com/topokit/topokit/topo/memorytopo/memtest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
	"github.com/topokit/topokit/ui"
)

// screenshotsEnv names the directory the etcd browser test saves its
// screenshots in.
const screenshotsEnv = "TOPOKIT_UI_SCREENSHOTS"

// vitessGlobal is the global cell of the real Vitess topology in testdata.
const vitessGlobal = "../testdata/vitess/vitess-local/global"

// browser is the one Chromium of the test binary, started by the first
// test that needs it and stopped by TestMain.
var browser struct {
	once sync.Once
	ctx  context.Context
	stop func()
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if browser.stop != nil {
		browser.stop()
	}
	os.Exit(code)
}

// chromiumPath finds the browser, failing (never skipping) when it is
// missing.
func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("headless Chromium is missing: run ./scripts/test-deps.sh (as root it installs the Debian package chromium), or apt-get install chromium")
	return ""
}

// newTab opens a tab of the shared browser, closed when t ends.
func newTab(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	browser.once.Do(func() {
		dir, err := os.MkdirTemp("", "topokit-ui-chromium")
		if err != nil {
			browser.err = err
			return
		}
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(path),
			chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.UserDataDir(dir),
			chromedp.WindowSize(1280, 860),
		}
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		if err := chromedp.Do(bctx); err != nil { // starts the browser
			browser.err = fmt.Errorf("starting %s: %w", path, err)
		}
		browser.ctx = bctx
		browser.stop = func() { bcancel(); acancel(); _ = os.RemoveAll(dir) }
	})
	require.NoError(t, browser.err)
	tab, cancel := chromedp.NewContext(browser.ctx)
	ctx, tcancel := context.WithTimeout(tab, 4*time.Minute)
	t.Cleanup(func() { tcancel(); cancel() })
	return ctx
}

// page drives one tab of the page in a test.
type page struct {
	t    *testing.T
	ctx  context.Context
	shot string // screenshot directory, "" for none
}

func (p *page) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, steps...); err != nil {
		p.t.Fatalf("%s: %v (page error: %q)", what, err, p.text("#error"))
	}
}

// text is the text of the first element matching sel ("" when none).
func (p *page) text(sel string) string {
	s, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(document.querySelector(`+strconv.Quote(sel)+`)||{}).textContent||""`))
	return s
}

// wait polls the JavaScript condition cond until it holds.
func (p *page) wait(what, cond string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(90*time.Second))); err != nil {
		body := p.text("body")
		if len(body) > 3000 {
			body = body[:3000]
		}
		p.t.Fatalf("waiting for %s: %v (page error: %q)\npage text:\n%s", what, err, p.text("#error"), body)
	}
}

// has is the JavaScript condition "an element matching sel holds text".
// isLive is true when the badge says exactly "live" (has("#live",
// "live") also matched "not live: ...").
const isLive = `document.querySelector("#live").textContent === "live"`

func has(sel, text string) string {
	return `[...document.querySelectorAll(` + strconv.Quote(sel) + `)].some(e => e.offsetParent !== null && e.textContent.includes(` + strconv.Quote(text) + `))`
}

func (p *page) click(sel string) {
	p.t.Helper()
	p.do("click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

func (p *page) fill(sel, value string) {
	p.t.Helper()
	p.do("fill "+sel, chromedp.SetValue(chromedp.CSS(sel), value))
}

// screenshot saves the page as DIR/name.png when screenshots are asked
// for.
func (p *page) screenshot(name string) {
	p.t.Helper()
	if p.shot == "" {
		return
	}
	b, err := chromedp.Run(p.ctx, chromedp.FullScreenshot(100))
	require.NoError(p.t, err)
	require.NoError(p.t, os.WriteFile(filepath.Join(p.shot, name+".png"), b, 0o644))
}

// loadVitess writes the real Vitess topology's global cell into conn.
func loadVitess(t *testing.T, conn topo.Conn) {
	t.Helper()
	files, err := copy.ReadDir(vitessGlobal, "")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		_, err := conn.Update(context.Background(), f.Path, f.Value, nil)
		require.NoError(t, err)
	}
}

// browse runs the scenario every backend goes through in the browser.
// With asTopoctl the page is set up as topoctl ui sets it up: the types
// built in decode (no protoset) and its files are read through a cache
// (topo/cache); otherwise Vitess's own protoset decodes and every call
// goes to the store.
func browse(t *testing.T, impl, addr, shots string, asTopoctl bool) {
	ctx := context.Background()
	srv, err := connect.Settings{}.Open(ctx, impl, addr, "/vitess/global")
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	conn := srv.GlobalCell()
	loadVitess(t, conn)
	opts := ui.Options{Conn: conn, Name: impl + " " + addr + " /vitess/global", Writable: true}
	reg := decode.Builtin()
	if asTopoctl {
		files, err := cache.New(conn, "", cache.Options{LeaveConnOpen: true})
		require.NoError(t, err)
		t.Cleanup(files.Close)
		opts.Files = files
	} else {
		reg, err = decode.ReadProtoset("../testdata/vitess/vitess-topodata.protoset")
		require.NoError(t, err)
		opts.Decoder = reg
	}
	s, err := ui.New(opts)
	require.NoError(t, err)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)

	p := &page{t: t, ctx: newTab(t), shot: shots}

	// Open with the token; the page is live.
	p.do("open the page", chromedp.Navigate(s.URL(ts.URL)))
	p.wait("the page to load", `document.body.dataset.ready === "true"`)
	p.wait("the live state", isLive)

	// Browse to a shard and open its decoded record.
	p.fill("#path", "/keyspaces/commerce/shards/0")
	p.click("#pathbar button[type=submit]")
	p.wait("the shard's entries", `!!document.querySelector('a[data-path="/keyspaces/commerce/shards/0/Shard"]')`)
	p.wait("the listing read again once live (its rows drawn again)", isLive)
	p.click(`a[data-path="/keyspaces/commerce/shards/0/Shard"]`)
	p.wait("the decoded Shard", has("#show-decoded", `"primaryAlias"`))
	p.wait("the decoded Shard's cell", has("#show-decoded", `"zone1"`))
	p.wait("the record type", has("#file-info", "topodata.Shard"))
	p.screenshot("record")
	p.click(`.subtab[data-show="hex"]`)
	p.wait("the hex view", has("#show-hex", "0a 09 0a 05"))

	// Edit the record as JSON: it is stored as protobuf.
	p.click("#edit")
	p.wait("the JSON editor", `document.querySelector("#format").value === "json"`)
	p.do("edit the Shard", chromedp.Evaluate[chromedp.Void](`(() => { const e = document.querySelector("#editor"); e.value = e.value.replace('"isPrimaryServing": true', '"isPrimaryServing": false'); })()`))
	p.click("#review")
	p.wait("the record's diff", has("#diff .del", `"isPrimaryServing": true`))
	p.click("#save")
	p.wait("the saved record", `!document.querySelector("#show-decoded").textContent.includes("isPrimaryServing") && document.querySelector("#editor-box").hidden`)
	shard, _, err := conn.Get(ctx, "keyspaces/commerce/shards/0/Shard")
	require.NoError(t, err)
	js, err := reg.Decode("keyspaces/commerce/shards/0/Shard", shard, false)
	require.NoError(t, err)
	require.JSONEq(t, `{"primaryAlias":{"cell":"zone1","uid":100}}`, string(js))

	// Search by prefix.
	p.fill("#search", "/keyspaces/cust")
	p.click("#searchbar button[type=submit]")
	p.wait("the search results", has("#search-results", "/keyspaces/customer/shards/-80/Shard"))

	// Edit a file with a diff; another writer gets there first: the save
	// is refused with the new value and the diff, nothing is overwritten.
	_, err = conn.Update(ctx, "ui/note", []byte("one\ntwo\n"), nil)
	require.NoError(t, err)
	p.fill("#path", "/ui")
	p.click("#pathbar button[type=submit]")
	p.wait("the ui directory", `!!document.querySelector('a[data-path="/ui/note"]')`)
	p.wait("the listing read again once live (its rows drawn again)", isLive)
	p.click(`a[data-path="/ui/note"]`)
	p.wait("the note", has("#show-text", "two"))
	p.click("#edit")
	p.fill("#editor", "one\nTWO\n")
	p.click("#review")
	p.wait("the diff", has("#diff .add", "+ TWO")+" && "+has("#diff .del", "- two"))
	p.screenshot("edit")
	_, err = conn.Update(ctx, "ui/note", []byte("one\nthree\n"), nil)
	require.NoError(t, err)
	p.click("#save")
	p.wait("the conflict", has("#conflict-value", "three")+" && "+has("#conflict-diff .add", "+ TWO"))
	p.screenshot("conflict")
	got, _, err := conn.Get(ctx, "ui/note")
	require.NoError(t, err)
	require.Equal(t, "one\nthree\n", string(got), "the conflicting save overwrote the other writer")
	// Editing on top of the new value saves.
	p.click("#rebase")
	p.wait("the rebased diff", has("#diff .del", "- three"))
	p.click("#save")
	p.wait("the saved value", has("#show-text", "TWO"))
	got, _, err = conn.Get(ctx, "ui/note")
	require.NoError(t, err)
	require.Equal(t, "one\nTWO\n", string(got))

	// A change made elsewhere arrives live.
	_, err = conn.Create(ctx, "ui/live-file", []byte("hello"))
	require.NoError(t, err)
	p.wait("the live change", `!!document.querySelector('a[data-path="/ui/live-file"]')`)
	p.screenshot("browse")

	// The stream breaks: the page says so, reconnects, and is live again.
	p.do("forget the badge's states", chromedp.Evaluate[chromedp.Void](`window.liveStates = []`))
	ts.CloseClientConnections()
	p.wait("reconnecting, then live", `window.liveStates.includes("reconnecting…") && window.liveStates[window.liveStates.length-1] === "live"`)
	_, err = conn.Create(ctx, "ui/after-reconnect", []byte("x"))
	require.NoError(t, err)
	p.wait("a change after the reconnection", `!!document.querySelector('a[data-path="/ui/after-reconnect"]')`)

	// Coordination: a lock holder and an election leader.
	lock, err := conn.Lock(ctx, "keyspaces/commerce", "ui-test holder")
	require.NoError(t, err)
	defer func() { _ = lock.Unlock(context.Background()) }()
	part, err := conn.NewLeaderParticipation("vtctld", "leader-1")
	require.NoError(t, err)
	defer part.Stop()
	_, err = part.Campaign(ctx, []byte("http://leader-1:15000"))
	require.NoError(t, err)
	sem, err := semaphore.New(conn, "semaphores/backups", 2, semaphore.Options{Description: "backup-worker"})
	require.NoError(t, err)
	slot, err := sem.Acquire(ctx)
	require.NoError(t, err)
	defer func() { _ = slot.Unlock(context.Background()) }()
	// A second client queues behind the lock and stands as a candidate.
	srv2, err := connect.Settings{}.Open(ctx, impl, addr, "/vitess/global")
	require.NoError(t, err)
	t.Cleanup(srv2.Close)
	conn2 := srv2.GlobalCell()
	wctx, stopWaiting := context.WithCancel(ctx)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		if ld, err := conn2.Lock(wctx, "keyspaces/commerce", "ui-test waiter"); err == nil {
			_ = ld.Unlock(context.Background())
		}
	}()
	defer func() { stopWaiting(); <-waited }()
	cand, err := conn2.NewLeaderParticipation("vtctld", "candidate-2")
	require.NoError(t, err)
	defer cand.Stop()
	go func() { _, _ = cand.WaitForLeadership() }()
	require.Eventually(t, func() bool {
		l, err := inspect.LockOf(ctx, conn, "keyspaces/commerce")
		if err != nil || len(l.Waiters) != 1 {
			return false
		}
		es, err := inspect.Elections(ctx, conn)
		for _, e := range es {
			if e.Name == "vtctld" {
				return err == nil && len(e.Candidates) == 2
			}
		}
		return false
	}, time.Minute, 5*time.Millisecond, "the waiter and the candidate queue")
	p.click("#tab-coordination")
	p.wait("the lock holder", has("#locks td", "ui-test holder")+" && "+has("#locks td", "/keyspaces/commerce"))
	p.wait("the lock's waiter", has("#locks td", "1: ui-test waiter (token "))
	cells := func(re string) string {
		return `[...document.querySelectorAll("#locks td")].some(e => /` + re + `/.test(e.textContent))`
	}
	if impl == "etcd2" {
		p.wait("the holder's lease TTL", cells(`^age not shown by this store; TTL \d+s$`))
	} else {
		p.wait("the holder's age", cells(`^age \S+ \(since \S+Z\); TTL not shown by this store$`))
	}
	p.wait("the election leader", has("#elections td", "leader-1")+" && "+has("#elections td", "http://leader-1:15000"))
	p.wait("the candidates, leader first", has("#elections td", "2: leader-1 (token ")+" && "+has("#elections td", ", candidate-2 (token "))
	p.wait("the semaphore holder", has("#semaphores td", "/semaphores/backups")+" && "+has("#semaphores td", "backup-worker"))
	p.screenshot("coordination")
	if impl == "etcd2" { // topokit's ZooKeeper Conn does not list lock entries
		// A lock entry (the holder's or the waiter's) opens from the
		// tree, its description decoded.
		p.click("#tab-browse")
		p.fill("#path", "/keyspaces/commerce/locks")
		p.click("#pathbar button[type=submit]")
		p.wait("the lock's entries", `!!document.querySelector('a[data-path^="/keyspaces/commerce/locks/"]')`)
		p.wait("the listing read again once live (its rows drawn again)", isLive)
		p.click(`a[data-path^="/keyspaces/commerce/locks/"]`)
		p.wait("the lock entry decoded", has("#show-decoded", `"ui-test `))
	}

	// Compare two keyspaces.
	p.click("#tab-compare")
	p.fill("#compare-a", "/keyspaces/commerce")
	p.fill("#compare-b", "/keyspaces/customer")
	p.click("#compare-form button[type=submit]")
	p.wait("the comparison", has("#compare-results .kind-only-in-b", "only-in-b")+" && "+has("#compare-results code", "shards/-80/Shard")+" && "+has("#compare-results .kind-differs", "differs"))
	p.screenshot("compare")

	// A recursive delete names the path and the count before it runs.
	p.click("#tab-browse")
	p.fill("#path", "/ui")
	p.click("#pathbar button[type=submit]")
	p.wait("the ui directory again", `!!document.querySelector('a[data-path="/ui/live-file"]')`)

	// Create a file, then delete it: each confirmation names the path.
	p.click("#new-file")
	p.wait("the path question", has("#modal-text", "Create a file"))
	p.fill("#modal-input", "created")
	p.click("#modal-ok")
	p.wait("the contents question", has("#modal-text", "Contents of /ui/created"))
	p.fill("#modal-input", "made in the browser")
	p.click("#modal-ok")
	p.wait("the created file", has("#show-text", "made in the browser"))
	created, _, err := conn.Get(ctx, "ui/created")
	require.NoError(t, err)
	require.Equal(t, "made in the browser", string(created))
	p.click("#delete-file")
	p.wait("the delete confirmation", has("#modal-text", "Delete the file /ui/created (version "))
	p.click("#modal-ok")
	p.wait("the file gone from the tree", `!document.querySelector('a[data-path="/ui/created"]')`)
	_, _, err = conn.Get(ctx, "ui/created")
	require.True(t, topo.IsErrType(err, topo.NoNode), "the file is gone: %v", err)

	p.click("#delete-tree")
	p.wait("the confirmation", has("#modal-text", "Delete 3 files at or under /ui?"))
	p.click("#modal-ok")
	p.wait("the parent after the delete", `document.querySelector("#path").value === "/"`)
	_, err = conn.List(ctx, "ui/")
	require.True(t, topo.IsErrType(err, topo.NoNode), "the subtree is gone: %v", err)
}

// TestBrowserCacheState: the header shows the read cache's health: healthy,
// stale (with since when) while its client is cut from the store, healthy
// again once the partition heals.
func TestBrowserCacheState(t *testing.T) {
	store := memtest.New(t, memtest.Options{})
	conn := store.Server.GlobalCell()
	_, err := conn.Create(context.Background(), "d/a", []byte("one"))
	require.NoError(t, err)
	c, err := cache.New(conn, "", cache.Options{LeaveConnOpen: true, MaxStaleness: time.Hour, ProbeInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	s, err := ui.New(ui.Options{Conn: conn, Files: c, Name: "memory"})
	require.NoError(t, err)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)

	p := &page{t: t, ctx: newTab(t)}
	p.do("open the page", chromedp.Navigate(s.URL(ts.URL)))
	p.wait("the page to load", `document.body.dataset.ready === "true"`)
	p.wait("a healthy cache", has("#cache", "cache healthy"))
	store.Client.Partition()
	p.wait("a stale cache", has("#cache", "cache stale since "))
	store.Client.Heal()
	p.wait("a healthy cache again", has("#cache", "cache healthy"))
}

// TestBrowserEtcd runs the page over the embedded etcd that topoctl
// serve runs (internal/etcdembed, the same code and server version).
func TestBrowserEtcd(t *testing.T) {
	browse(t, "etcd2", embeddedEtcd(t), os.Getenv(screenshotsEnv), true)
}

// embeddedEtcd starts a single-member embedded etcd as topoctl serve does,
// on free loopback ports and a temporary data directory, stopped when the
// test ends, and returns its client address.
func embeddedEtcd(t testing.TB) string {
	addrs, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	m, err := etcdembed.Start(etcdembed.Config{
		Dir:        t.TempDir(),
		ClientURL:  "http://" + addrs[0],
		PeerURL:    "http://" + addrs[1],
		TickMs:     10,
		ElectionMs: 100,
		NoFsync:    true,
	})
	require.NoError(t, err)
	t.Cleanup(m.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, m.WaitReady(ctx))
	return m.ClientAddr()
}

func TestBrowserZooKeeper(t *testing.T) {
	browse(t, "zk2", zktest.Start(t), "", false)
}
