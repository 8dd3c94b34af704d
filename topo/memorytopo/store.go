package memorytopo

import (
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/topokit/topokit/topo"
)

// store is one in-memory coordination store: everything a Factory holds
// for one serverAddress.
//
// Locking. mu guards the tree's shape (which nodes exist, their children,
// files counts and entries), the leases, the watcher registrations and the
// root indexes: every change of those, and every transaction and List,
// holds it for writing. The value and history of one existing file may
// also change with mu held for reading plus that node's own mutex
// (updateInPlace, the compare-and-set hot path, which holds mu for reading
// through shapeLock's striped fast path), so that writers of different
// files neither serialise nor share a reader count; whoever reads a file's value or
// history therefore holds mu for writing, or mu for reading and the
// node's mu. Get reads files lock-free through a per-root index, which
// holds a slot per path whose immutable *fileState is replaced (never
// mutated) on writes; txnSeq (odd while a transaction publishes several
// writes) lets Get see a transaction's writes all or none.
type store struct {
	f  *Factory
	id uint64 // random, names the store in ResumeInfo

	// mu and rev change on every write and txnSeq is read on every Get:
	// each has a cache line of its own, away from the read-mostly fields
	// (concurrent writers and readers would otherwise invalidate those).
	_   [64]byte
	mu  shapeLock    // see shapeLock; pads itself
	rev atomic.Int64 // last version handed out, store-wide
	_   [64 - 8]byte

	// txnSeq is odd while a transaction publishes more than one write
	// (under mu held for writing); Get retries under mu.RLock when it
	// saw it odd or changed.
	txnSeq atomic.Uint64
	_      [64 - 8]byte

	top *node // the store's root node (no name)

	// roots holds one index per Conn root in use (created with the first
	// Conn of that root, kept for the store's lifetime), each mapping the
	// paths of every value-holding node (files and lock or election
	// entries) below that root, relative to it, to its *fileState. Get
	// reads it without locking and without building the full path.
	roots map[string]*rootIndex
	// rootList holds the same indexes, in creation order, for publish.
	rootList []*rootIndex

	leases       map[*lease]struct{}
	fileWatchers map[string]map[*watcher]struct{} // full path -> watchers
	recWatchers  map[*watcher]struct{}
	dirChans     map[string]chan struct{} // full dir -> closed when an entry below changes

	// closedCh is closed from the start: the Done channel of an entry
	// removed before anyone asked for its Done (see done).
	closedCh chan struct{}

	// Unplaced lock entries (see placeLater): pending heads their list
	// (entry.pprev, pnext), npending counts them. noUnplaced is set once a
	// Conn root with a "locks" segment is in use: then every lock entry is
	// placed at once, so that such a Conn's calls (which the reserved-name
	// checks do not see as reserved) meet the entries. Guarded by mu.
	pending    *entry
	npending   int
	noUnplaced bool

	// lockWaiters counts the lock entries whose Lock call waits for its
	// turn (entry.wake set). Guarded by mu.
	lockWaiters int
}

func newStore(f *Factory) *store {
	return &store{
		f:            f,
		id:           rand.Uint64(),
		mu:           shapeLock{seed: maphash.MakeSeed()},
		top:          &node{},
		leases:       map[*lease]struct{}{},
		fileWatchers: map[string]map[*watcher]struct{}{},
		recWatchers:  map[*watcher]struct{}{},
		dirChans:     map[string]chan struct{}{},
		roots:        map[string]*rootIndex{},
		closedCh:     closedChan(),
	}
}

func closedChan() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

// rootIndex is the lock-free read index of one root.
type rootIndex struct {
	root  string   // canonical root, "" for the store's top
	files sync.Map // path relative to root -> *slot
}

// slot holds the current snapshot of one path in one root index. A
// rewrite of a published path stores a new snapshot into its slots (no map
// write); nil means the path was unpublished since the slot was loaded.
type slot struct {
	fs atomic.Pointer[fileState]
	n  *node // the node holding the value while the slot is in its index
}

