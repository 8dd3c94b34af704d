package templatetopo

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// STEP 4: locks and elections. The Conn embeds the claims engine
// (claims.Claims) and writes no claims logic; driver is the engine's view
// of this store (see the package doc for the layout, sessions and who may
// delete what). This store has no leases: LockWithTTL's lock lives as long
// as its session (ttl is in effect SessionTimeout, shorter or longer).
//
// Why tokens are monotone here (the argument every driver must make for
// its store): an entry's token is the store revision of its creation; the
// engine grants an entry only once it heads its queue, so every entry
// created before it has left the queue, and an entry created later has a
// greater revision. The revision counter is the store's and survives
// Restart.

// driver implements claims.Driver on c's store: each method is ONE request
// (Conn.do), as it would be against a networked store.
type driver struct{ c *Conn }

// key is the store path of q's queue: the lock's directory, or
// elections/<name>.
func (d driver) key(q claims.Queue) string {
	if q.Election {
		return d.c.full(backendkit.ElectionsDirName + "/" + q.Path)
	}
	return d.c.full(q.Path)
}

// entryOf is the engine's view of e.
func entryOf(e *entry) claims.Entry {
	return claims.Entry{Token: e.token, Key: entryPath(e.key, e.token), Session: strconv.FormatInt(e.sess.id, 10),
		Contents: e.contents, Value: slices.Clone(e.value), ValueRev: e.valueRev}
}

// view returns c's claims.Session for ss, making it on first use (and
// anew when c's last one was declared lost: ss lost c at a Cut, and c
// resumes a candidacy on it).
func (c *Conn) view(ss *session) *claims.Session {
	v := ss.views[c]
	if v == nil || v.IsLost() {
		v = claims.NewSession(strconv.FormatInt(ss.id, 10), ss)
		ss.views[c] = v
	}
	return v
}

// Create implements claims.Driver: in one request, the checks (files
// below a lock's directory; an empty queue for TryLock) and the entry on
// c's session, opened if needed.
func (d driver) Create(ctx context.Context, q claims.Queue, contents string, opts claims.CreateOptions) (claims.Entry, *claims.Session, error) {
	var out claims.Entry
	var view *claims.Session
	err := d.c.do(func(s *Store) error {
		key := d.key(q)
		if opts.RequireFiles && !s.hasFilesBelow(key) {
			_, isFile := s.files[key]
			return backendkit.LockNeedsFiles(q.Path, isFile)
		}
		if h := s.head(key); opts.Exclusive && h != nil {
			return &claims.BusyError{Head: entryOf(h)}
		}
		ss := d.c.session(s)
		out, view = entryOf(s.enqueue(key, contents, slices.Clone(opts.Value), ss)), d.c.view(ss)
		return nil
	})
	return out, view, err
}

// List implements claims.Driver: the queue, oldest first.
func (d driver) List(ctx context.Context, q claims.Queue) ([]claims.Entry, error) {
	var out []claims.Entry
	err := d.c.do(func(s *Store) error {
		for _, e := range s.queues[d.key(q)] {
			out = append(out, entryOf(e))
		}
		return nil
	})
	return out, err
}

