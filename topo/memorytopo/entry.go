package memorytopo

import (
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/topokit/topokit/topo/claims"
)

// The store's queue entries. A lock of directory D is the queue of
// ephemeral entries under D/locks/, an election N the queue under
// elections/N/ (the layout of etcd2topo and zk2topo). Each entry is named
// by its revision (seqName), holds the lock's contents or the candidate's
// id, and is attached to a lease (session.go). The claims engine decides
// who holds; the store keeps the entries in order and removes them only by
// their own claim (driver.Delete) or with their lease (revokeLease).
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
	// locksDir is the directory, under a locked directory, that holds the
	// lock entries.
	locksDir = "locks"
	// electionsDir is the root directory of leader elections.
	electionsDir = "elections"
)

// queue is the entries of one lock or election, oldest first.
type queue struct {
	dir        string // the full store path of the queue's directory
	head, tail *entry
	// changed is closed, and cleared, at the next change of the queue's
	// entries or of a published value (driver.Head with watch).
	changed chan struct{}
	// lockDir is the node of a lock's directory as the last Lock found
	// it (nil: not looked up, or there was none), so that the next one
	// checks the files below it without walking the tree while the node
	// is in it (not pruned).
	lockDir *node
}

// entry is a lock or election entry: an ephemeral value attached to a
// lease. Its fields are guarded by the store's mu.
type entry struct {
	// seq is the store revision at the entry's creation: its name, its
	// version and the claim's fencing token.
	seq int64
	// value is a lock's contents or a candidate's id.
	value string
	q     *queue
	// pub is a candidate's published value (Campaign, Proclaim; nil
	// for none), never a file: a pointer, so that a lock's entry, which
	// never has one, is a smaller allocation.
	pub   *publication
	lease *lease
	// n is the entry's node once placed, nil before.
	n *node
	// election marks a candidate's entry. noticed is set when the entry's
	// holder gave it up ahead of a lapse (partitionNotice): it is removed
	// if renewal resumes in time.
	election, removed, noticed bool
	// room is the room for a lock's descriptor allocated with the entry
	// (lockEntry), until driver.CreateLock hands it to the engine; nil
	// for a candidate's entry, and for a lock's created through Create.
	room *claims.LockRoom
	// gone holds the entry's gone channel (a chan struct{}), closed when
	// the entry is removed; made by the first wait on it (goneOf). It is set
	// with mu held for reading (a compare-and-swap: waiters of one entry
	// may make it at once) and read and closed with mu held for writing
	// (removeEntry), so a waiter that got it before the removal is woken
	// by it.
	gone atomic.Value
	// wake is a lock waiter's turn channel (claims.TurnSignaler), made by
	// CreateLock for an entry that does not head its queue, closed and
	// cleared when the entry comes to head it or leaves it, whichever
	// comes first (wakeTurn); turn says which (turnGranted, turnGone), set
	// before the close, so that the woken waiter reads it without mu.
	// wake is guarded by mu.
	wake chan struct{}
	turn atomic.Int32
	// lprev and lnext link the entry into its lease's list, sprev and
	// snext into its queue.
	lprev, lnext *entry
	sprev, snext *entry
}

// publication is a candidate's published value and the number of its
// changes (Entry.Value, Entry.ValueRev). It is never changed: SetValue
// replaces it.
type publication struct {
	value []byte
	rev   int64
}

// key is the entry's full store path.
func (e *entry) key() string { return e.q.dir + "/" + seqName(e.seq) }

// lockEntry is a lock's entry together with the room for its descriptor
// (claims.Roomer), taken from a slab of them (store.slab): a lock
// allocates nothing of its own, one in lockSlab locks allocates a slab.
type lockEntry struct {
	entry
	room claims.LockRoom
}

// lockSlab is how many lock entries one allocation holds (store.slab):
// 23 of 352 bytes fill an 8 KiB size class (16 would take 6 KiB for
// 5.3). Each is used once: a slab is freed once none of its entries and
// descriptors is referred to any more (a lock held for long keeps its
// slab's lockSlab-1 others in memory).
const lockSlab = 23

// addEntry appends a new entry, holding value and attached to l, to q: a
// candidate's when election is set, else a lock's, with its descriptor's
// room. Its revision is greater than that of every entry before it. Call
// with mu held for writing.
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

// place puts e into the tree. Call with mu held for writing.
func (s *store) place(e *entry) {
	p := e.key()
	n := s.ensure(p)
	n.entry, e.n = e, n
	s.publish("", p, n, true)
	s.unplaced--
}

// placeAll places every entry not placed yet. Call with mu held for
// writing.
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

// placeFor places every entry when p (a canonical or full path) may name
// one. Call with mu held for writing.
func (s *store) placeFor(p string) {
	if s.unplaced > 0 && mayBeEntry(p) {
		s.placeAll()
	}
}

// rlockPlaced takes mu for reading to read p, or for writing when
// entries not placed yet may lie there (at any path with all) and places
// them; it reports whether it took mu for writing (see unlock).
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

// mayBeEntry reports whether the path p may lie in a queue: whether it
// contains "locks" or "elections" (a superset of the paths with such a
// segment, which are the only ones, under any root, where entries live).
func mayBeEntry(p string) bool {
	return strings.Contains(p, locksDir) || strings.Contains(p, electionsDir)
}

// seqName names an entry so that names sort in revision order: 16 hex
// digits.
func seqName(seq int64) string { return fmt.Sprintf("%016x", seq) }

// removeEntry deletes e from the store: it leaves its queue (and the tree
// when placed), its gone channel closes, its directory's observers wake.
// A lease made for this one lock (LockWithTTL, LockName) ends with it.
// Call with mu held for writing.
func (s *store) removeEntry(e *entry) {
	if e.removed {
		return
	}
	e.removed = true
	e.lease.unlink(e)
	q := e.q
	if e.wake != nil { // its waiter parks on it: the wait ends, not granted
		s.wakeTurn(e, turnGone)
	}
	if next := e.snext; e.sprev == nil && next != nil && next.wake != nil {
		// The head goes: the entry behind it holds now, handed over
		// directly to its waiter.
		s.wakeTurn(next, turnGranted)
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
	if gone, _ := e.gone.Load().(chan struct{}); gone != nil { // a waiter waits on it (goneOf)
		close(gone)
		if s.counting.Load() {
			s.wakeups.Add(1)
		}
	}
	q.changedNow()
	if l := e.lease; l.nentries == 0 && l != l.c.session && !l.revoked {
		s.revokeLease(l)
	}
}

// The turns of a lock waiter's entry (entry.turn).
const (
	turnWaiting int32 = iota
	turnGranted
	turnGone
)

// wakeTurn ends the wait of e's waiter: e's turn becomes turn, then its
// wake channel closes, and is cleared. Call with mu held for writing and
// e.wake set.
func (s *store) wakeTurn(e *entry, turn int32) {
	e.turn.Store(turn)
	close(e.wake)
	e.wake = nil
	if s.counting.Load() {
		s.wakeups.Add(1)
	}
}

// first returns the oldest entry of x (nil: none).
func (x *queue) first() *entry {
	if x == nil {
		return nil
	}
	return x.head
}

// changedNow wakes q's observers. Call with mu held for writing.
func (q *queue) changedNow() {
	if q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}

// watch returns a channel closed at q's next change (see changed). Call
// with mu held for writing.
func (q *queue) watch() <-chan struct{} {
	if q.changed == nil {
		q.changed = make(chan struct{})
	}
	return q.changed
}

// filesBelow reports whether a regular file lies strictly below the node d
// (nil: none). A file that has files below it is also a directory that
// holds files. Call with mu held.
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
