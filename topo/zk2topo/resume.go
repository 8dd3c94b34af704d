package zk2topo

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// resumeInfo is what ResumeInfo encodes (JSON).
type resumeInfo struct {
	Backend  string `json:"backend"`
	Election string `json:"election"`
	ID       string `json:"id"`
	Entry    string `json:"entry"` // the candidate znode
	Value    string `json:"value"` // its value znode
	Session  int64  `json:"session"`
	Password []byte `json:"password"`
}

const resumeBackend = "zk2"

// ResumeInfo implements claims.Driver: JSON naming the election, id,
// candidate and value znodes, and the session's id and password (a
// secret: whoever has it can act as the session). Unavailable when the
// session's password is not known (the server never answered).
func (d driver) ResumeInfo(q claims.Queue, cs *claims.Session, e claims.Entry) ([]byte, error) {
	s := cs.Ref().(*zkSession)
	pw := s.obs.password()
	if len(pw) != passwdLen {
		return nil, backendkit.Wrap(topo.Unavailable, q.Path, errors.New("zk2topo: the session's password is unknown"))
	}
	var val string
	if rec := s.entry(e.Key); rec != nil {
		val = rec.value
	}
	return json.Marshal(resumeInfo{
		Backend: resumeBackend, Election: q.Path, ID: e.Contents,
		Entry: e.Key, Value: val, Session: s.zk.SessionID(), Password: pw,
	})
}

