package memorytopo

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/topokit/topokit/topo/claims"
)

// The store's queue entries (layout: see the package doc). Each entry is
// named by its revision (seqName), holds the lock's contents or the
// candidate's id, and is on a lease (session.go).
//
// Placement. A queue lives in store.queues by its directory, for the
// store's lifetime. Its entries join the tree (a node at <dir>/<seq>, in
// the root indexes) only when a call could see them there: ListDir, and a
// Get, GetVersion, write or transaction at a path that may lie in a queue
// (mayBeEntry). A store with a Conn rooted at such a path places every
// entry at once. So an uncontended Lock and Unlock read one map entry,
// and every call sees what it would see had each entry been placed at its
// creation (TestLazyPlacementMatchesEager).

const (
	locksDir     = "locks"     // under a locked directory, its entries
	electionsDir = "elections" // under the root, the elections
)

// queue is the entries of one lock or election, oldest first.
type queue struct {
	dir        string // the full store path of the queue's directory
	head, tail *entry
	// changed is closed, and cleared, at the next change of the queue's
	// entries or of a published value (driver.Head with watch).
	changed chan struct{}
	// lockDir is a lock's directory node as the last Lock found it, so
	// that the next one need not walk the tree (driver.lockDir).
	lockDir *node
}

// entry is a lock or election entry: an ephemeral value on a lease.
// Guarded by the store's mu.
type entry struct {
	// seq is the store revision at the entry's creation: its name, its
	// version and the claim's fencing token.
	seq   int64
	value string // a lock's contents or a candidate's id
	q     *queue
	// pub is a candidate's published value (nil: none), a pointer to keep
	// a lock's entry small.
	pub   *publication
	lease *lease
	n     *node // once placed
	// noticed is set when the holder gave the entry up at the partition
	// notice: it is removed if renewal resumes in time.
	election, removed, noticed bool
	// room is a lock entry's descriptor room (lockEntry), until
	// CreateLock hands it to the engine; nil for a candidate's.
	room *claims.LockRoom
	// gone holds the entry's gone channel (a chan struct{}), made by the
	// first wait on it (goneOf) with mu held for reading (compare-and-swap:
	// waiters may race), closed by removeEntry with mu held for writing,
	// so a waiter that got it before the removal is woken.
	gone atomic.Value
	// wake is a lock waiter's turn channel (claims.TurnSignaler), made by
	// CreateLock when the entry is not the head, closed and cleared when
	// it becomes the head or leaves (wakeTurn); turn says which, set
	// before the close so that the waiter reads it without mu.
	wake chan struct{}
	turn atomic.Int32
	// lprev, lnext link the entry into its lease, sprev, snext its queue.
	lprev, lnext *entry
	sprev, snext *entry
}

// publication is a candidate's published value and its change count
// (Entry.Value, Entry.ValueRev); SetValue replaces it whole.
type publication struct {
	value []byte
	rev   int64
}

func (e *entry) key() string { return e.q.dir + "/" + seqName(e.seq) }

// lockEntry is a lock's entry with its descriptor's room (claims.Roomer),
// taken from store.slab: one allocation per lockSlab locks.
type lockEntry struct {
	entry
	room claims.LockRoom
}

// lockSlab is how many lock entries one slab holds: 23 of 352 bytes fill
// an 8 KiB size class. Each is used once; a slab is freed when none of
// its entries is referred to (a lock held long keeps lockSlab-1 others).
const lockSlab = 23

// addEntry appends a new entry holding value, on l, to q: a candidate's
// when election is set, else a lock's with its room.
func (s *store) addEntry(q *queue, value string, l *lease, election bool) *entry {
	var e *entry
	if election {
		e = &entry{election: true}
	} else {
		if len(s.slab) == 0 {
			s.slab = make([]lockEntry, lockSlab)
		}
		le := &s.slab[0]
		s.slab = s.slab[1:]
		e = &le.entry
		e.room = &le.room
	}
	e.seq, e.value, e.q, e.lease = s.rev.Add(1), value, q, l
	if t := q.tail; t != nil {
		e.sprev, t.snext = t, e
	} else {
		q.head = e
	}
	q.tail = e
	l.link(e)
	s.unplaced++
	if s.placeAtOnce {
		s.place(e)
	}
	q.changedNow()
	return e
}

