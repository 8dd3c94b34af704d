package ui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo/memtest"
	"github.com/topokit/topokit/ui"
)

// harness is a ui.Server over a memory store, served by httptest.
type harness struct {
	t    *testing.T
	conn topo.Conn
	srv  *ui.Server
	ts   *httptest.Server
	csrf string
}

func newHarness(t *testing.T, writable bool, mod ...func(*ui.Options)) *harness {
	t.Helper()
	store := memtest.New(t, memtest.Options{})
	return newHarnessOn(t, store.Server.GlobalCell(), writable, mod...)
}

// newHarnessOn is newHarness over conn (a real server's, say).
func newHarnessOn(t *testing.T, conn topo.Conn, writable bool, mod ...func(*ui.Options)) *harness {
	t.Helper()
	opts := ui.Options{Conn: conn, Name: "memory", Writable: writable, Coalesce: 10 * time.Millisecond}
	for _, m := range mod {
		m(&opts)
	}
	s, err := ui.New(opts)
	require.NoError(t, err)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	h := &harness{t: t, conn: conn, srv: s, ts: ts}
	// The page carries the CSRF token in a meta tag.
	status, body := h.do("GET", "/", "", nil)
	require.Equal(t, http.StatusOK, status)
	_, rest, ok := strings.Cut(body, `name="csrf-token" content="`)
	require.True(t, ok, body)
	h.csrf, _, _ = strings.Cut(rest, `"`)
	require.NotEmpty(t, h.csrf)
	return h
}

// do sends an authorized request (bearer token) with the CSRF header
// when csrf is set.
func (h *harness) do(method, path, body string, hdr map[string]string) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, h.ts.URL+path, strings.NewReader(body))
	require.NoError(h.t, err)
	req.Header.Set("Authorization", "Bearer "+h.srv.Token())
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := h.ts.Client().Do(req)
	require.NoError(h.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(h.t, err)
	return resp.StatusCode, string(b)
}

// write sends a writing request with the page's CSRF token.
func (h *harness) write(method, path, body string) (int, string) {
	h.t.Helper()
	return h.do(method, path, body, map[string]string{ui.CSRFHeader: h.csrf, "Content-Type": "application/json"})
}

func (h *harness) put(p, value string) topo.Version {
	h.t.Helper()
	v, err := h.conn.Update(context.Background(), p, []byte(value), nil)
	require.NoError(h.t, err)
	return v
}

// value is the contents of the file p in the store.
func (h *harness) value(p string) string {
	h.t.Helper()
	got, _, err := h.conn.Get(context.Background(), p)
	require.NoError(h.t, err)
	return string(got)
}

func decodeJSON(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m), body)
	return m
}

func TestAuthRequiresToken(t *testing.T) {
	h := newHarness(t, false)
	for _, p := range []string{"/", "/api/info", "/api/dir?path=/", "/static/app.js", "/api/events?path=/"} {
		resp, err := http.Get(h.ts.URL + p)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, p)
	}
	// A wrong token is refused too, in each place it can be given.
	resp, err := http.Get(h.ts.URL + "/?token=wrong")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	req, _ := http.NewRequest("GET", h.ts.URL+"/api/info", nil)
	req.AddCookie(&http.Cookie{Name: h.srv.CookieName(), Value: "wrong"})
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}

func TestAuthTokenURLSetsCookie(t *testing.T) {
	h := newHarness(t, false)
	jar := &cookieJar{}
	c := &http.Client{Jar: jar}
	resp, err := c.Get(h.srv.URL(h.ts.URL))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), "csrf-token")
	// The redirect dropped the token from the address.
	assert.NotContains(t, resp.Request.URL.RawQuery, "token")
	// The cookie now authorizes the API.
	resp, err = c.Get(h.ts.URL + "/api/info")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	require.NotEmpty(t, jar.cookies)
	ck := jar.cookies[0]
	assert.True(t, ck.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, ck.SameSite)
}

// cookieJar is a minimal jar for one host.
type cookieJar struct{ cookies []*http.Cookie }

func (j *cookieJar) SetCookies(_ *url.URL, cs []*http.Cookie) { j.cookies = append(j.cookies, cs...) }
func (j *cookieJar) Cookies(_ *url.URL) []*http.Cookie        { return j.cookies }

