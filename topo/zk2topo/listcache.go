package zk2topo

import (
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
)

// listCacheSize is how many directories a Conn's listCache holds.
const listCacheSize = 8

// listCacheMin is the number of children from which a directory's sorted
// names are kept.
const listCacheMin = 64

// listCache keeps the sorted entries of the last names-only ListDir of a
// few large directories (before hiding "locks" or "zookeeper"), keyed by
// the Stat of the same children reply: Czxid (the incarnation), Cversion
// (one more per child created or deleted) and NumChildren, which within
// one incarnation identify one set of children. Safe for concurrent use.
type listCache struct {
	mu      sync.Mutex
	entries map[string]listCacheEntry // directory's znode path -> entry
}

type listCacheEntry struct {
	czxid    int64
	cversion int32
	sorted   []topo.DirEntry // never changed once stored; one per child
}

// get returns the entries stored for zp in st's child state, or nil; the
// caller must not change them.
func (lc *listCache) get(zp string, st *zk.Stat) []topo.DirEntry {
	if st == nil {
		return nil
	}
	lc.mu.Lock()
	e, ok := lc.entries[zp]
	lc.mu.Unlock()
	if !ok || e.czxid != st.Czxid || e.cversion != st.Cversion || len(e.sorted) != int(st.NumChildren) {
		return nil
	}
	return e.sorted
}

// put stores sorted (no longer the caller's) for zp in st's child state,
// dropping another directory when full.
func (lc *listCache) put(zp string, st *zk.Stat, sorted []topo.DirEntry) {
	if st == nil || len(sorted) != int(st.NumChildren) {
		return
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.entries == nil {
		lc.entries = make(map[string]listCacheEntry, listCacheSize)
	}
	if _, ok := lc.entries[zp]; !ok && len(lc.entries) >= listCacheSize {
		for k := range lc.entries {
			delete(lc.entries, k)
			break
		}
	}
	lc.entries[zp] = listCacheEntry{czxid: st.Czxid, cversion: st.Cversion, sorted: sorted}
}