// newSlot returns the slot for the next index that is to hold n's
// published value, which the caller appends to n.slots: the node's own
// slot0 for the first, so that a value in one index costs no slot of its
// own. Call with mu held for writing.
//
// slot0 is taken again each time n is published anew, always by the same
// index (the first of the store's rootList that covers n's path: indexes
// are never removed, and a new one goes last) and so for the same path; a
// Get that loaded slot0 before n was unpublished and reads it after n was
// published again sees the path's current value.
func (n *node) newSlot() *slot {
	if n.slots == nil {
		n.slots = n.slotBuf[:0]
	}
	if len(n.slots) == 0 {
		n.slot0.n = n
		return &n.slot0
	}
	return &slot{n: n}
}

// load returns the snapshot the index holds for rel, or nil.
func (ri *rootIndex) load(rel string) *fileState {
	v, ok := ri.files.Load(rel)
	if !ok {
		return nil
	}
	return v.(*slot).fs.Load()
}

// index returns the read index of the canonical root r, creating and
// filling it on first use. Call with mu held for writing.
func (s *store) index(r string) *rootIndex {
	if ri, ok := s.roots[r]; ok {
		return ri
	}
	// The new index must hold every entry: place the unplaced ones first.
	if hasSegment(r, locksDir) {
		s.noUnplaced = true
	}
	s.placeAll()
	ri := &rootIndex{root: r}
	n := s.lookup(r)
	if n != nil {
		var fill func(n *node, rel string)
		fill = func(n *node, rel string) {
			var fs *fileState
			switch {
			case len(n.slots) > 0:
				fs = n.slots[0].fs.Load()
			case n.entry != nil:
				fs = entryState(n.entry)
			default:
				fs = n.file
			}
			if fs != nil {
				sl := n.newSlot()
				sl.fs.Store(fs)
				ri.files.Store(rel, sl)
				n.slots = append(n.slots, sl)
			}
			for name, ch := range n.children {
				fill(ch, joinFull(rel, name))
			}
		}
		for name, ch := range n.children {
			fill(ch, name)
		}
	}
	s.roots[r] = ri
	s.rootList = append(s.rootList, ri)
	return ri
}

// publish makes fs (nil: nothing) the value read at full path p, held by
// node n, in every root index that covers p. A path already published
// only has its slots updated. Call with mu held for writing.
func (s *store) publish(p string, n *node, fs *fileState) { s.publishIn("", p, n, fs) }

// publishIn is publish for the full path root/rel (see joinRoot), which
// it builds only for an index of another root than root.
func (s *store) publishIn(root, rel string, n *node, fs *fileState) {
	if fs != nil && n.slots != nil {
		for _, sl := range n.slots {
			sl.fs.Store(fs)
		}
		return
	}
	for _, sl := range n.slots {
		sl.fs.Store(nil)
	}
	n.slots = nil
	full, built := "", false
	for _, ri := range s.rootList {
		var r string
		if ri.root == root {
			r = rel
		} else {
			if !built {
				full, built = joinRoot(root, rel), true
			}
			r = full
			if ri.root != "" {
				if len(full) <= len(ri.root) || full[len(ri.root)] != '/' || full[:len(ri.root)] != ri.root {
					continue
				}
				r = full[len(ri.root)+1:]
			}
		}
		if fs == nil {
			ri.files.Delete(r)
			continue
		}
		sl := n.newSlot()
		sl.fs.Store(fs)
		ri.files.Store(r, sl)
		n.slots = append(n.slots, sl)
	}
	if fs != nil && n.slots == nil {
		n.slots = n.slotBuf[:0] // published, in no index yet
	}
}

// joinRoot returns the full path of the canonical path rel under the
// canonical root (either may be ""), as Conn.full does.
func joinRoot(root, rel string) string {
	switch {
	case root == "":
		return rel
	case rel == "":
		return root
	}
	return root + "/" + rel
}

func entryState(e *entry) *fileState {
	return &fileState{contents: []byte(e.value), version: e.seq, ver: topo.NumericVersion(e.seq), ephemeral: true}
}