func TestReadOnlyRefusesWrites(t *testing.T) {
	h := newHarness(t, false)
	v := h.put("a/b", "x")
	for _, w := range []struct{ method, path, body string }{
		{"PUT", "/api/file", `{"path":"/a/b","version":"` + v.String() + `","format":"text","value":"y"}`},
		{"DELETE", "/api/file?path=/a/b&version=" + v.String(), ""},
		{"POST", "/api/delete-tree", `{"path":"/a","count":1}`},
	} {
		status, body := h.write(w.method, w.path, w.body)
		assert.Equal(t, http.StatusForbidden, status, w.method+" "+w.path)
		assert.Contains(t, body, "ReadOnly")
	}
	assert.Equal(t, "x", h.value("a/b"))
}

func TestCSRFRequiredOnWrites(t *testing.T) {
	h := newHarness(t, true)
	v := h.put("a/b", "x")
	body := `{"path":"/a/b","version":"` + v.String() + `","format":"text","value":"y"}`
	status, resp := h.do("PUT", "/api/file", body, nil)
	assert.Equal(t, http.StatusForbidden, status)
	assert.Contains(t, resp, "CSRF")
	status, _ = h.do("PUT", "/api/file", body, map[string]string{ui.CSRFHeader: "wrong"})
	assert.Equal(t, http.StatusForbidden, status)
	status, _ = h.do("DELETE", "/api/file?path=/a/b&version="+v.String(), "", nil)
	assert.Equal(t, http.StatusForbidden, status)
	status, _ = h.do("POST", "/api/delete-tree", `{"path":"/a","count":1}`, nil)
	assert.Equal(t, http.StatusForbidden, status)
	// The right token from a foreign origin is refused as well.
	status, _ = h.do("PUT", "/api/file", body, map[string]string{ui.CSRFHeader: h.csrf, "Origin": "http://evil.example"})
	assert.Equal(t, http.StatusForbidden, status)
	status, _ = h.do("PUT", "/api/file", body, map[string]string{ui.CSRFHeader: h.csrf, "Sec-Fetch-Site": "cross-site"})
	assert.Equal(t, http.StatusForbidden, status)
	assert.Equal(t, "x", h.value("a/b"))
	// With it, from the page's origin, the write goes through.
	status, resp = h.do("PUT", "/api/file", body, map[string]string{ui.CSRFHeader: h.csrf, "Origin": h.ts.URL})
	assert.Equal(t, http.StatusOK, status, resp)
}

