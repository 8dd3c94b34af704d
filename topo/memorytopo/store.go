package memorytopo

import (
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
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

	// queues holds every queue with entries, by full directory (entry.go);
	// unplaced counts the entries not in the tree yet (read by Get
	// without locking); placeAtOnce is set once a root that may lie in a
	// queue is in use.
	queues      map[string]*queue
	unplaced    atomic.Int64
	placeAtOnce bool
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
		roots:        map[string]*rootIndex{},
		queues:       map[string]*queue{},
	}
}

// rootIndex is the lock-free read index of one root.
type rootIndex struct {
	root  string   // canonical root, "" for the store's top
	files sync.Map // path relative to root -> *slot
	// queues are the store's queues this root's Conns used (driver.queue),
	// guarded by the store's mu.
	queues map[claims.Queue]*queue
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
	// The new index must hold every entry (and a root inside a queue
	// must see each entry as it comes).
	s.placeAtOnce = s.placeAtOnce || mayBeEntry(r)
	s.placeAll()
	ri := &rootIndex{root: r, queues: map[claims.Queue]*queue{}}
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

// node is one name in the tree. A node may hold a file, be an ephemeral
// lock or election entry, have children, or (for files) several of these.
type node struct {
	name     string
	parent   *node
	children map[string]*node

	file  *fileState // non-nil for a regular file
	entry *entry     // non-nil for a lock or election entry

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
	for n != nil && n != s.top && n.file == nil && n.entry == nil && len(n.children) == 0 {
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