// node is one name in the tree. A node may hold a file, be an ephemeral
// lock or election entry, have children, or (for files) several of these.
type node struct {
	name     string
	parent   *node
	children map[string]*node

	file  *fileState // non-nil for a regular file
	entry *entry     // non-nil for a lock or election entry
	// unplaced and unplacedTail are the first and last of this
	// directory's lock entries not placed in the tree yet (see
	// placeLater), oldest first, linked through entry.qprev and qnext;
	// nil when none.
	unplaced, unplacedTail *entry
	// entries and entriesTail are the first and last of the placed
	// entries that are children of this directory, oldest (lowest seq)
	// first, linked through entry.sprev and snext: a candidate finds the
	// entry ahead of it, and a lock its successor, without scanning the
	// directory.
	entries, entriesTail *entry

	// slots are the index slots of the node's published value, one per
	// root index covering the path; nil while nothing is published (a
	// non-nil empty slice: published, but no index covers the path).
	slots []*slot
	// slotBuf holds the first slot, so that a path in one index needs no
	// slice of its own; slot0 is that slot (see newSlot).
	slotBuf [1]*slot
	slot0   slot

	// mu guards file and the history when they change with the store's
	// mu held only for reading (see store).
	mu sync.Mutex

	// hist is the file's history, nil until a write replaces a version
	// (few nodes are rewritten files: entries and directories never are)
	// and again once the file is deleted.
	hist *history

	// files counts the regular files in this subtree, this node included.
	files int32
	// pruned is set when prune takes the node out of the tree (it never
	// goes back: ensure makes a new node), so that a cached pointer to it
	// (Conn.rootNode) can tell it is stale.
	pruned bool
}

// history holds a file's earlier versions (at most Options.History-1),
// in a ring once full: next is the oldest entry's index then. floor is
// the highest version discarded from it (0 when nothing was discarded).
type history struct {
	entries []histEntry
	next    int
	floor   int64
}

// floor returns the highest version discarded from n's history (0 when
// none). Call with mu held for writing, or for reading with n.mu held.
func (n *node) floor() int64 {
	if n.hist == nil {
		return 0
	}
	return n.hist.floor
}

// fileState is an immutable snapshot of one file (or entry) value.
type fileState struct {
	contents  []byte
	version   int64
	ver       topo.Version // topo.NumericVersion(version), boxed once
	ephemeral bool
}

type histEntry struct {
	version  int64
	contents []byte
}

// candidacy is the part of an election entry a lock entry does not have.
type candidacy struct {
	// published is the candidate's published value (Campaign, Proclaim):
	// nil when none. It is not a file and never listed.
	published []byte
	onRemove  func() // called on removal, under mu, before done closes
	// onLapse is called, under mu, when the Conn of a partitioned lease
	// notices the lapse ahead of the store (partitionNotice).
	onLapse func()
}

// publishedValue returns e's published leader value (nil for none, and
// for a lock entry).
func (e *entry) publishedValue() []byte {
	if e.el == nil {
		return nil
	}
	return e.el.published
}

// entry is a lock or election entry: an ephemeral node attached to a lease.
type entry struct {
	seq   int64
	value string
	// el holds what only an election candidate's entry has (nil for a
	// lock entry).
	el      *candidacy
	lease   *lease
	n       *node
	removed bool
	// lost is set when the store dropped the entry (lease end, Delete)
	// rather than its owner releasing it.
	lost bool
	// done points to the channel of Done, made on first use (see
	// store.done) and closed on removal; to the store's closedCh once
	// removed if nobody asked before.
	done atomic.Pointer[chan struct{}]
	// wake is set while the Lock call of a lock entry waits for its turn
	// (see store.waitTurn), and closed and cleared when the entry becomes
	// the lock's holder (then granted is set first) or is removed.
	wake    chan struct{}
	granted bool

	// dir is the locked directory's node of an unplaced lock entry (n
	// is unset then; see placeLater), nil once placed.
	dir          *node
	pprev, pnext *entry // the store's list of unplaced entries
	qprev, qnext *entry // the directory's queue of unplaced entries
	lprev, lnext *entry // the lease's list of entries
	// sprev and snext link the placed entry into its directory's list
	// (node.entries); sdir is that directory, nil when not in one.
	sprev, snext *entry
	sdir         *node
}

