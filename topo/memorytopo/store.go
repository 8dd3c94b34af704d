package memorytopo

import (
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/topokit/topokit/topo"
)

// store is one in-memory coordination store: everything a Factory holds
// for one serverAddress.
//
// Locking. mu guards the tree's shape (which nodes exist, their children,
// files counts and entries), the queues and leases and the watcher
// registrations: every change of those, every transaction and List hold
// it for writing, reads for reading. The value and history of one
// existing file may also change with mu held for reading plus that
// node's own mutex (updateInPlace), so that writers of different files do
// not serialise: the value is an atomic pointer to an immutable snapshot,
// which Get loads under mu held for reading, and whoever reads the
// history holds mu for writing, or mu for reading and the node's mu.
type store struct {
	f  *Factory
	id uint64 // random, names the store in ResumeInfo

	mu  sync.RWMutex // taken through lock and rlock, which count requests
	rev atomic.Int64 // last revision handed out, store-wide: a file version, an entry, a delete
	// While counting is set, requests counts the acquisitions of mu and
	// wakeups the waiters driver.WaitGone woke (tests only).
	counting          atomic.Bool
	requests, wakeups atomic.Int64
	top               *node // the store's root node (no name)

	// roots holds one index per Conn root in use (made with its first
	// Conn, kept for the store's lifetime): the node of every file and
	// placed entry below that root, by path relative to it, so that a
	// read finds a value with one map lookup (publish keeps them), and the
	// queues its Conns used. A slice, not a map: publish walks it on every
	// new or deleted file, and a store has few roots.
	roots []*rootIndex

	leases       map[*lease]struct{}
	fileWatchers map[string]*fileWatches // full path -> its Watches (watch.go)
	recWatchers  map[*watcher]struct{}

	// queues holds every queue used, by full directory (entry.go);
	// unplaced counts the entries not in the tree yet; placeAtOnce is set
	// once a root that may lie in a queue is in use.
	queues      map[string]*queue
	unplaced    int
	placeAtOnce bool

	// slab holds lock entries not used yet, allocated lockSlab at a time
	// (addEntry); guarded by mu.
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

// rootIndex is the index of one root (see store.roots). locks and
// elections hold the queues its Conns used (driver.queue) by canonical
// path, a lock's directory or an election's name: two maps keyed by
// strings, not one keyed by claims.Queue, as a string key is found
// faster, on every claim call.
type rootIndex struct {
	root             string
	nodes            map[string]*node
	locks, elections map[string]*queue
}

// index returns the index of the canonical root r (see roots), making
// and filling it on first use. Call with mu held for writing.
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
	delete(idx, "") // the root itself is no path of its Conns
	ri := &rootIndex{root: r, nodes: idx, locks: map[string]*queue{}, elections: map[string]*queue{}}
	s.roots = append(s.roots, ri)
	return ri
}

// publish adds n (with a value: present) to, or removes it from, every
// root index covering the full path root/rel (see joinRoot; built only
// for an index of another root). Call with mu held for writing.
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
// canonical root (either may be ""): Conn.full.
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

	// mu guards file and hist when they change with the store's mu held
	// only for reading (see store).
	mu sync.Mutex
	// hist is nil until a write replaces a version (few nodes are
	// rewritten files) and again once the file is deleted.
	hist *history

	// files counts the regular files in this subtree, this node included.
	files int32
	// pruned is set when prune takes the node out of the tree: a new
	// node stands for its path from then on (see queue.lockDir).
	pruned bool
}

// history holds a file's earlier versions (at most Options.History-1),
// oldest first, and the highest version discarded from it (floor).
type history struct {
	entries []histEntry
	floor   int64
}

// fileState is an immutable snapshot of one file (or entry) value.
type fileState struct {
	contents []byte
	version  int64
	ver      topo.Version // topo.NumericVersion(version), boxed once
}

type histEntry struct {
	version  int64
	contents []byte
}

// lookup returns the node at full path p, or nil. Call with mu held.
func (s *store) lookup(p string) *node { return lookupBelow(s.top, p) }

// ensure returns the node at full path p, creating it and its parents.
// Call with mu held for writing.
func (s *store) ensure(p string) *node { return ensureBelow(s.top, p) }

// ensureBelow is ensure for the path p relative to the node n, without
// building the full path. Call with mu held for writing.
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

// prune removes n and its ancestors while they hold nothing.
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

// setFile makes fs (a new snapshot) the new value of the file at the
// full path root/rel (see joinRoot; built only when a watcher needs it)
// held by n, with a new store revision as its version, and returns it.
// Call with mu held for writing, or for reading with n.mu held
// (updateInPlace: the file exists).
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

// watched reports whether any Watch or WatchRecursive is registered.
// Call with mu held (for reading, only from updateInPlace).
func (s *store) watched() bool { return len(s.fileWatchers) > 0 || len(s.recWatchers) > 0 }

// keep adds the replaced snapshot old to n's history, dropping the
// oldest version (and raising the floor) beyond Options.History-1 kept
// versions. Call with mu held for writing, or for reading with n.mu held.
func (s *store) keep(n *node, old *fileState) {
	if n.hist == nil {
		n.hist = &history{}
	}
	hs := n.hist
	hs.entries = append(hs.entries, histEntry{old.version, old.contents})
	if extra := len(hs.entries) - (s.f.opts.History - 1); extra > 0 {
		hs.floor = max(hs.floor, hs.entries[extra-1].version)
		hs.entries = hs.entries[extra:]
	}
}

// versionAt returns the contents of the file n holds at version, its
// current or a kept one, or the code GetVersion fails with: Compacted for
// a version older than the history, NoNode for one n never held (or when
// n holds no file). Call with mu held for writing, or for reading with
// n.mu held.
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

// deleteFile removes the file at the full path root/rel held by n, with
// its history, as a new store revision (which watch events report). Call
// with mu held for writing.
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

// node returns the node at the canonical path p of c, or nil, without
// building its full path. Call with mu held.
func (c *Conn) node(p string) *node { return lookupBelow(c.s.lookup(c.root), p) }

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

// lock and rlock take mu for writing and for reading: each is one store
// request (docs/roundtrips.md), counted while requests are counted
// (counting, for tests).
func (s *store) lock() {
	s.request()
	s.mu.Lock()
}

func (s *store) rlock() {
	s.request()
	s.mu.RLock()
}

// unlock releases mu, held for writing when write is set.
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
