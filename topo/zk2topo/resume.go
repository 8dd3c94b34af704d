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
// secret). Unavailable before the server first answered.
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

// Resume implements claims.Driver (ResumeLeaderParticipation): a new
// client asks for the candidacy's session (resumeFrame), checks that the
// entry is the session's and holds id, and returns it on that session,
// kept until the participation ends (Delete closes it: endResumed), Close
// or expiry. The whole session moves, the earlier process's other claims
// with it; that process must be gone, or its client takes the session
// back on reconnecting (the two then hold the term by turns). Errors:
// InvalidArgument for malformed info or another backend's, election's or
// id's (nothing sent); NodeExists when this Conn holds the session already
// (two clients would take it from each other, and one participation's end
// would end the other's: resume one candidacy per session, on another
// Conn than the one that made it); ErrNotHeld when the session ended or
// the entry is gone; Closed. A failed Resume closes a session it attached.
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
	// Under c.mu, so that Close and a concurrent Resume see it.
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return fail(topo.NewError(topo.Closed, q.Path))
	}
	// Held already: c's live current session, or one a Resume adopted (or
	// is adopting).
	if !c.cur.isLost() && c.cur.zk.SessionID() == ri.Session ||
		slices.ContainsFunc(c.resumed, func(s *zkSession) bool { return !s.isLost() && s.obs.resumeID == ri.Session }) {
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

// endResumed closes s when Resume adopted it (the server deletes its
// ephemerals at once, as etcd's revoked lease and Consul's destroyed
// session do); a no-op for other sessions.
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
