package ui_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/ui"
)

// TestFilesFromCache: with Options.Files a read cache over Conn, the
// tree's values and a record are answered from memory, an edit made on
// the page is read back at once, and the lock view (Conn) still lists
// the holder, which a cache of files does not hold.
func TestFilesFromCache(t *testing.T) {
	var hits atomic.Int64
	h := newHarness(t, true, func(o *ui.Options) {
		c, err := cache.New(o.Conn, "", cache.Options{LeaveConnOpen: true, Hooks: cache.Hooks{OnRead: func(_ string, o cache.Outcome) {
			if o == cache.Hit {
				hits.Add(1)
			}
		}}})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		o.Files = c
	})
	ctx := context.Background()
	v := h.put("d/a", "one")
	lock, err := h.conn.Lock(ctx, "d", "holder-1")
	require.NoError(t, err)
	defer func() { _ = lock.Unlock(ctx) }()

	require.Eventually(t, func() bool {
		status, body := h.do("GET", "/api/file?path=/d/a", "", nil)
		return status == http.StatusOK && decodeJSON(t, body)["text"] == "one"
	}, 10*time.Second, time.Millisecond, "the cache never held d/a")
	before := hits.Load()
	status, body := h.do("GET", "/api/dir?path=/d", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	assert.Greater(t, hits.Load(), before, "the tree's values come from memory")

	status, body = h.write("PUT", "/api/file", `{"path":"/d/a","version":"`+v.String()+`","format":"text","value":"two"}`)
	require.Equal(t, http.StatusOK, status, body)
	status, body = h.do("GET", "/api/file?path=/d/a", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "two", decodeJSON(t, body)["text"], "the page reads its own edit back")

	status, body = h.do("GET", "/api/coordination?path=/", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, "holder-1")

	status, body = h.do("GET", "/api/cache", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	st := decodeJSON(t, body)
	assert.Equal(t, true, st["cache"])
	assert.Equal(t, "healthy", st["health"])
}

// TestCacheStateWithoutCache: with no cache behind Files the page is told
// so (and hides the badge).
func TestCacheStateWithoutCache(t *testing.T) {
	h := newHarness(t, false)
	status, body := h.do("GET", "/api/cache", "", nil)
	require.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, map[string]any{"cache": false}, decodeJSON(t, body))
}
