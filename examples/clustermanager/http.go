package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"

	"github.com/topokit/topokit/topo"
)

// Status is the answer of GET /status.
type Status struct {
	ID         string     `json:"id"`
	Addr       string     `json:"addr"`
	Leader     string     `json:"leader"` // "" when nobody leads
	IsLeader   bool       `json:"is_leader"`
	Assignment Assignment `json:"assignment"`
}

// Handler returns the instance's HTTP API:
//
//	GET  /status        this instance, the leader, and its own assignment
//	GET  /assignments   every member's assignment, as this instance sees it
//	PUT  /desired       (leader only) replace the desired state
//	POST /reconcile     (leader only) reconcile now; answers the assignments
//
// (run adds GET /metrics beside it.) A follower answers the leader-only requests with 307 Temporary Redirect
// to the same path on the leader (307 keeps the method and body), and 503
// when nobody leads.
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", m.handleStatus)
	mux.HandleFunc("GET /assignments", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.Assignments())
	})
	mux.HandleFunc("PUT /desired", m.leaderOnly(m.handleDesired))
	mux.HandleFunc("POST /reconcile", m.leaderOnly(m.handleReconcile))
	return mux
}

func (m *Manager) handleStatus(w http.ResponseWriter, r *http.Request) {
	leader, err := m.election.Leader(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	mctx, err := m.election.WithMastership(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, http.StatusOK, Status{
		ID:         m.cfg.ID,
		Addr:       m.cfg.Addr,
		Leader:     leader,
		IsLeader:   mctx.Err() == nil,
		Assignment: m.Assignments()[m.cfg.ID],
	})
}

// leaderOnly runs h with the mastership context as the request context
// when this instance leads, and redirects to the leader otherwise.
func (m *Manager) leaderOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		mctx, err := m.election.WithMastership(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if mctx.Err() == nil {
			h(w, r.WithContext(mctx))
			return
		}
		id, addr, err := m.leaderAddr(r.Context())
		switch {
		case err != nil:
			http.Error(w, "finding the leader: "+err.Error(), http.StatusServiceUnavailable)
			return
		case id == "" || addr == "":
			w.Header().Set("Retry-After", "1")
			http.Error(w, "no leader", http.StatusServiceUnavailable)
			return
		case id == m.cfg.ID:
			// The store still names us while we are stepping down or
			// just about to lead.
			w.Header().Set("Retry-After", "1")
			http.Error(w, "leadership is changing", http.StatusServiceUnavailable)
			return
		}
		target := url.URL{Scheme: "http", Host: addr, Path: r.URL.Path, RawQuery: r.URL.RawQuery}
		w.Header().Set("X-Leader-Id", id)
		http.Redirect(w, r, target.String(), http.StatusTemporaryRedirect)
	}
}

func (m *Manager) handleDesired(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, topo.MaxValueSize+1))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var desired DesiredState
	if err := json.Unmarshal(body, &desired); err != nil {
		http.Error(w, "desired state: "+err.Error(), http.StatusBadRequest)
		return
	}
	data, err := json.Marshal(desired)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	v, err := m.conn.Update(r.Context(), desiredPath, data, nil)
	if err != nil {
		httpError(w, err)
		return
	}
	m.requestReconcile()
	writeJSON(w, http.StatusOK, map[string]string{"version": v.String()})
}

func (m *Manager) handleReconcile(w http.ResponseWriter, r *http.Request) {
	got, err := m.reconcile(r.Context())
	if err != nil {
		httpError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, got)
}

func httpError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch topo.CodeOf(err) {
	case topo.InvalidArgument, topo.InvalidPath:
		code = http.StatusBadRequest
	case topo.Interrupted, topo.LockLost, topo.Unavailable, topo.Timeout, topo.Closed:
		// Interrupted here means that mastership ended mid-request.
		code = http.StatusServiceUnavailable
	}
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	http.Error(w, err.Error(), code)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
