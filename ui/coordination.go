package ui

import (
	"net/http"
	"path"

	"github.com/topokit/topokit/topo/inspect"
	"github.com/topokit/topokit/topo/tree"
)

// lockJSON is a held lock as the page shows it.
type lockJSON struct {
	Dir    string `json:"dir"`
	Holder string `json:"holder"`
}

// electionJSON is an election as the page shows it.
type electionJSON struct {
	Name string `json:"name"`
	// LeaderID is empty when nobody leads; Value is the leader's
	// published value; Token the fencing token of its term.
	LeaderID string `json:"leaderId"`
	Value    string `json:"value,omitempty"`
	Token    int64  `json:"token"`
}

// semaphoreJSON is a semaphore as the page shows it.
type semaphoreJSON struct {
	Dir     string   `json:"dir"`
	Limit   int      `json:"limit"`
	Holders []string `json:"holders"`
	Tokens  []int64  `json:"tokens"`
}

// coordination answers who holds what under a directory: GET
// /api/coordination?path=DIR: its held locks (inspect.Locks), every
// election of the store with its leader (inspect.Elections), and the
// semaphores under DIR (directories holding a semaphore's "holders"
// record) with their holders.
func (s *Server) coordination(w http.ResponseWriter, r *http.Request) {
	p, err := dirParam(r, "path")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := s.callCtx(r)
	defer cancel()
	locks, err := inspect.Locks(ctx, s.opts.Conn, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	elections, err := inspect.Elections(ctx, s.opts.Conn)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := map[string]any{}
	ls := []lockJSON{}
	for _, l := range locks {
		ls = append(ls, lockJSON{Dir: "/" + l.Dir, Holder: l.Holder})
	}
	es := []electionJSON{}
	for _, e := range elections {
		es = append(es, electionJSON{Name: e.Name, LeaderID: e.Leader.ID, Value: string(e.Leader.Value), Token: e.Leader.Token})
	}
	ss := []semaphoreJSON{}
	if l, err := tree.List(ctx, s.opts.Conn, p); err == nil {
		for _, f := range l.Files {
			if path.Base(f.Path) != "holders" {
				continue
			}
			dir := path.Dir(f.Path)
			holders, limit, err := inspect.SemaphoreHolders(ctx, s.opts.Conn, dir)
			if err != nil {
				continue // a file named holders that is no semaphore's
			}
			sj := semaphoreJSON{Dir: "/" + dir, Limit: limit, Holders: []string{}, Tokens: []int64{}}
			for _, h := range holders {
				name := h.ID
				if h.Description != "" {
					name += " (" + h.Description + ")"
				}
				sj.Holders = append(sj.Holders, name)
				sj.Tokens = append(sj.Tokens, h.Token)
			}
			ss = append(ss, sj)
		}
	}
	out["locks"], out["elections"], out["semaphores"] = ls, es, ss
	writeJSON(w, http.StatusOK, out)
}