// linkPlaced adds the placed entry e to its directory's list, in seq
// order: new entries are the newest (appended), and placeAll places a
// directory's entries newest first (prepended). Call with mu held for
// writing.
func linkPlaced(e *entry) {
	d := e.n.parent
	e.sdir = d
	switch {
	case d.entriesTail == nil:
		d.entries, d.entriesTail = e, e
	case d.entriesTail.seq < e.seq:
		e.sprev, d.entriesTail.snext, d.entriesTail = d.entriesTail, e, e
	case d.entries.seq > e.seq:
		e.snext, d.entries.sprev, d.entries = d.entries, e, e
	default:
		o := d.entriesTail
		for o.sprev != nil && o.sprev.seq > e.seq {
			o = o.sprev
		}
		// o is the oldest entry younger than e: e goes just before it.
		e.sprev, e.snext = o.sprev, o
		o.sprev.snext = e
		o.sprev = e
	}
}

// unlinkPlaced takes e off its directory's list, if on one. Call with mu
// held for writing.
func unlinkPlaced(e *entry) {
	d := e.sdir
	if d == nil {
		return
	}
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
	e.sprev, e.snext, e.sdir = nil, nil, nil
}

// link adds e to l's entries. Call with the store's mu held for writing.
func (l *lease) link(e *entry) {
	e.lnext = l.entries
	if l.entries != nil {
		l.entries.lprev = e
	}
	l.entries = e
	l.nentries++
}

// unlink takes e off l's entries. Call with the store's mu held for
// writing, once per linked entry.
func (l *lease) unlink(e *entry) {
	if e.lprev != nil {
		e.lprev.lnext = e.lnext
	} else {
		l.entries = e.lnext
	}
	if e.lnext != nil {
		e.lnext.lprev = e.lprev
	}
	e.lprev, e.lnext = nil, nil
	l.nentries--
}

// lease is the simulated session (or per-lock lease) that keeps entries
// alive. It is renewed continuously while its Conn is open and renewal is
// neither paused on the Conn nor blocked by a fault; once renewal stops, it
// lapses ttl later.
type lease struct {
	c   *Conn
	ttl time.Duration
	// entries lists the lease's live entries (entry.lprev, lnext);
	// nentries counts them.
	entries  *entry
	nentries int
	revoked  bool
	blocked  bool
	gen      uint64
	timer    *time.Timer
	// notice is the client-side lapse of a partitioned Conn's lease
	// (partitionNotice): it fires before timer.
	notice *time.Timer
}

// partitionNotice is how long before the store lapses a partitioned
// Conn's lease the Conn itself notices that renewal failed and ends the
// leadership contexts of the elections it leads on that lease, as a real
// client steps down a safety margin before the store can expire its
// session: a quarter of the lease's TTL.
func partitionNotice(ttl time.Duration) time.Duration { return ttl - ttl/4 }

// joinFull joins path segments, skipping empty ones.
func joinFull(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('/')
		}
		b.WriteString(p)
	}
	return b.String()
}

// lookup returns the node at full path p, or nil. Call with mu held.
func (s *store) lookup(p string) *node { return lookupBelow(s.top, p) }

// ensure returns the node at full path p, creating it and its parents.
// Call with mu held for writing.
func (s *store) ensure(p string) *node { return ensureBelow(s.top, p) }

// ensureBelow is ensure for the path p relative to the node n.
// Call with mu held for writing.
func ensureBelow(n *node, p string) *node {
	for p != "" {
		seg, rest, _ := strings.Cut(p, "/")
		p = rest
		c := n.children[seg]
		if c == nil {
			if n.children == nil {
				n.children = map[string]*node{}
			}
			c = &node{name: seg, parent: n}
			n.children[seg] = c
		}
		n = c
	}
	return n
}

// connRoot returns the node of c's root, creating it when create is set
// (else nil when it does not exist), and keeps it in c.rootNode for the
// next call until prune takes it out of the tree. Call with mu held for
// writing.
func (s *store) connRoot(c *Conn, create bool) *node {
	if n := c.rootNode; n != nil && !n.pruned {
		return n
	}
	var n *node
	if create {
		n = ensureBelow(s.top, c.root)
	} else if n = lookupBelow(s.top, c.root); n == nil {
		return nil
	}
	c.rootNode = n
	return n
}

// prune removes n and its ancestors while they hold nothing.
func (s *store) prune(n *node) {
	for n != nil && n != s.top && n.file == nil && n.entry == nil && n.unplaced == nil && len(n.children) == 0 {
		delete(n.parent.children, n.name)
		n.pruned = true
		n = n.parent
	}
}

func (n *node) addFiles(d int32) {
	for ; n != nil; n = n.parent {
		n.files += d
	}
}

