package ui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/connect"
	"github.com/topokit/topokit/ui"
)

// openEtcd starts an embedded etcd and serves a ui.Server over it.
func openEtcd(b *testing.B) (topo.Conn, *ui.Server, *httptest.Server) {
	b.Helper()
	srv, err := connect.Settings{}.Open(context.Background(), "etcd2", embeddedEtcd(b), "/vitess/global")
	require.NoError(b, err)
	b.Cleanup(srv.Close)
	conn := srv.GlobalCell()
	s, err := ui.New(ui.Options{Conn: conn})
	require.NoError(b, err)
	ts := httptest.NewServer(s)
	b.Cleanup(ts.Close)
	return conn, s, ts
}

func get(b *testing.B, s *ui.Server, url string) *http.Response {
	b.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(b, err)
	req.Header.Set("Authorization", "Bearer "+s.Token())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(b, err)
	require.Equal(b, http.StatusOK, resp.StatusCode)
	return resp
}

// BenchmarkDirTenThousandChildren opens a directory of 10,000 files on the
// embedded etcd: its first page with versions and sizes (the goal is well
// under a second per op).
func BenchmarkDirTenThousandChildren(b *testing.B) {
	conn, s, ts := openEtcd(b)
	const n = 10000
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				_, err := conn.Update(context.Background(), fmt.Sprintf("big/f%05d", i), []byte("v"), nil)
				if err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	b.ResetTimer()
	for b.Loop() {
		resp := get(b, s, ts.URL+"/api/dir?path=/big")
		var d struct{ Total int }
		require.NoError(b, json.NewDecoder(resp.Body).Decode(&d))
		resp.Body.Close()
		require.Equal(b, n, d.Total)
	}
}

// BenchmarkBurstThousandChanges writes 1,000 changes under a watched
// directory and reads the live stream until each file was named: it
// reports the events the page received per burst (events/op), which
// coalescing keeps far below 1,000.
func BenchmarkBurstThousandChanges(b *testing.B) {
	conn, s, ts := openEtcd(b)
	events := 0
	for b.Loop() {
		resp := get(b, s, ts.URL+"/api/events?path=/burst")
		r := bufio.NewReader(resp.Body)
		readEvent := func() (string, string) {
			var ev, data string
			for {
				line, err := r.ReadString('\n')
				if err == io.EOF {
					b.Fatal("stream ended")
				}
				require.NoError(b, err)
				line = strings.TrimRight(line, "\n")
				switch {
				case line == "" && ev != "":
					return ev, data
				case strings.HasPrefix(line, "event: "):
					ev = line[7:]
				case strings.HasPrefix(line, "data: "):
					data = line[6:]
				}
			}
		}
		ev, _ := readEvent()
		require.Equal(b, "ready", ev)
		const files = 100
		go func() {
			for i := range 1000 {
				_, err := conn.Update(context.Background(), fmt.Sprintf("burst/f%03d", i%files), []byte(fmt.Sprint(i)), nil)
				if err != nil {
					b.Error(err)
				}
			}
			_, _ = conn.Update(context.Background(), "burst/0-last", []byte("end"), nil)
		}()
		// The last write's path sorts first, so that an event naming more
		// than maxEventPaths files still names it.
		for {
			_, data := readEvent()
			events++
			if strings.Contains(data, `"/burst/0-last"`) {
				break
			}
		}
		resp.Body.Close()
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}
