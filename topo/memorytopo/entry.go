package memorytopo

import (
	"strings"

	"github.com/topokit/topokit/topo"
)

// The store's queue entries. A lock of directory D is the queue of
// ephemeral entries under D/locks/, an election N the queue under
// elections/N/ (the layout of etcd2topo and zk2topo). Each entry is a node
// named by its revision (seqName), holding the lock's contents or the
// candidate's id, attached to a lease (session.go). The claims engine
// decides who holds; the store only keeps the entries in order (by
// revision) and removes them: by their own claim (driver.Delete), or with
// their lease (revokeLease), never otherwise -- Delete, Update and Txn
// refuse entries.

const (
	// locksDir is the directory, under a locked directory, that holds the
	// lock entries.
	locksDir = "locks"
	// electionsDir is the root directory of leader elections.
	electionsDir = "elections"
)

// entry is a lock or election entry: an ephemeral node attached to a
// lease. All fields are guarded by the store's mu.
type entry struct {
	// seq is the store revision at the entry's creation: its name, its
	// version and the claim's fencing token.
	seq int64
	// value is a lock's contents or a candidate's id.
	value string
	// key is the entry's full store path.
	key string
	// election marks a candidate's entry; published is its published
	// value (Campaign, Proclaim; nil for none), never a file, and
	// valueRev counts its changes.
	election  bool
	published []byte
	valueRev  int64
	lease     *lease
	n         *node
	removed   bool
	// noticed is set when the entry's holder gave it up ahead of a lapse
	// (partitionNotice): it is removed if renewal resumes in time.
	noticed bool
	// gone is closed when the entry is removed (driver.WaitGone).
	gone chan struct{}
	// lprev and lnext link the entry into its lease's list, sprev and
	// snext into its directory's queue (node.entries).
	lprev, lnext *entry
	sprev, snext *entry
}

// entryState is the file an entry reads as: its value, version seq.
func entryState(e *entry) *fileState {
	return &fileState{contents: []byte(e.value), version: e.seq, ver: topo.NumericVersion(e.seq), ephemeral: true}
}

// addEntry creates a new entry under the full directory dir, holding
// value and attached to l, and publishes it. Its revision is greater than
// that of every entry before it. Call with mu held for writing.
func (s *store) addEntry(dir string, value string, l *lease) *entry {
	seq := s.nextRev()
	p := seqName(seq)
	if dir != "" {
		p = dir + "/" + p
	}
	n := s.ensure(p)
	e := &entry{seq: seq, value: value, key: p, lease: l, n: n, gone: make(chan struct{})}
	n.entry = e
	d := n.parent
	if t := d.entriesTail; t != nil {
		e.sprev, t.snext = t, e
	} else {
		d.entries = e
	}
	d.entriesTail = e
	l.link(e)
	s.publish(p, n, entryState(e))
	s.dirChanged(dir)
	return e
}

// seqName names an entry so that names sort in revision order.
func seqName(seq int64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[seq&0xf]
		seq >>= 4
	}
	return string(b[:])
}

// removeEntry deletes e from the store: its node goes, its gone channel
// closes, its directory's observers wake. A lease made for this one lock
// (LockWithTTL, LockName) ends with it. Call with mu held for writing.
func (s *store) removeEntry(e *entry) {
	if e.removed {
		return
	}
	e.removed = true
	e.lease.unlink(e)
	d := e.n.parent
	if e.sprev != nil {
		e.sprev.snext = e.snext
	} else {
		d.entries = e.snext
	}
	if e.snext != nil {
		e.snext.sprev = e.sprev
	} else {
		d.entriesTail = e.sprev
	}
	e.sprev, e.snext = nil, nil
	e.n.entry = nil
	s.publish(e.key, e.n, nil)
	s.prune(e.n)
	close(e.gone)
	s.dirChanged(e.key[:max(strings.LastIndexByte(e.key, '/'), 0)])
	if l := e.lease; l.nentries == 0 && l != l.c.session && !l.revoked {
		s.revokeLease(l)
	}
}

// entryAt returns the entry at the full path key with revision seq while
// it is in the store, or nil. Call with mu held.
func (s *store) entryAt(key string, seq int64) *entry {
	n := s.lookup(key)
	if n == nil || n.entry == nil || n.entry.seq != seq {
		return nil
	}
	return n.entry
}

// first returns the oldest entry under the full directory dir, or nil.
// Call with mu held.
func (s *store) first(dir string) *entry {
	n := s.lookup(dir)
	if n == nil {
		return nil
	}
	return n.entries
}

// dirChanged wakes the observers of the full directory dir.
func (s *store) dirChanged(dir string) {
	if ch, ok := s.dirChans[dir]; ok {
		close(ch)
		delete(s.dirChans, dir)
	}
}

// dirChan returns a channel closed at the next change of an entry under
// the full directory dir (added, removed, value published). Call with mu
// held for writing.
func (s *store) dirChan(dir string) <-chan struct{} {
	ch, ok := s.dirChans[dir]
	if !ok {
		ch = make(chan struct{})
		s.dirChans[dir] = ch
	}
	return ch
}

// filesBelow reports whether a regular file lies strictly below the node d
// (nil: none). A file that has files below it is also a directory that
// holds files. Call with mu held.
func filesBelow(d *node) bool {
	if d == nil {
		return false
	}
	n := d.files
	if d.file != nil {
		n-- // d itself
	}
	return n > 0
}
