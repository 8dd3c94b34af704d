package ui

import (
	"net/http"
	"path"
	"time"

	"github.com/topokit/topokit/topo/inspect"
	"github.com/topokit/topokit/topo/tree"
)

// lockJSON is a held lock as the page shows it.
type lockJSON struct {
	Dir    string `json:"dir"`
	Holder string `json:"holder"`
	// Token is the holder's fencing token and Session its session (0 and
	// "" where the store does not show them); Since and Age (whole
	// seconds, by the server's clock against the store's) are empty where
	// the store does not show when the lock was taken (see
	// inspect.Lock); Waiters are the queued contenders, next first.
	Token   int64  `json:"token"`
	Session string `json:"session,omitempty"`
	Since   string `json:"since,omitempty"`
	Age     string `json:"age,omitempty"`
	// TTL is the holder's remaining session TTL (etcd's lease), empty
	// where the store does not show it.
	TTL     string       `json:"ttl,omitempty"`
	Waiters []queuedJSON `json:"waiters"`
}

// queuedJSON is a lock's waiter or an election's candidate as the page
// shows it (see inspect.Entry).
type queuedJSON struct {
	Token    int64  `json:"token"`
	Session  string `json:"session,omitempty"`
	Contents string `json:"contents"`
	Since    string `json:"since,omitempty"`
}

// queuedListJSON converts waiters or candidates, never nil.
func queuedListJSON(es []inspect.Entry) []queuedJSON {
	out := []queuedJSON{}
	for _, e := range es {
		out = append(out, queuedJSON{Token: e.Token, Session: e.Session, Contents: e.Contents, Since: sinceJSON(e.Since)})
	}
	return out
}

// sinceJSON is t in RFC 3339 (UTC), "" for the zero time.
func sinceJSON(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// electionJSON is an election as the page shows it.
type electionJSON struct {
	Name string `json:"name"`
	// LeaderID is empty when nobody leads; Value is the leader's
	// published value; Token the fencing token of its term.
	LeaderID string `json:"leaderId"`
	Value    string `json:"value,omitempty"`
	Token    int64  `json:"token"`
	// Candidates are the election's candidates, the leader first.
	Candidates []queuedJSON `json:"candidates"`
}

// semaphoreJSON is a semaphore as the page shows it.
type semaphoreJSON struct {
	Dir     string   `json:"dir"`
	Limit   int      `json:"limit"`
	Holders []string `json:"holders"`
	Tokens  []int64  `json:"tokens"`
}

// coordination answers who holds what under a directory: GET
// /api/coordination?path=DIR: its held locks with their holders' tokens,
// sessions and waiters (inspect.Locks), every election of the store with
// its leader and candidates (inspect.Elections), and the
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
		lj := lockJSON{Dir: "/" + l.Dir, Holder: l.Holder, Token: l.Token, Session: l.Session, Since: sinceJSON(l.Since), Waiters: queuedListJSON(l.Waiters)}
		if l.TTL > 0 {
			lj.TTL = l.TTL.String()
		}
		if !l.Since.IsZero() {
			lj.Age = time.Since(l.Since).Truncate(time.Second).String()
		}
		ls = append(ls, lj)
	}
	es := []electionJSON{}
	for _, e := range elections {
		es = append(es, electionJSON{Name: e.Name, LeaderID: e.Leader.ID, Value: string(e.Leader.Value), Token: e.Leader.Token, Candidates: queuedListJSON(e.Candidates)})
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