// nextRev returns a new store-wide version, greater than every one handed
// out before. Call with mu held (for reading, only from updateInPlace).
func (s *store) nextRev() int64 {
	return s.rev.Add(1)
}

// valueNode returns the node holding a published value (file or entry) at
// rel in ri, or nil. Under mu the index matches the tree, so this finds
// the node without walking the path. Call with mu held.
func (ri *rootIndex) valueNode(rel string) *node {
	v, ok := ri.files.Load(rel)
	if !ok {
		return nil
	}
	return v.(*slot).n
}

// newValue returns the snapshot of a new value of a file, holding a copy
// of contents, to be given its version by setFile. A small value shares
// one allocation with its snapshot. It takes no lock: writers prepare it
// before they lock the store.
func newValue(contents []byte) *fileState {
	switch {
	case contents == nil:
		return &fileState{}
	case len(contents) <= 16:
		v := &smallValue16{}
		v.contents = v.buf[:copy(v.buf[:], contents):len(contents)]
		return &v.fileState
	case len(contents) <= 64:
		v := &smallValue64{}
		v.contents = v.buf[:copy(v.buf[:], contents):len(contents)]
		return &v.fileState
	}
	return &fileState{contents: clone(contents)}
}

// smallValue16 and smallValue64 are a snapshot and its value in one
// allocation (newValue).
type (
	smallValue16 struct {
		fileState
		buf [16]byte
	}
	smallValue64 struct {
		fileState
		buf [64]byte
	}
)

// setFileRel is setFile for the canonical path rel of c, building the full
// path only when it is needed: for a file not published yet, or when
// watchers are registered. Call with mu held for writing, or from
// updateInPlace.
func (s *store) setFileRel(c *Conn, rel string, n *node, fs *fileState) *fileState {
	return s.setFileIn(c.root, rel, n, fs)
}

// setFile makes fs (from newValue, not published yet) the new value of the
// file at full path p, with a new store revision as its version, and
// returns it; p may be "" when the file is published already and no
// watcher is registered. Call with mu held for writing, or for reading
// with n.mu held (updateInPlace: the file exists and is published).
func (s *store) setFile(p string, n *node, fs *fileState) *fileState {
	return s.setFileIn("", p, n, fs)
}

// setFileIn is setFile for the full path root/rel (see joinRoot), which
// it builds only when an index of another root or a watcher needs it.
func (s *store) setFileIn(root, rel string, n *node, fs *fileState) *fileState {
	v := s.nextRev()
	fs.version, fs.ver = v, topo.NumericVersion(v)
	if old := n.file; old != nil {
		s.keep(n, old)
	} else {
		n.addFiles(1)
	}
	n.file = fs
	s.publishIn(root, rel, n, fs)
	if s.watched() {
		s.notifyFile(joinRoot(root, rel), fs)
	}
	return fs
}

// watched reports whether any Watch or WatchRecursive is registered.
// Call with mu held (for reading, only from updateInPlace).
func (s *store) watched() bool { return len(s.fileWatchers) > 0 || len(s.recWatchers) > 0 }

// keep adds the replaced snapshot old to n's history, overwriting the
// oldest version (and raising the floor) beyond Options.History-1 kept
// versions. Once full, the history is a ring: a write moves nothing.
// Call with mu held for writing, or for reading with n.mu held.
func (s *store) keep(n *node, old *fileState) {
	hs := n.hist
	if hs == nil {
		hs = &history{}
		n.hist = hs
	}
	limit := s.f.opts.History - 1
	if limit <= 0 {
		hs.floor = max(hs.floor, old.version)
		return
	}
	h := histEntry{old.version, old.contents}
	if len(hs.entries) < limit {
		hs.entries = append(hs.entries, h)
		return
	}
	hs.floor = max(hs.floor, hs.entries[hs.next].version)
	hs.entries[hs.next] = h
	hs.next = (hs.next + 1) % limit
}

// historic returns the contents n's history holds for version, if any.
// Call with mu held for writing, or for reading with n.mu held.
func (n *node) historic(version int64) ([]byte, bool) {
	if n.hist == nil {
		return nil, false
	}
	for _, h := range n.hist.entries {
		if h.version == version {
			return h.contents, true
		}
	}
	return nil, false
}

