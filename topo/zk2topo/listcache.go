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

// listCache keeps, for a few large directories (listCacheMin
// children or more), the sorted entries a names-only ListDir last built there (before
// hiding "locks" or "zookeeper"), keyed by the directory's child state, so
// that listing an unchanged directory again copies them instead of
// sorting its names again.
//
// The key is the directory's Czxid (which incarnation of the znode),
// Cversion (ZooKeeper adds one on every creation or deletion of a child)
// and NumChildren, all from the Stat of the same Children reply as the
// names: within one incarnation a given Cversion is one set of children,
// so a hit holds exactly the names of the reply, in order. Safe for
// concurrent use.
type listCache struct {
	mu      sync.Mutex
	entries map[string]listCacheEntry // directory's znode path -> entry
}

type listCacheEntry struct {
	czxid    int64
	cversion int32
	n        int32
	sorted   []topo.DirEntry // never changed once stored
}

// get returns the sorted entries stored for the znode zp with the child
// state of st, or nil; the caller must not change them.
func (lc *listCache) get(zp string, st *zk.Stat) []topo.DirEntry {
	if st == nil {
		return nil
	}
	lc.mu.Lock()
	e, ok := lc.entries[zp]
	lc.mu.Unlock()
	if !ok || e.czxid != st.Czxid || e.cversion != st.Cversion || e.n != st.NumChildren || len(e.sorted) != int(st.NumChildren) {
		return nil
	}
	return e.sorted
}

// put stores sorted (the caller gives up changing it) as the entries of
// zp in the child state of st, making room by dropping another directory
// when full.
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
	lc.entries[zp] = listCacheEntry{czxid: st.Czxid, cversion: st.Cversion, n: st.NumChildren, sorted: sorted}
}