func TestDirPagesWithStat(t *testing.T) {
	h := newHarness(t, false, func(o *ui.Options) { o.PageSize = 2 })
	h.put("d/a", "1")
	h.put("d/b", "22")
	h.put("d/c/x", "333")
	status, body := h.do("GET", "/api/dir?path=/d", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	m := decodeJSON(t, body)
	assert.EqualValues(t, 3, m["total"])
	assert.EqualValues(t, 2, m["next"])
	entries := m["entries"].([]any)
	require.Len(t, entries, 2)
	a := entries[0].(map[string]any)
	assert.Equal(t, "/d/a", a["path"])
	assert.EqualValues(t, 1, a["size"])
	assert.NotEmpty(t, a["version"])
	status, body = h.do("GET", "/api/dir?path=/d&offset=2", "", nil)
	require.Equal(t, http.StatusOK, status)
	m = decodeJSON(t, body)
	assert.EqualValues(t, -1, m["next"])
	c := m["entries"].([]any)[0].(map[string]any)
	assert.Equal(t, "/d/c", c["path"])
	assert.Equal(t, true, c["dir"])
	// An empty store's root is an empty directory; an absent directory is
	// 404; a bad offset 400.
	empty := newHarness(t, false)
	status, body = empty.do("GET", "/api/dir?path=/", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	assert.EqualValues(t, 0, decodeJSON(t, body)["total"])
	status, _ = h.do("GET", "/api/dir?path=/nothing", "", nil)
	assert.Equal(t, http.StatusNotFound, status)
	status, _ = h.do("GET", "/api/dir?path=/d&offset=-1", "", nil)
	assert.Equal(t, http.StatusBadRequest, status)
	// limit asks for more (or fewer) entries than a page; 0 is refused.
	status, body = h.do("GET", "/api/dir?path=/d&limit=3", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	m = decodeJSON(t, body)
	assert.Len(t, m["entries"], 3)
	assert.EqualValues(t, -1, m["next"])
	status, body = h.do("GET", "/api/dir?path=/d&offset=1&limit=1", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	m = decodeJSON(t, body)
	assert.Equal(t, "/d/b", m["entries"].([]any)[0].(map[string]any)["path"])
	assert.EqualValues(t, 2, m["next"])
	status, _ = h.do("GET", "/api/dir?path=/d&limit=0", "", nil)
	assert.Equal(t, http.StatusBadRequest, status)
}

func TestCoordinationView(t *testing.T) {
	h := newHarness(t, false)
	ctx := context.Background()
	h.put("d/f", "1")
	lock, err := h.conn.Lock(ctx, "d", "holder-1")
	require.NoError(t, err)
	defer func() { _ = lock.Unlock(ctx) }()
	part, err := h.conn.NewLeaderParticipation("elect", "leader-1")
	require.NoError(t, err)
	defer part.Stop()
	_, err = part.Campaign(ctx, []byte("value-1"))
	require.NoError(t, err)
	// A waiter queues behind the lock, a candidate behind the leader.
	wctx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		if ld, err := h.conn.Lock(wctx, "d", "waiter-1"); err == nil {
			_ = ld.Unlock(ctx)
		}
	}()
	defer func() { stopWaiting(); <-waited }()
	cand, err := h.conn.NewLeaderParticipation("elect", "candidate-2")
	require.NoError(t, err)
	defer cand.Stop()
	go func() { _, _ = cand.WaitForLeadership() }()
	sem, err := semaphore.New(h.conn, "sems/s", 2, semaphore.Options{Description: "worker-1"})
	require.NoError(t, err)
	held, err := sem.Acquire(ctx)
	require.NoError(t, err)
	defer func() { _ = held.Unlock(ctx) }()

	type queued struct {
		Token    int64
		Contents string
	}
	var c struct {
		Locks []struct {
			Dir, Holder string
			Token       int64
			Waiters     []queued
		}
		Elections []struct {
			Name       string
			LeaderID   string `json:"leaderId"`
			Value      string
			Token      int64
			Candidates []queued
		}
		Semaphores []struct {
			Dir     string
			Limit   int
			Holders []string
			Tokens  []int64
		}
	}
	var body string
	require.Eventually(t, func() bool {
		var status int
		status, body = h.do("GET", "/api/coordination?path=/", "", nil)
		require.Equal(t, http.StatusOK, status, body)
		require.NoError(t, json.Unmarshal([]byte(body), &c))
		return len(c.Locks) > 0 && len(c.Locks[0].Waiters) == 1 && len(c.Elections) == 1 && len(c.Elections[0].Candidates) == 2
	}, 30*time.Second, 5*time.Millisecond, "the waiter and the candidate queue")
	var dirs []string
	for _, l := range c.Locks {
		dirs = append(dirs, l.Dir+"="+l.Holder)
	}
	assert.Contains(t, dirs, "/d=holder-1")
	require.Len(t, c.Elections, 1)
	assert.Equal(t, "elect", c.Elections[0].Name)
	assert.Equal(t, "leader-1", c.Elections[0].LeaderID)
	assert.Equal(t, "value-1", c.Elections[0].Value)
	assert.Positive(t, c.Elections[0].Token)
	assert.Equal(t, "/d", c.Locks[0].Dir, "walk order: /d first")
	assert.Equal(t, lock.Token(), c.Locks[0].Token)
	assert.Equal(t, "waiter-1", c.Locks[0].Waiters[0].Contents)
	assert.Greater(t, c.Locks[0].Waiters[0].Token, c.Locks[0].Token)
	assert.Equal(t, []queued{{c.Elections[0].Token, "leader-1"}, {c.Elections[0].Candidates[1].Token, "candidate-2"}}, c.Elections[0].Candidates)
	require.Len(t, c.Semaphores, 1)
	assert.Equal(t, "/sems/s", c.Semaphores[0].Dir)
	assert.Equal(t, 2, c.Semaphores[0].Limit)
	require.Len(t, c.Semaphores[0].Holders, 1)
	assert.Contains(t, c.Semaphores[0].Holders[0], "worker-1")
}

func TestBadPathsRefused(t *testing.T) {
	h := newHarness(t, true)
	for _, p := range []string{
		"/api/dir?path=a//b", "/api/dir?path=/a/../b", "/api/file?path=/", "/api/file?path=a/",
		"/api/file?path=%01x", "/api/search?prefix=a//", "/api/count?path=/x/./y",
		"/api/version?path=a//b&version=1", "/api/compare?a=/a//b&b=/", "/api/events?path=a/../b",
		"/api/coordination?path=a//b",
	} {
		status, body := h.do("GET", p, "", nil)
		assert.Equal(t, http.StatusBadRequest, status, p)
		assert.Contains(t, body, "invalid path", p)
	}
	status, body := h.write("PUT", "/api/file", `{"path":"a//b","version":"","format":"text","value":"y"}`)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, "invalid path")
	status, _ = h.write("DELETE", "/api/file?path=a/./b&version=1", "")
	assert.Equal(t, http.StatusBadRequest, status)
	status, _ = h.write("POST", "/api/delete-tree", `{"path":"a/../b","count":0}`)
	assert.Equal(t, http.StatusBadRequest, status)
	status, _ = h.write("POST", "/api/delete-tree", `{"path":"/","count":0}`)
	assert.Equal(t, http.StatusBadRequest, status)
	_, err := h.conn.List(context.Background(), "")
	assert.True(t, topo.IsErrType(err, topo.NoNode), "nothing was written: %v", err)
}

func TestOversizedBodyRefused(t *testing.T) {
	h := newHarness(t, true, func(o *ui.Options) { o.MaxBody = 1024 })
	big := strings.Repeat("x", 2048)
	status, body := h.write("PUT", "/api/file", `{"path":"/a","version":"","format":"text","value":"`+big+`"}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, status, body)
	assert.Contains(t, body, "the request is more than the 1024 bytes a request may hold", "the error says how large a request may be")
	// A value over topo.MaxValueSize is refused even within MaxBody.
	h2 := newHarness(t, true)
	huge := strings.Repeat("x", topo.MaxValueSize+1)
	status, body = h2.write("PUT", "/api/file", `{"path":"/a","version":"","format":"text","value":"`+huge+`"}`)
	assert.Equal(t, http.StatusBadRequest, status, body)
	_, _, err := h2.conn.Get(context.Background(), "a")
	assert.True(t, topo.IsErrType(err, topo.NoNode))
	// Malformed and unknown fields are 400.
	status, _ = h2.write("PUT", "/api/file", `{"path":"/a","bogus":1}`)
	assert.Equal(t, http.StatusBadRequest, status)
}

func TestEditCompareAndSet(t *testing.T) {
	h := newHarness(t, true)
	v := h.put("a/b", "one")
	status, body := h.write("PUT", "/api/file", `{"path":"/a/b","version":"`+v.String()+`","format":"text","value":"two"}`)
	require.Equal(t, http.StatusOK, status, body)
	// The answer is the file as written: its value and new version.
	saved := decodeJSON(t, body)
	assert.Equal(t, "/a/b", saved["path"])
	assert.Equal(t, "two", saved["text"])
	_, sv, err := h.conn.Get(context.Background(), "a/b")
	require.NoError(t, err)
	assert.Equal(t, sv.String(), saved["version"])
	// A second save on the version the page showed loses: 409 with the
	// current value, and the store keeps "two".
	status, body = h.write("PUT", "/api/file", `{"path":"/a/b","version":"`+v.String()+`","format":"text","value":"three"}`)
	require.Equal(t, http.StatusConflict, status, body)
	m := decodeJSON(t, body)
	cur := m["current"].(map[string]any)
	assert.Equal(t, "two", cur["text"])
	assert.Equal(t, "two", h.value("a/b"))
	// Creating an existing file is a conflict too; a stale delete as well.
	status, _ = h.write("PUT", "/api/file", `{"path":"/a/b","version":"","format":"text","value":"x"}`)
	assert.Equal(t, http.StatusConflict, status)
	status, _ = h.write("DELETE", "/api/file?path=/a/b&version="+v.String(), "")
	assert.Equal(t, http.StatusConflict, status)
	_, nv, err := h.conn.Get(context.Background(), "a/b")
	require.NoError(t, err)
	status, _ = h.write("DELETE", "/api/file?path=/a/b&version="+nv.String(), "")
	assert.Equal(t, http.StatusOK, status)
}

func TestEditFormats(t *testing.T) {
	h := newHarness(t, true)
	status, body := h.write("PUT", "/api/file", `{"path":"/h","version":"","format":"hex","value":"00ff"}`)
	require.Equal(t, http.StatusOK, status, body)
	got, _, err := h.conn.Get(context.Background(), "h")
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0xff}, got)
	status, _ = h.write("PUT", "/api/file", `{"path":"/h2","version":"","format":"hex","value":"zz"}`)
	assert.Equal(t, http.StatusBadRequest, status)
	// JSON of a known record (CellInfo) is encoded as protobuf, and
	// decodes back to the same fields.
	status, body = h.write("PUT", "/api/file", `{"path":"/cells/zone1/CellInfo","version":"","format":"json","value":"{\"serverAddress\":\"z:1\",\"root\":\"/zone1\"}"}`)
	require.Equal(t, http.StatusOK, status, body)
	status, body = h.do("GET", "/api/file?path=/cells/zone1/CellInfo", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	m := decodeJSON(t, body)
	assert.Contains(t, m["decoded"], `"serverAddress": "z:1"`)
	status, _ = h.write("PUT", "/api/file", `{"path":"/cells/zone2/CellInfo","version":"","format":"json","value":"{\"nope\":1}"}`)
	assert.Equal(t, http.StatusBadRequest, status)
	status, _ = h.write("PUT", "/api/file", `{"path":"/x","version":"","format":"yaml","value":""}`)
	assert.Equal(t, http.StatusBadRequest, status)
}

func TestFileViews(t *testing.T) {
	h := newHarness(t, false)
	h.put("t", "hello")
	h.put("bin", "\x00\x01")
	status, body := h.do("GET", "/api/file?path=/t", "", nil)
	require.Equal(t, http.StatusOK, status)
	m := decodeJSON(t, body)
	assert.Equal(t, "hello", m["text"])
	assert.Equal(t, "68656c6c6f", m["hex"])
	status, body = h.do("GET", "/api/file?path=/bin", "", nil)
	require.Equal(t, http.StatusOK, status)
	m = decodeJSON(t, body)
	assert.Nil(t, m["text"])
	assert.Equal(t, "0001", m["hex"])
	status, _ = h.do("GET", "/api/file?path=/absent", "", nil)
	assert.Equal(t, http.StatusNotFound, status)
}

func TestSearchByPrefix(t *testing.T) {
	h := newHarness(t, false)
	h.put("keyspaces/commerce/Keyspace", "a")
	h.put("keyspaces/customer/Keyspace", "b")
	h.put("other", "c")
	status, body := h.do("GET", "/api/search?prefix=/keyspaces/comm", "", nil)
	require.Equal(t, http.StatusOK, status)
	files := decodeJSON(t, body)["files"].([]any)
	require.Len(t, files, 1)
	assert.Equal(t, "/keyspaces/commerce/Keyspace", files[0].(map[string]any)["path"])
	status, body = h.do("GET", "/api/search?prefix=/none", "", nil)
	require.Equal(t, http.StatusOK, status)
	assert.Empty(t, decodeJSON(t, body)["files"])
}

func TestDeleteTreeConfirmsCount(t *testing.T) {
	h := newHarness(t, true)
	h.put("d/a", "1")
	h.put("d/b/c", "2")
	h.put("dx", "sibling")
	status, body := h.do("GET", "/api/count?path=/d", "", nil)
	require.Equal(t, http.StatusOK, status)
	assert.EqualValues(t, 2, decodeJSON(t, body)["files"])
	// A stale count deletes nothing.
	listing := h.listing("/d")
	h.put("d/new", "3")
	status, body = h.write("POST", "/api/delete-tree", `{"path":"/d","count":2,"listing":"`+listing+`"}`)
	require.Equal(t, http.StatusConflict, status, body)
	assert.EqualValues(t, 3, decodeJSON(t, body)["files"])
	kvs, err := h.conn.List(context.Background(), "d/")
	require.NoError(t, err)
	assert.Len(t, kvs, 3)
	status, body = h.write("POST", "/api/delete-tree", `{"path":"/d","count":3,"listing":"`+h.listing("/d")+`"}`)
	require.Equal(t, http.StatusOK, status, body)
	assert.EqualValues(t, 3, decodeJSON(t, body)["deleted"])
	_, err = h.conn.List(context.Background(), "d/")
	assert.True(t, topo.IsErrType(err, topo.NoNode))
	assert.Equal(t, "sibling", h.value("dx"))
}

func TestHistory(t *testing.T) {
	h := newHarness(t, false)
	v1 := h.put("f", "first")
	h.put("f", "second")
	status, body := h.do("GET", "/api/version?path=/f&version="+v1.String(), "", nil)
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "first", decodeJSON(t, body)["text"])
	status, _ = h.do("GET", "/api/version?path=/f&version=x", "", nil)
	assert.Equal(t, http.StatusBadRequest, status)
}

func TestCompareSubtreesAndStores(t *testing.T) {
	other := memtest.New(t, memtest.Options{}).Server.GlobalCell()
	h := newHarness(t, false, func(o *ui.Options) { o.Stores = map[string]topo.Conn{"other": other} })
	h.put("a/same", "s")
	h.put("a/diff", "1")
	h.put("a/onlya", "x")
	h.put("b/same", "s")
	h.put("b/diff", "2")
	h.put("b/onlyb", "y")
	status, body := h.do("GET", "/api/compare?a=/a&b=/b", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	diffs := decodeJSON(t, body)["differences"].([]any)
	var kinds []string
	for _, d := range diffs {
		kinds = append(kinds, d.(map[string]any)["path"].(string)+":"+d.(map[string]any)["kind"].(string))
	}
	assert.Equal(t, []string{"diff:differs", "onlya:only-in-a", "onlyb:only-in-b"}, kinds)
	_, err := other.Update(context.Background(), "a/same", []byte("s"), nil)
	require.NoError(t, err)
	status, body = h.do("GET", "/api/compare?a=/a&b=/a&store=other", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	assert.Len(t, decodeJSON(t, body)["differences"], 2)
	status, _ = h.do("GET", "/api/compare?a=/a&b=/a&store=nope", "", nil)
	assert.Equal(t, http.StatusBadRequest, status)
}

// events opens GET url (an /api/events stream) and returns its next
// event's name and data, read one at a time; the stream ends with the
// test, or after a minute (an event that never comes fails the test, not
// hangs it).
func (h *harness) events(t *testing.T, url string) func() (string, string) {
	t.Helper()
	req, err := http.NewRequest("GET", h.ts.URL+url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.srv.Token())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	resp, err := h.ts.Client().Do(req.WithContext(ctx))
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	r := bufio.NewReader(resp.Body)
	return func() (string, string) {
		var ev, data string
		for {
			line, err := r.ReadString('\n')
			require.NoError(t, err)
			line = strings.TrimRight(line, "\n")
			switch {
			case line == "" && ev != "":
				return ev, data
			case strings.HasPrefix(line, "event: "):
				ev = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data = line[len("data: "):]
			}
		}
	}
}

func TestEventsStreamCoalescedChanges(t *testing.T) {
	h := newHarness(t, false)
	h.put("w/a", "0")
	next := h.events(t, "/api/events?path=/w")
	ev, _ := next()
	require.Equal(t, "ready", ev)
	// A burst of changes arrives folded into few events, naming each file
	// once; a sibling outside the directory is not reported.
	h.put("wx", "outside")
	for i := range 50 {
		h.put("w/a", "v"+string(rune('a'+i%26)))
	}
	h.put("w/b", "new")
	seen := map[string]bool{}
	events := 0
	for !seen["/w/b"] || !seen["/w/a"] {
		ev, data := next()
		require.Equal(t, "change", ev)
		var c struct {
			Paths []string
			Count int
		}
		require.NoError(t, json.Unmarshal([]byte(data), &c))
		for _, p := range c.Paths {
			assert.NotEqual(t, "/wx", p)
			seen[p] = true
		}
		events++
	}
	assert.Less(t, events, 51, "changes are coalesced")
}

// TestEventsFollowFile: the stream of a directory also tells the changes
// of the file named by "file" when it lies outside the directory (the
// page shows it, opened from a search), and of no other file outside it,
// not even one whose path begins with the file's.
func TestEventsFollowFile(t *testing.T) {
	h := newHarness(t, false)
	h.put("o/f", "0")
	next := h.events(t, "/api/events?path=/w&file=/o/f")
	ev, _ := next()
	require.Equal(t, "ready", ev)
	h.put("o/f2", "sibling")
	h.put("o/f/under", "under")
	h.put("w/a", "in the directory")
	h.put("o/f", "1")
	seen := map[string]bool{}
	for !seen["/o/f"] || !seen["/w/a"] {
		ev, data := next()
		require.Equal(t, "change", ev)
		var c struct{ Paths []string }
		require.NoError(t, json.Unmarshal([]byte(data), &c))
		for _, p := range c.Paths {
			seen[p] = true
		}
	}
	assert.Equal(t, map[string]bool{"/o/f": true, "/w/a": true}, seen)

	code, body := h.do("GET", "/api/events?path=/w&file=/o/", "", nil)
	assert.Equal(t, http.StatusBadRequest, code, body)
}

func TestCheckListen(t *testing.T) {
	for _, a := range []string{"127.0.0.1:8080", "[::1]:80", "localhost:1", "127.1.2.3:0"} {
		assert.NoError(t, ui.CheckListen(a, false, false), a)
	}
	for _, a := range []string{"0.0.0.0:8080", ":8080", "10.0.0.1:80", "example.com:80"} {
		assert.ErrorIs(t, ui.CheckListen(a, false, false), ui.ErrInsecureListen, a)
		assert.NoError(t, ui.CheckListen(a, true, false), a)
		assert.NoError(t, ui.CheckListen(a, false, true), a)
	}
	assert.Error(t, ui.CheckListen("nope", false, false))
}

// TestCheckListenResolvesLocalhost: "localhost" is a loopback host only
// when every address it resolves to is a loopback one. It was accepted
// unresolved, so a localhost that /etc/hosts or DNS points at another
// address served the page there, off the loopback, without TLS and
// without --insecure.
func TestCheckListenResolvesLocalhost(t *testing.T) {
	resolving := func(ips ...string) func(context.Context, string) ([]net.IPAddr, error) {
		return func(_ context.Context, host string) ([]net.IPAddr, error) {
			if !strings.EqualFold(host, "localhost") {
				return nil, errors.New("unexpected lookup of " + host)
			}
			if len(ips) == 0 {
				return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
			}
			var out []net.IPAddr
			for _, ip := range ips {
				out = append(out, net.IPAddr{IP: net.ParseIP(ip)})
			}
			return out, nil
		}
	}
	for _, ips := range [][]string{{"127.0.0.1"}, {"127.0.0.1", "::1"}} {
		assert.NoError(t, ui.CheckListenResolving("localhost:8080", false, false, resolving(ips...)), ips)
		assert.NoError(t, ui.CheckListenResolving("LocalHost:8080", false, false, resolving(ips...)), ips)
	}
	for _, ips := range [][]string{{"10.0.0.1"}, {"127.0.0.1", "192.168.1.5"}, {"0.0.0.0"}, nil} {
		err := ui.CheckListenResolving("localhost:8080", false, false, resolving(ips...))
		assert.ErrorIs(t, err, ui.ErrInsecureListen, ips)
		assert.ErrorContains(t, err, "localhost", ips)
		assert.NoError(t, ui.CheckListenResolving("localhost:8080", true, false, resolving(ips...)), ips)
		assert.NoError(t, ui.CheckListenResolving("localhost:8080", false, true, resolving(ips...)), ips)
	}
	// An IP is never looked up.
	assert.NoError(t, ui.CheckListenResolving("127.0.0.1:1", false, false, resolving()))
}

func TestNewRefusesNoConn(t *testing.T) {
	_, err := ui.New(ui.Options{})
	assert.True(t, topo.IsErrType(err, topo.InvalidArgument))
}