// deleteFile removes the file at full path p held by n, with its history.
// Call with mu held for writing.
func (s *store) deleteFile(p string, n *node) { s.deleteFileIn("", p, n) }

// deleteFileIn is deleteFile for the full path root/rel (see joinRoot),
// which it builds only when an index of another root or a watcher needs
// it.
func (s *store) deleteFileIn(root, rel string, n *node) {
	n.file = nil
	n.hist = nil
	n.addFiles(-1)
	s.publishIn(root, rel, n, nil)
	s.prune(n)
	if s.watched() {
		s.notifyFile(joinRoot(root, rel), nil)
	}
}

// newLease returns a lease for c with ttl. Call with mu held for writing.
func (s *store) newLease(c *Conn, ttl time.Duration) *lease {
	l := &lease{c: c, ttl: ttl}
	s.leases[l] = struct{}{}
	c.leases[l] = struct{}{}
	s.refreshLease(l)
	return l
}

// sessionLease returns c's current session, starting a new one if the last
// was lost. Call with mu held for writing.
func (s *store) sessionLease(c *Conn) *lease {
	if c.session == nil || c.session.revoked {
		c.session = s.newLease(c, s.f.opts.SessionTTL)
	}
	return c.session
}

// refreshLease starts or stops l's lapse timer according to whether its
// renewal is currently blocked. Call with mu held for writing.
func (s *store) refreshLease(l *lease) {
	if l.revoked {
		return
	}
	blocked := l.c.keepAlivePaused || l.c.partitioned || s.f.keepAliveBlocked.Load()
	if blocked == l.blocked {
		return
	}
	l.blocked = blocked
	l.gen++
	l.stopTimers()
	if blocked {
		gen := l.gen
		l.timer = time.AfterFunc(l.ttl, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if l.gen == gen && !l.revoked {
				s.revokeLease(l, true)
			}
		})
		if l.c.partitioned {
			l.notice = time.AfterFunc(partitionNotice(l.ttl), func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				if l.gen == gen && !l.revoked {
					for e := l.entries; e != nil; e = e.lnext {
						if e.el != nil && e.el.onLapse != nil {
							e.el.onLapse()
						}
					}
				}
			})
		}
	}
}

// stopTimers stops l's lapse and notice timers. Call with mu held for
// writing.
func (l *lease) stopTimers() {
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if l.notice != nil {
		l.notice.Stop()
		l.notice = nil
	}
}

// revokeLease ends l, removing its entries. lost marks them as dropped by
// the store. Call with mu held for writing.
func (s *store) revokeLease(l *lease, lost bool) {
	if l.revoked {
		return
	}
	l.revoked = true
	l.gen++
	l.stopTimers()
	// removeEntry unlinks e (and, l being revoked, ends nothing else).
	for e := l.entries; e != nil; {
		next := e.lnext
		s.removeEntry(e, lost)
		e = next
	}
	delete(s.leases, l)
	delete(l.c.leases, l)
	if l.c.session == l {
		l.c.session = nil
	}
}

// addEntry creates a new ephemeral entry under the full directory dir,
// holding value and attached to l. Call with mu held for writing.
func (s *store) addEntry(dir string, value string, l *lease) *entry {
	seq := s.nextRev()
	name := seqName(seq)
	p := joinFull(dir, name)
	n := s.ensure(p)
	e := &entry{seq: seq, value: value, lease: l, n: n}
	n.entry = e
	linkPlaced(e)
	l.link(e)
	s.publish(p, n, entryState(e))
	s.dirChanged(dir)
	return e
}

// seqName names an entry so that names sort in sequence order.
func seqName(seq int64) string {
	const digits = "0123456789abcdef"
	var b [16]byte
	for i := 15; i >= 0; i-- {
		b[i] = digits[seq&0xf]
		seq >>= 4
	}
	return string(b[:])
}

