package memorytopo

import (
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/topokit/topokit/topo"
)

// store is one in-memory store: what a Factory holds for one serverAddress.
//
// Locking. mu guards the tree's shape (nodes, children, files counts,
// entries), the queues, leases and watcher registrations: their changes,
// transactions and List hold it for writing, reads for reading. Helpers
// need it held for writing unless their comment says "Call with mu held"
// (reading suffices). An existing file's value and history may also
// change under mu for reading plus the node's mu (updateInPlace), so that
// writers of different files do not serialise (hence List, a snapshot,
// holds mu for writing): the value is an atomic pointer to an immutable
// snapshot; readers of the history hold mu for writing, or for reading
// and the node's mu.
type store struct {
	f  *Factory
	id uint64 // random, names the store in ResumeInfo

	mu  sync.RWMutex // taken through lock and rlock, which count requests
	rev atomic.Int64 // last revision handed out, store-wide: a file version, an entry, a delete
	// While counting is set (tests), requests counts the acquisitions of
	// mu, wakeups the waiters woken.
	counting          atomic.Bool
	requests, wakeups atomic.Int64
	top               *node // the store's root node (no name)

	// roots holds one index per Conn root in use, for the store's
	// lifetime. A slice: publish walks it on every new or deleted file,
	// and a store has few roots.
	roots []*rootIndex

	leases       map[*lease]struct{}
	fileWatchers map[string]*fileWatches // full path -> its Watches (watch.go)
	recWatchers  map[*watcher]struct{}

	// queues holds every queue used, by full directory; unplaced counts
	// the entries not in the tree yet; placeAtOnce is set once a root that
	// may lie in a queue is in use (entry.go, Placement).
	queues      map[string]*queue
	unplaced    int
	placeAtOnce bool

	// slab holds lock entries not used yet (addEntry).
	slab []lockEntry
}

func newStore(f *Factory) *store {
	return &store{
		f:            f,
		id:           rand.Uint64(),
		top:          &node{},
		leases:       map[*lease]struct{}{},
		fileWatchers: map[string]*fileWatches{},
		recWatchers:  map[*watcher]struct{}{},
		queues:       map[string]*queue{},
	}
}

// rootIndex is the index of one root: nodes maps the relative path of
// every file and placed entry below it to its node (one map lookup per
// read; publish keeps it), locks and elections the canonical path of
// every queue its Conns used to the queue (driver.queue; two maps with
// string keys are faster than one keyed by claims.Queue).
type rootIndex struct {
	root             string
	nodes            map[string]*node
	locks, elections map[string]*queue
}

// index returns the index of the canonical root r, made on first use.
func (s *store) index(r string) *rootIndex {
	for _, ri := range s.roots {
		if ri.root == r {
			return ri
		}
	}
	idx := map[string]*node{}
	var fill func(n *node, rel string)
	fill = func(n *node, rel string) {
		if n.file.Load() != nil || n.entry != nil {
			idx[rel] = n
		}
		for name, ch := range n.children {
			fill(ch, joinRoot(rel, name))
		}
	}
	if n := s.lookup(r); n != nil {
		fill(n, "")
	}
	delete(idx, "") // not a path of its Conns
	ri := &rootIndex{root: r, nodes: idx, locks: map[string]*queue{}, elections: map[string]*queue{}}
	s.roots = append(s.roots, ri)
	return ri
}

// publish adds n to (present) or removes it from every root index
// covering the full path root/rel (built only for another root's index).
func (s *store) publish(root, rel string, n *node, present bool) {
	full := ""
	for _, ri := range s.roots {
		r, idx, p := ri.root, ri.nodes, rel
		if r != root {
			if full == "" {
				full = joinRoot(root, rel)
			}
			if p = full; r != "" {
				if len(full) <= len(r) || full[len(r)] != '/' || full[:len(r)] != r {
					continue
				}
				p = full[len(r)+1:]
			}
		}
		if present {
			idx[p] = n
		} else {
			delete(idx, p)
		}
	}
}

// joinRoot returns the full path of the canonical path rel under the
// canonical root (either may be "").
func joinRoot(root, rel string) string {
	switch {
	case root == "":
		return rel
	case rel == "":
		return root
	}
	return root + "/" + rel
}

