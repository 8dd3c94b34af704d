package ui_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/ui"
)

// dirWatchConn is a Conn whose WatchRecursive of the prefix dir is the
// channel the test feeds and closes (the watch of the directory shown
// ending alone, as a store-side failure may end one watch); every other
// call goes to Conn.
type dirWatchConn struct {
	topo.Conn
	dir     string
	changes chan *topo.WatchDataRecursive
}

func (c *dirWatchConn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	if prefix == c.dir {
		return nil, c.changes, nil
	}
	return c.Conn.WatchRecursive(ctx, prefix)
}

// TestEventsEndWhenDirWatchEnds: when the directory's watch ends while
// the file followed besides it is still watched, the stream ends (the page
// reconnects). It hung: the file's watch was drained before its context
// was cancelled, so the page kept a stream that told nothing more, under
// "live".
func TestEventsEndWhenDirWatchEnds(t *testing.T) {
	fake := &dirWatchConn{dir: "w/", changes: make(chan *topo.WatchDataRecursive, 1)}
	h := newHarness(t, false, func(o *ui.Options) { fake.Conn = o.Conn; o.Files = fake })
	h.put("o/f", "0")
	req, err := http.NewRequest("GET", h.ts.URL+"/api/events?path=/w&file=/o/f", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+h.srv.Token())
	// (the bound turns a hang into a failure; it is no timing assertion)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.ts.Client().Do(req.WithContext(ctx))
	require.NoError(t, err)
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	line, err = r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "event: ready\n", line)
	fake.changes <- &topo.WatchDataRecursive{Path: "w/", WatchData: topo.WatchData{Err: topo.NewError(topo.Unavailable, "w/")}}
	close(fake.changes)
	_, err = io.ReadAll(r)
	require.NoError(t, err, "the stream did not end when the directory's watch did")
}

// TestEventsFileParam: the file parameter is checked as every path is
// (400, code "invalid path"), and must name a file.
func TestEventsFileParam(t *testing.T) {
	h := newHarness(t, false)
	for _, f := range []string{"..", "/o/../x", "/o/%00x", "/" + strings.Repeat("a", 5000), "/o/", "/", "o//f"} {
		code, body := h.do("GET", "/api/events?path=/w&file="+f, "", nil)
		require.Equal(t, http.StatusBadRequest, code, f)
		require.Contains(t, body, `"code":"invalid path"`, f)
	}
}
