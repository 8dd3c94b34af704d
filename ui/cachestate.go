package ui

import (
	"net/http"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
)

// cacheState tells the page the condition of the read cache behind
// Options.Files (found with topo.ConnAs in its decorator chain):
// {"cache": false} when there is none, otherwise its health ("healthy",
// "resyncing", "stale", "over-limit"), since when (RFC 3339, UTC), when
// the store last answered, why it left healthy, and what memory holds.
// The page polls it and shows it in its header.
func (s *Server) cacheState(w http.ResponseWriter, _ *http.Request) {
	c, ok := topo.ConnAs[*cache.Cache](s.opts.Files)
	if !ok {
		writeJSON(w, http.StatusOK, map[string]any{"cache": false})
		return
	}
	st := c.State()
	reason := ""
	if st.Err != nil {
		reason = st.Err.Error()
	}
	writeJSON(w, http.StatusOK, map[string]any{"cache": true, "health": st.Health.String(),
		"since": st.Since.UTC().Format(time.RFC3339), "confirmed": st.Confirmed.UTC().Format(time.RFC3339),
		"err": reason, "files": st.Files, "bytes": st.Bytes})
}