// WaitGone implements claims.Driver: it waits on the entry's own gone
// channel, so only that entry's removal wakes it.
func (d driver) WaitGone(ctx context.Context, q claims.Queue, e claims.Entry) error {
	var gone <-chan struct{}
	err := d.c.do(func(s *Store) error {
		if x := s.find(d.key(q), e.Token); x != nil {
			gone = x.gone
		}
		return nil
	})
	if err != nil || gone == nil {
		return err
	}
	select {
	case <-gone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// live returns the entry e of q if it is still there on the live session
// behind v, or nil.
func (d driver) live(s *Store, q claims.Queue, v *claims.Session, e claims.Entry) *entry {
	x := s.find(d.key(q), e.Token)
	if ss, _ := v.Ref().(*session); x == nil || x.sess != ss || ss.ended {
		return nil
	}
	return x
}

// Delete implements claims.Driver: removal by identity (the entry's token
// on its session), never "the entry at this path"; on a session c adopted
// (Resume), it ends the session too, with every entry on it.
func (d driver) Delete(ctx context.Context, q claims.Queue, v *claims.Session, e claims.Entry) error {
	return d.c.do(func(s *Store) error {
		x := d.live(s, q, v, e)
		if x == nil {
			return claims.ErrNotHeld
		}
		s.remove(x)
		if _, ok := d.c.adopted[x.sess]; ok {
			delete(d.c.adopted, x.sess)
			s.endSession(x.sess)
		}
		return nil
	})
}

// Held implements claims.Driver: the entry heads its queue on its live
// session.
func (d driver) Held(ctx context.Context, q claims.Queue, v *claims.Session, e claims.Entry) (bool, error) {
	var held bool
	err := d.c.do(func(s *Store) error {
		ss, _ := v.Ref().(*session)
		held = s.holds(d.key(q), e.Token, ss)
		return nil
	})
	return held, err
}

// Head implements claims.Driver. With watch it is the request of a watch,
// which Restart does not refuse (a watch is one long request); a cut link
// or a closed Conn refuses it, and the engine's Observe reads again later.
func (d driver) Head(ctx context.Context, q claims.Queue, watch bool) (claims.Entry, bool, <-chan struct{}, error) {
	var out claims.Entry
	var ok bool
	var changed <-chan struct{}
	read := func(s *Store) error {
		if h := s.head(d.key(q)); h != nil {
			out, ok = entryOf(h), true
		}
		changed = s.changed
		return nil
	}
	if !watch {
		err := d.c.do(read)
		return out, ok, nil, err
	}
	s := d.c.store
	defer s.lock()()
	switch {
	case d.c.closed.Load():
		return out, false, nil, errConnClosed
	case d.c.cut:
		return out, false, nil, errUnreachable
	}
	_ = read(s)
	return out, ok, changed, nil
}

// SetValue implements claims.Driver: guarded on the entry being in its
// queue on its live session (the engine proclaims only for a granted
// claim, and a granted entry stays the head while it lives).
func (d driver) SetValue(ctx context.Context, q claims.Queue, v *claims.Session, e claims.Entry, value []byte) error {
	return d.c.do(func(s *Store) error {
		x := d.live(s, q, v, e)
		if x == nil {
			return claims.ErrNotHeld
		}
		x.value, x.valueRev = value, s.next()
		s.notify()
		return nil
	})
}

// resumeInfo is what ResumeInfo returns, as JSON: enough for Resume to
// find the store, the session and the entry.
type resumeInfo struct {
	Backend  string `json:"backend"`
	Store    string `json:"store"`
	Election string `json:"election"`
	ID       string `json:"id"`
	Session  int64  `json:"session"`
	Token    int64  `json:"token"`
}

// ResumeInfo implements claims.Driver: the store, session and token as
// JSON.
func (d driver) ResumeInfo(q claims.Queue, v *claims.Session, e claims.Entry) ([]byte, error) {
	ss, _ := v.Ref().(*session)
	return json.Marshal(resumeInfo{Backend: FactoryName, Store: d.c.store.id, Election: q.Path, ID: e.Contents, Session: ss.id, Token: e.Token})
}

// Resume implements claims.Driver: in one request, c adopts the session
// (its end: Delete, c's Close, Cut, ExpireSession) and the engines of the
// other Conns with a view of it lose their claim on the entry.
func (d driver) Resume(ctx context.Context, q claims.Queue, id string, info []byte) (claims.Entry, *claims.Session, error) {
	var ri resumeInfo
	if err := json.Unmarshal(info, &ri); err != nil {
		return claims.Entry{}, nil, backendkit.Wrap(topo.InvalidArgument, q.Path, err)
	}
	if ri.Backend != FactoryName || ri.Store != d.c.store.id || ri.Election != q.Path || ri.ID != id {
		return claims.Entry{}, nil, backendkit.Wrap(topo.InvalidArgument, q.Path,
			errors.New("resume info of another backend, store, election or participant id"))
	}
	var out claims.Entry
	var view *claims.Session
	err := d.c.do(func(s *Store) error {
		ss := s.sessions[ri.Session]
		x := s.find(d.key(q), ri.Token)
		if ss == nil || x == nil || x.sess != ss {
			return claims.ErrNotHeld
		}
		d.c.adopt(ss)
		out = entryOf(x)
		for c, v := range ss.views {
			if c != d.c {
				v.LoseEntry(out.Key, out.Token)
			}
		}
		view = d.c.view(ss)
		s.notify()
		return nil
	})
	return out, view, err
}

// MapError implements claims.Driver (Conn.mapErr).
func (d driver) MapError(ctx context.Context, err error, path string) error {
	return d.c.mapErr(ctx, err, path)
}

// hasFilesBelow reports whether a file is strictly below the store path
// dir.
func (s *Store) hasFilesBelow(dir string) bool {
	for p := range s.files {
		if strings.HasPrefix(p, backendkit.JoinPath(dir, "")) {
			return true
		}
	}
	return false
}