// removeEntry deletes e from the tree. Call with mu held for writing.
func (s *store) removeEntry(e *entry, lost bool) {
	if e.removed {
		return
	}
	e.removed = true
	e.lost = lost
	e.lease.unlink(e)
	if e.wake != nil {
		s.wakeLocker(e) // it finds e removed
	}
	// next is the lock entry whose turn may come now: e's successor in its
	// lock's queue. It is granted the lock below, once e's Done is closed,
	// so that a new holder never starts before the old one's Done closes.
	var next *entry
	if d := e.dir; d != nil {
		// Never placed: nothing was published, and nobody waits on its
		// directory (a second locker places it first; dirChans are
		// election directories, never a lock's).
		next = e.qnext
		s.unlinkUnplaced(e)
		s.prune(d)
		s.closeDone(e)
	} else {
		if s.lockWaiters > 0 && e.el == nil {
			next = s.successor(e)
		}
		p := e.n.fullPath()
		unlinkPlaced(e)
		if e.n.entry == e {
			e.n.entry = nil
			s.publish(p, e.n, nil)
			s.prune(e.n)
		}
		if e.el != nil && e.el.onRemove != nil {
			e.el.onRemove()
		}
		s.closeDone(e)
		dir := p[:max(strings.LastIndexByte(p, '/'), 0)]
		s.dirChanged(dir)
	}
	if next != nil && next.wake != nil && s.lockPredecessor(next) == nil {
		next.granted = true
		s.wakeLocker(next)
	}
	// A lease made for this one lock ends with it.
	l := e.lease
	if l.nentries == 0 && l != l.c.session && !l.revoked {
		s.revokeLease(l, lost)
	}
}

// dirChanged wakes the waiters on the full directory dir.
func (s *store) dirChanged(dir string) {
	if ch, ok := s.dirChans[dir]; ok {
		close(ch)
		delete(s.dirChans, dir)
	}
}

// dirChan returns a channel closed at the next entry change under the full
// directory dir. Call with mu held for writing.
func (s *store) dirChan(dir string) <-chan struct{} {
	ch, ok := s.dirChans[dir]
	if !ok {
		ch = make(chan struct{})
		s.dirChans[dir] = ch
	}
	return ch
}

// first returns the oldest entry under the full directory dir, or nil.
func (s *store) first(dir string) *entry {
	n := s.lookup(dir)
	if n == nil {
		return nil
	}
	return n.entries
}

// lockPredecessor is predecessor for a lock entry, placed or not (an
// unplaced entry's directory has no placed entry). Call with mu held.
func (s *store) lockPredecessor(e *entry) *entry {
	if e.dir != nil {
		return e.qprev
	}
	return s.predecessor(e)
}

// successor returns the oldest entry younger than e in e's directory, or
// nil when e is the youngest. Call with mu held, e placed.
func (s *store) successor(e *entry) *entry { return e.snext }

// wakeLocker ends the wait of the Lock call of e (e.wake set). Call with
// mu held for writing.
func (s *store) wakeLocker(e *entry) {
	close(e.wake)
	e.wake = nil
	s.lockWaiters--
}

// predecessor returns the youngest entry older than e in e's directory, or
// nil when e is the oldest. Call with mu held.
func (s *store) predecessor(e *entry) *entry { return e.sprev }

// done returns e's Done channel, closed when e is removed. The channel is
// made on first use (most locks are released without anyone selecting on
// Done): a Done first asked for after the removal is the store's
// closedCh. Safe without mu: a channel is installed only by a
// CompareAndSwap from nil, and closeDone either closes the installed one
// or installs closedCh by the same CompareAndSwap, so each entry has one
// Done channel and it is closed once the entry is removed.
func (s *store) done(e *entry) <-chan struct{} {
	if p := e.done.Load(); p != nil {
		return *p
	}
	ch := make(chan struct{})
	if e.done.CompareAndSwap(nil, &ch) {
		return ch
	}
	return *e.done.Load()
}

// closeDone closes e's Done channel (see done), or makes the store's
// closedCh its Done when none was made: every Done of e is then one
// channel, closed. Call with mu held for writing, once, from removeEntry.
func (s *store) closeDone(e *entry) {
	for {
		if p := e.done.Load(); p != nil {
			close(*p)
			return
		}
		if e.done.CompareAndSwap(nil, &s.closedCh) {
			return
		}
	}
}