// place puts e into the tree; placeAll every entry not placed yet;
// placeFor every one when p (canonical or full) may name one.
func (s *store) place(e *entry) {
	p := e.key()
	n := ensureBelow(s.top, p)
	n.entry, e.n = e, n
	s.publish("", p, n, true)
	s.unplaced--
}

func (s *store) placeAll() {
	if s.unplaced == 0 {
		return
	}
	for _, q := range s.queues {
		for e := q.head; e != nil; e = e.snext {
			if e.n == nil {
				s.place(e)
			}
		}
	}
}

func (s *store) placeFor(p string) {
	if s.unplaced > 0 && mayBeEntry(p) {
		s.placeAll()
	}
}

// rlockPlaced takes mu for reading to read p, or for writing when
// unplaced entries may lie there (anywhere, with all) and places them;
// it reports whether it took mu for writing.
func (s *store) rlockPlaced(p string, all bool) (write bool) {
	s.rlock()
	if s.unplaced == 0 || !all && !mayBeEntry(p) {
		return false
	}
	s.mu.RUnlock()
	s.lock()
	s.placeAll()
	return true
}

// mayBeEntry reports whether the path p may lie in a queue: it contains
// "locks" or "elections" (a superset of the paths with such a segment).
func mayBeEntry(p string) bool {
	return strings.Contains(p, locksDir) || strings.Contains(p, electionsDir)
}

// seqName names an entry in 16 hex digits, sorting in revision order.
func seqName(seq int64) string { return fmt.Sprintf("%016x", seq) }

// removeEntry deletes e from the store: from its queue and the tree, its
// waiters and observers woken; a lease of its own ends with it.
func (s *store) removeEntry(e *entry) {
	if e.removed {
		return
	}
	e.removed = true
	e.lease.unlink(e)
	q := e.q
	if e.wake != nil {
		s.wakeTurn(e, turnGone)
	}
	if next := e.snext; e.sprev == nil && next != nil && next.wake != nil {
		s.wakeTurn(next, turnGranted) // the head goes: next holds now
	}
	if e.sprev != nil {
		e.sprev.snext = e.snext
	} else {
		q.head = e.snext
	}
	if e.snext != nil {
		e.snext.sprev = e.sprev
	} else {
		q.tail = e.sprev
	}
	e.sprev, e.snext = nil, nil
	if n := e.n; n != nil {
		n.entry = nil
		s.publish("", e.key(), n, false)
		s.prune(n)
	} else {
		s.unplaced--
	}
	if gone, _ := e.gone.Load().(chan struct{}); gone != nil {
		close(gone)
		if s.counting.Load() {
			s.wakeups.Add(1)
		}
	}
	q.changedNow()
	if l := e.lease; l.entries == nil && l != l.c.session && !l.revoked {
		s.revokeLease(l)
	}
}

// The turns of a lock waiter's entry (entry.turn).
const (
	turnWaiting int32 = iota
	turnGranted
	turnGone
)

// wakeTurn sets e's turn, then closes and clears e.wake (non-nil).
func (s *store) wakeTurn(e *entry, turn int32) {
	e.turn.Store(turn)
	close(e.wake)
	e.wake = nil
	if s.counting.Load() {
		s.wakeups.Add(1)
	}
}

func (x *queue) first() *entry {
	if x == nil {
		return nil
	}
	return x.head
}

// changedNow wakes q's observers; watch returns a channel closed at q's
// next change.
func (q *queue) changedNow() {
	if q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}

func (q *queue) watch() <-chan struct{} {
	if q.changed == nil {
		q.changed = make(chan struct{})
	}
	return q.changed
}

// filesBelow reports whether a regular file lies strictly below the node
// d (nil: none). Call with mu held.
func filesBelow(d *node) bool {
	if d == nil {
		return false
	}
	n := d.files
	if d.file.Load() != nil {
		n-- // d itself
	}
	return n > 0
}