// Resume implements claims.Driver (ResumeLeaderParticipation): it
// attaches a new client to the candidacy's live session (ZooKeeper lets
// a client reconnect to a session with its id and password; the connect
// request of the new client asks for it, see resumeFrame), checks that
// the candidate entry is the session's and holds id, and returns it on
// that session, which the Conn keeps alive until the resumed
// participation ends (Stop, Resign: Delete closes the session, see
// endResumed), the Conn's Close, or expiry. Whatever else the earlier
// process had on the session (its locks, its other candidacies) stays
// until then, its claims lost to that process: ZooKeeper moves the whole
// session. The server moves the session to the new client and drops the old one's
// connection: the old process must be gone (exited without closing its
// Conn, whose Close would have closed the session), or its client, still
// running, takes the session back when it reconnects (and this Conn's
// client takes it back in turn: the term is then held by two processes
// by turns). InvalidArgument for malformed info or info of
// another backend, election or id (before anything is sent); NodeExists
// when this Conn holds that session already, its own current one or one
// it resumed for another candidacy (a second client would take the
// session from the first, and one participation's end would end the
// other's session: resume one candidacy per session, on another Conn than
// the one that made it); ErrNotHeld when the session ended or the entry
// is gone; Closed after Close. A Resume that fails after the client
// attached the session closes it.
func (d driver) Resume(ctx context.Context, q claims.Queue, id string, info []byte) (claims.Entry, *claims.Session, error) {
	c := d.c
	dirZp := d.parent(q)
	var ri resumeInfo
	bad := func(why string) error {
		return backendkit.Wrap(topo.InvalidArgument, q.Path, errors.New("zk2topo: resume info: "+why))
	}
	fail := func(err error) (claims.Entry, *claims.Session, error) { return claims.Entry{}, nil, err }
	if err := json.Unmarshal(info, &ri); err != nil {
		return fail(bad(err.Error()))
	}
	switch {
	case ri.Backend != resumeBackend:
		return fail(bad("not a zk2 candidacy"))
	case ri.Election != q.Path:
		return fail(bad("issued for another election"))
	case ri.ID != id:
		return fail(bad("issued for another id"))
	case ri.Session == 0 || len(ri.Password) != passwdLen:
		return fail(bad("no session"))
	case zkDir(ri.Entry) != dirZp || !isEntryName(ri.Entry[len(dirZp)+1:]):
		return fail(bad("not a candidate entry of this election under this Conn's root"))
	case ri.Value != "" && (zkDir(ri.Value) != dirZp+"/"+valuesDir || !strings.HasPrefix(ri.Value[len(dirZp)+len(valuesDir)+2:], valuePrefix(ri.Session))):
		return fail(bad("not a value znode of this candidacy"))
	}
	if err := backendkit.Ready(ctx, q.Path, c.closed.Load); err != nil {
		return fail(err)
	}
	// Under c.mu, as the session is started (in the background), so that
	// Close sees it in c.resumed or it sees Close, and a concurrent Resume
	// of the same session sees it.
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return fail(topo.NewError(topo.Closed, q.Path))
	}
	if c.holdsSession(ri.Session) {
		// A second client on the session would take it from the first,
		// and the first take it back on reconnecting; and one
		// participation's end would end the other's session.
		c.mu.Unlock()
		return fail(backendkit.Wrap(topo.NodeExists, q.Path, errors.New("zk2topo: this Conn holds the session already")))
	}
	s, err := c.newSessionAs(ri.Session, ri.Password)
	if err != nil {
		c.mu.Unlock()
		return fail(backendkit.Wrap(topo.Unavailable, q.Path, err))
	}
	c.resumed = append(c.resumed, s)
	c.mu.Unlock()
	drop := func(err error) (claims.Entry, *claims.Session, error) {
		c.endResumed(s) // off c.resumed, and closed
		return fail(err)
	}
	// Wait for the server's answer: the session, or expired.
	if err := c.awaitSession(ctx, s, q.Path, ri.Session); err != nil {
		return drop(err)
	}
	if err := s.ensureAuth(ctx, q.Path); err != nil {
		return drop(err)
	}
	r := c.statOn(ctx, s, q.Path, ri.Entry, true)
	if r.err == errSessionOver {
		return drop(claims.ErrNotHeld)
	}
	if r.err != nil {
		return drop(r.err)
	}
	cand, err := c.getOn(ctx, s, q.Path, ri.Entry, false)
	switch {
	case err == errSessionOver, errors.Is(err, zk.ErrNoNode), err == nil && (!r.owned(s) || string(cand.data) != id):
		return drop(claims.ErrNotHeld)
	case err != nil:
		return drop(err)
	}
	if ri.Value != "" {
		val, err := c.getOn(ctx, s, q.Path, ri.Value, false)
		switch {
		case err != nil && !errors.Is(err, zk.ErrNoNode):
			return drop(err)
		case err != nil || val.st.EphemeralOwner != ri.Session || val.st.Czxid != r.st.Czxid:
			ri.Value = "" // gone, or not this candidacy's
		}
	}
	s.mu.Lock()
	s.entries[ri.Entry] = &entry{token: r.st.Czxid, election: true, value: ri.Value}
	s.mu.Unlock()
	c.watchEntry(s, q.Path, ri.Entry, r.st.Czxid, r.ch)
	return claims.Entry{Token: r.st.Czxid, Key: ri.Entry, Session: sessionName(ri.Session), Contents: id}, s.claims, nil
}

// holdsSession reports whether the live session id is c's already: its
// current session, or one a Resume adopted (or is adopting). Call with
// c.mu held.
func (c *Conn) holdsSession(id int64) bool {
	if !c.cur.isLost() && c.cur.zk.SessionID() == id {
		return true
	}
	for _, s := range c.resumed {
		if !s.isLost() && s.obs.resumeID == id {
			return true
		}
	}
	return false
}

// endResumed closes s when it is a session Resume adopted, once its
// resumed participation withdrew its candidacy (Delete): the server
// deletes the session's ephemerals at once, the earlier process's locks
// and candidacies on it included, as etcd's revoked lease and Consul's
// destroyed session do. A no-op for the Conn's own sessions, and for a
// resumed one already ended.
func (c *Conn) endResumed(s *zkSession) {
	c.mu.Lock()
	i := slices.Index(c.resumed, s)
	if i >= 0 {
		c.resumed = slices.Delete(c.resumed, i, i+1)
	}
	c.mu.Unlock()
	if i >= 0 {
		s.lose() // closes the client: closeSession
	}
}
