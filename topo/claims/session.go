package claims

import (
	"sync"
	"sync/atomic"
)

// Session is the engine's view of one store session (etcd: a lease;
// ZooKeeper: the client session; Consul: a session; in process: whatever
// the store calls one). A driver makes one with NewSession when its store
// opens a session, returns it from Create, and declares it lost with Lost
// when the store ends it or the driver gives it up. It is safe for
// concurrent use.
type Session struct {
	id  string
	ref any

	mu     sync.Mutex
	lost   bool
	lostCh chan struct{}
	// ended is lost, set once Lost has ended the claims on its list, read
	// without mu (claim.stateOf: how an unshared claim learns of it).
	ended atomic.Bool
	// claims is the first of the live claims registered on s, linked
	// through claim.snext and sprev (a list, not a map: a claim joins and
	// leaves it once per Lock, the uncontended path).
	claims *claim
}

// NewSession returns a live Session. id is the store's name of it (what
// topo.LockHeldError reports as Session); ref is the driver's own handle
// on it (Ref returns it), opaque to the engine.
func NewSession(id string, ref any) *Session {
	return &Session{id: id, ref: ref, lostCh: make(chan struct{})}
}

// ID returns the store's name of the session.
func (s *Session) ID() string { return s.id }

// Ref returns the driver's handle given to NewSession.
func (s *Session) Ref() any { return s.ref }

// Done returns a channel closed once the session was declared lost.
func (s *Session) Done() <-chan struct{} { return s.lostCh }

// IsLost reports whether Lost was called.
func (s *Session) IsLost() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// Lost declares the session lost. Before it returns, every claim on it
// ends: each lock's and term's Done is closed, each leadership context is
// cancelled (with a LockLost cause), and each waiter wakes to return
// LockLost; later Check, Unlock and IfHeld say LockLost. A claim the engine
// registers on the session afterwards is lost at once. It does not call
// the driver and does not block on anything but the session's own mutex,
// so a driver may call it from inside its own critical section (as the
// template does, to end the claims before its store hands them on).
// Idempotent.
func (s *Session) Lost() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost {
		return
	}
	s.lost = true
	close(s.lostCh)
	for cl := s.claims; cl != nil; {
		next := cl.snext
		if cl.eng.defect != DefectLossKeepsClaims {
			cl.endLocked(stateLost)
		}
		s.remove(cl)
		cl = next
	}
	s.ended.Store(true)
}

// LoseEntry ends, as lost, the claim on s whose entry has the given key
// and token, if there is one: the driver calls it when its store gave the
// entry to another Conn (Resume). Other claims on s are untouched. It
// does not find a lock granted at Create by a GoneSignaler without
// Monitor whose Done was never called (see GoneSignaler).
func (s *Session) LoseEntry(key string, token int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for cl := s.claims; cl != nil; {
		next := cl.snext
		if cl.entry.Key == key && cl.entry.Token == token {
			cl.endLocked(stateLost)
			s.remove(cl)
		}
		cl = next
	}
}

// add registers cl, a new live claim, on s (it is shared: see
// sharedBit); a claim added to a lost session is lost at once.
func (s *Session) add(cl *claim) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Shared first: on a lost session, endLocked then ends it (its
	// leadership context cancelled), not taking it for ended already.
	cl.state.Store(uint32(stateLive) | sharedBit)
	if s.lost {
		cl.endLocked(stateLost)
		return
	}
	s.link(cl)
}

// link puts cl on s's claims. Called with s.mu held.
func (s *Session) link(cl *claim) {
	cl.snext, cl.linked = s.claims, true
	if s.claims != nil {
		s.claims.sprev = cl
	}
	s.claims = cl
}

// remove takes cl off s's claims, if it is on them. Called with s.mu
// held.
func (s *Session) remove(cl *claim) {
	if !cl.linked {
		return
	}
	if cl.sprev != nil {
		cl.sprev.snext = cl.snext
	} else {
		s.claims = cl.snext
	}
	if cl.snext != nil {
		cl.snext.sprev = cl.sprev
	}
	cl.sprev, cl.snext, cl.linked = nil, nil, false
}