// node is one name in the tree: a file, an entry, a directory, or a file
// that is also a directory.
type node struct {
	name     string
	parent   *node
	children map[string]*node
	file     atomic.Pointer[fileState] // non-nil for a regular file
	entry    *entry                    // non-nil for a lock or election entry

	// mu guards file and hist under the store's mu for reading (see store).
	mu sync.Mutex
	// hist is nil until a write replaces a version, and after a delete.
	hist *history

	files  int32 // regular files in this subtree, this node included
	pruned bool  // out of the tree: a new node stands for its path
}

// history holds a file's earlier versions (at most Options.History-1),
// oldest first, and the highest version discarded (floor).
type history struct {
	entries []*fileState
	floor   int64
}

// fileState is an immutable snapshot of one file (or entry) value.
type fileState struct {
	contents []byte
	version  int64
	ver      topo.Version // topo.NumericVersion(version), boxed once
}

// lookup returns the node at full path p, or nil. Call with mu held.
func (s *store) lookup(p string) *node { return lookupBelow(s.top, p) }

// ensureBelow returns the node at the path p below n, creating it and
// its parents.
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

func (s *store) prune(n *node) {
	for n != nil && n != s.top && n.file.Load() == nil && n.entry == nil && len(n.children) == 0 {
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

// setFile makes the new snapshot fs, versioned with a new store
// revision, the value of the file root/rel held by n, and returns it.
// When the file exists, mu held for reading and n.mu suffice
// (updateInPlace); the same holds for keep, versionAt and notifyFile.
func (s *store) setFile(root, rel string, n *node, fs *fileState) *fileState {
	v := s.rev.Add(1)
	fs.version, fs.ver = v, topo.NumericVersion(v)
	if old := n.file.Load(); old != nil {
		s.keep(n, old)
	} else {
		n.addFiles(1)
		s.publish(root, rel, n, true)
	}
	n.file.Store(fs)
	if s.watched() {
		s.notifyFile(joinRoot(root, rel), fs, v)
	}
	return fs
}

// watched reports whether any watch is registered. Call with mu held.
func (s *store) watched() bool { return len(s.fileWatchers) > 0 || len(s.recWatchers) > 0 }

// keep adds the replaced snapshot old to n's history, dropping versions
// beyond Options.History-1 (raising the floor).
func (s *store) keep(n *node, old *fileState) {
	if n.hist == nil {
		n.hist = &history{}
	}
	hs := n.hist
	hs.entries = append(hs.entries, old)
	if extra := len(hs.entries) - (s.f.opts.History - 1); extra > 0 {
		hs.floor = max(hs.floor, hs.entries[extra-1].version)
		hs.entries = hs.entries[extra:]
	}
}

// versionAt returns the contents of n's file at version, or the code
// GetVersion fails with: Compacted when older than the history, NoNode
// when never held (or no file).
func (n *node) versionAt(version int64) ([]byte, topo.ErrorCode) {
	fs := n.file.Load()
	switch {
	case fs == nil:
		return nil, topo.NoNode
	case fs.version == version:
		return fs.contents, 0
	}
	var floor int64
	if n.hist != nil {
		for _, h := range n.hist.entries {
			if h.version == version {
				return h.contents, 0
			}
		}
		floor = n.hist.floor
	}
	if version <= floor {
		return nil, topo.Compacted
	}
	return nil, topo.NoNode
}

func (s *store) deleteFile(root, rel string, n *node) {
	rev := s.rev.Add(1)
	n.file.Store(nil)
	n.hist = nil
	n.addFiles(-1)
	s.publish(root, rel, n, false)
	s.prune(n)
	if s.watched() {
		s.notifyFile(joinRoot(root, rel), nil, rev)
	}
}

// node returns the node at c's canonical path p, or nil. Call with mu held.
func (c *Conn) node(p string) *node { return lookupBelow(c.s.lookup(c.root), p) }

// lookupBelow returns the node at the path p relative to n (which may be
// nil), or nil. Call with mu held.
func lookupBelow(n *node, p string) *node {
	for n != nil && p != "" {
		seg, rest, _ := strings.Cut(p, "/")
		n = n.children[seg]
		p = rest
	}
	return n
}

// lock and rlock take mu for writing and for reading: each is one store
// request (docs/roundtrips.md), counted while counting is set.
func (s *store) lock() {
	s.request()
	s.mu.Lock()
}

func (s *store) rlock() {
	s.request()
	s.mu.RLock()
}

func (s *store) unlock(write bool) {
	if write {
		s.mu.Unlock()
	} else {
		s.mu.RUnlock()
	}
}

func (s *store) request() {
	if s.counting.Load() {
		s.requests.Add(1)
	}
}