// Unplaced lock entries. A Lock, TryLock, LockWithTTL or LockName of a
// directory with no entry in the tree (no locks child) does not build its
// entry's nodes (<dir>/locks/<seq>) nor publish it: the entry joins the
// directory node's queue (node.unplaced ... unplacedTail, oldest first,
// through entry.qprev and qnext) and the store's list (pending), with its
// revision (the fencing token) taken at once from the store counter, as
// for every entry. The queue's first entry holds the lock; each other
// waits for the one before it (lockPredecessor), as a placed entry waits
// for the youngest older entry of its directory. Everything that could
// see an entry places every unplaced entry first (placeAll), under mu
// held for writing, exactly where and as addEntry would have (same name,
// same value, same version): ListDir, a Get or GetVersion that finds
// nothing at a path with a "locks" segment (then it reads again), and a
// new root index. A directory's entries are thus all unplaced or all
// placed (lock queues placed entries while the locks child exists).
// Nothing else reads lock entries: List, watches and transactions leave
// entries out or refuse reserved paths, and the election code only reads
// election directories, which never end in a "locks" segment as lock
// entry directories do. Conn roots with a "locks" segment switch this off
// (store.noUnplaced). The entries keep their directory's node from being
// pruned (prune) so that placing them later finds the same path.
// Removing an unplaced entry (Unlock, session loss, lapse, Close, a
// waiter's end) unlinks it and prunes the directory as removing its
// placed nodes would have.

// lookupBelow returns the node at the path p relative to the node n, or
// nil (also for a nil n), without building the path. Call with mu held.
func lookupBelow(n *node, p string) *node {
	for n != nil && p != "" {
		seg, rest, _ := strings.Cut(p, "/")
		n = n.children[seg]
		p = rest
	}
	return n
}

// placeLater makes e (seq, value and lease set, seq greater than that of
// every entry of d) the newest unplaced lock entry of the directory node
// d. Call with mu held for writing, only when d has no locks child.
func (s *store) placeLater(e *entry, d *node) {
	e.dir = d
	if t := d.unplacedTail; t != nil {
		t.qnext, e.qprev = e, t
	} else {
		d.unplaced = e
	}
	d.unplacedTail = e
	e.pnext = s.pending
	if s.pending != nil {
		s.pending.pprev = e
	}
	s.pending = e
	s.npending++
	e.lease.link(e)
}

// unlinkUnplaced takes the unplaced entry e off its directory and the
// store's list. Call with mu held for writing.
func (s *store) unlinkUnplaced(e *entry) {
	d := e.dir
	if e.qprev != nil {
		e.qprev.qnext = e.qnext
	} else {
		d.unplaced = e.qnext
	}
	if e.qnext != nil {
		e.qnext.qprev = e.qprev
	} else {
		d.unplacedTail = e.qprev
	}
	e.qprev, e.qnext = nil, nil
	e.dir = nil
	if e.pprev != nil {
		e.pprev.pnext = e.pnext
	} else {
		s.pending = e.pnext
	}
	if e.pnext != nil {
		e.pnext.pprev = e.pprev
	}
	e.pprev, e.pnext = nil, nil
	s.npending--
}

// place puts the unplaced entry e into the tree, as addEntry does. Call
// with mu held for writing.
func (s *store) place(e *entry) {
	d := e.dir
	s.unlinkUnplaced(e)
	dir := joinFull(d.fullPath(), locksDir)
	p := joinFull(dir, seqName(e.seq))
	n := s.ensure(p)
	e.n = n
	n.entry = e
	linkPlaced(e)
	s.publish(p, n, entryState(e))
	s.dirChanged(dir)
	// d stays in the tree: it now has a locks child.
}

// placeAll places every unplaced entry. Call with mu held for writing.
func (s *store) placeAll() {
	for s.pending != nil {
		s.place(s.pending)
	}
}

// fullPath returns n's full path in the store.
func (n *node) fullPath() string {
	size := 0
	for m := n; m.parent != nil; m = m.parent {
		size += len(m.name) + 1
	}
	if size == 0 {
		return ""
	}
	b := make([]byte, size-1)
	i := len(b)
	for m := n; m.parent != nil; m = m.parent {
		i -= len(m.name)
		copy(b[i:], m.name)
		if i > 0 {
			i--
			b[i] = '/'
		}
	}
	return string(b)
}

// hasSegment reports whether the slash-separated path p has the segment
// seg.
func hasSegment(p, seg string) bool {
	for part := range strings.SplitSeq(p, "/") {
		if part == seg {
			return true
		}
	}
	return false
}
