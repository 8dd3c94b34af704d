package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/topokit/topokit/topo"
)

// maxEventPaths bounds the paths one live event names; beyond it the
// event says "more" and the page reloads what it shows.
const maxEventPaths = 100

// heartbeat is how often an idle event stream sends a comment, so that
// proxies and the browser keep it open.
const heartbeat = 15 * time.Second

// changeEvent is one coalesced live event: the files that changed (or
// were deleted) under the watched directory since the last event.
type changeEvent struct {
	Paths []string `json:"paths"`
	// More is set when more files changed than Paths names.
	More bool `json:"more,omitempty"`
	// Count is the number of store events folded into this one.
	Count int `json:"count"`
}

// events streams the changes under a directory as Server-Sent Events:
// GET /api/events?path=DIR&file=FILE. It watches the directory with
// WatchRecursive and, when FILE is given and lies outside DIR, that file
// too (the file the page shows, opened from a search: a WatchRecursive
// of its path, whose events for other paths are dropped), sends "ready"
// once the watches are set, then one "change" event (a changeEvent) per
// Options.Coalesce at most, and ends when the client goes away or a watch
// ends (the page's EventSource then reconnects). A watch that cannot be
// set is answered as an error, as other requests are (503 when the store
// is unavailable); the page then starts the stream again after a delay.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	p, err := dirParam(r, "path")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, r, fmt.Errorf("ui: the response cannot stream"))
		return
	}
	prefix := p
	if prefix != "" {
		prefix += "/"
	}
	file := ""
	if f := r.URL.Query().Get("file"); f != "" {
		if file, err = topo.CleanFilePath(f); err != nil {
			s.fail(w, r, err)
			return
		}
		if strings.HasPrefix(file, prefix) {
			file = "" // the directory's watch tells its changes
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	_, changes, err := s.opts.Files.WatchRecursive(ctx, prefix)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer func() {
		cancel()
		for range changes { // drain until the watch closes
		}
	}()
	// fileChanges stays nil (never ready) without a file to follow.
	var fileChanges <-chan *topo.WatchDataRecursive
	if file != "" {
		var fc <-chan *topo.WatchDataRecursive
		if _, fc, err = s.filesFor(file).WatchRecursive(ctx, file); err != nil {
			s.fail(w, r, err)
			return
		}
		fileChanges = fc
		// (this runs before the drain of the directory's watch: it cancels
		// too, or it would wait for ever when that watch ended first)
		defer func() {
			cancel()
			for range fc { // drain until the watch closes
			}
		}()
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: 1000\nevent: ready\ndata: {}\n\n")
	flusher.Flush()

	pending := map[string]bool{}
	count := 0
	var flush <-chan time.Time
	var timer *time.Timer
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	send := func() bool {
		ev := changeEvent{Count: count}
		for q := range pending {
			ev.Paths = append(ev.Paths, q)
		}
		sort.Strings(ev.Paths)
		if len(ev.Paths) > maxEventPaths {
			ev.Paths, ev.More = ev.Paths[:maxEventPaths], true
		}
		b, _ := json.Marshal(ev)
		clear(pending)
		count = 0
		if _, err := fmt.Fprintf(w, "event: change\ndata: %s\n\n", b); err != nil {
			return false
		}
		flusher.Flush()
		return true
	}
	// note records one event of a watch; it returns false when the watch
	// closed (what is pending is sent, and the page reconnects).
	note := func(wd *topo.WatchDataRecursive, ok bool) bool {
		if !ok {
			if count > 0 {
				send()
			}
			return false
		}
		if wd.Err != nil && !topo.IsErrType(wd.Err, topo.NoNode) {
			// The watch ends (Interrupted, or the store went away):
			// report what is pending and let the page reconnect.
			return true
		}
		pending["/"+wd.Path] = true
		count++
		if flush == nil {
			timer = time.NewTimer(s.opts.Coalesce)
			flush = timer.C
		}
		return true
	}
	for {
		select {
		case wd, ok := <-changes:
			if !note(wd, ok) {
				return
			}
		case wd, ok := <-fileChanges:
			if ok && wd.Path != file {
				continue // another path with the file's path as prefix
			}
			if !note(wd, ok) {
				return
			}
		case <-flush:
			flush = nil
			if !send() {
				return
			}
		case <-beat.C:
			if _, err := fmt.Fprintf(w, ": beat\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		}
	}
}
