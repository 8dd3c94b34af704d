package templatetopo

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// This file is the "store": what a real backend talks to over the network
// (etcd, ZooKeeper, Consul), kept apart so that the Conn reads as it would
// against a remote store. Its errors are its own, as a store client's are;
// only Conn.mapErr turns them into *topo.Error values.
var (
	errNotFound     = errors.New("templatetopo store: no such file")
	errExists       = errors.New("templatetopo store: file exists")
	errVersion      = errors.New("templatetopo store: version mismatch")
	errSessionEnded = errors.New("templatetopo store: session ended")
	errCompacted    = errors.New("templatetopo store: version compacted")
	errUnreachable  = errors.New("templatetopo store: unreachable")
	errConnClosed   = errors.New("templatetopo: connection closed")
)

// historyLimit is how many versions of a file GetVersion can return (the
// current one included). Older ones are compacted.
const historyLimit = 32

// Store is one in-process coordination store: a versioned map of files,
// queues of lock and election entries, and sessions, all under one mutex.
// Several Conns (each with its own root) share one Store, as processes
// share one etcd. It is safe for concurrent use. Every write takes the
// next store revision (file versions and fencing tokens are revisions),
// for the Store's whole life: Restart keeps the revision.
type Store struct {
	id          string // names the store in ResumeInfo
	mu          sync.Mutex
	rev         int64               // the last revision handed out
	files       map[string]*file    // by full path
	queues      map[string][]*entry // by full lock directory or elections/<name>, oldest (the holder) first
	sessions    map[int64]*session  // the live sessions
	lastSession int64
	changed     chan struct{}         // closed and replaced on every change (Observe waits on it)
	watchers    map[*watcher]struct{} // the file watches
	refuse      int                   // how many more requests to refuse (Restart)
	defect      claims.Defect         // given to every Conn's engine (mutation kit)
}

// NewStore returns an empty Store.
func NewStore() *Store {
	var id [8]byte
	_, _ = rand.Read(id[:]) // crypto/rand.Read never fails
	return &Store{
		id:       hex.EncodeToString(id[:]),
		files:    map[string]*file{},
		queues:   map[string][]*entry{},
		sessions: map[int64]*session{},
		changed:  make(chan struct{}),
		watchers: map[*watcher]struct{}{},
	}
}

// file is one file. created is the revision of the write that created it
// (GetVersion tells a compacted version from one the file never had with
// it); history holds older versions, oldest first (at most
// historyLimit-1).
type file struct {
	data             []byte
	version, created int64
	history          []*file // data and version only
}

// session is the lifetime of a Conn's lock and election entries (see the
// package doc). owner is the Conn whose Close, Cut and ExpireSession end
// it (its opener or adopter); orphaned counts the Cuts of its owner (a
// pending expiry acts only if no Conn adopted it since); views are the
// engines' views of it, one per Conn with claims on it, each declared lost
// before anything else happens when it ends or is given up.
type session struct {
	id       int64
	ended    bool
	owner    *Conn
	orphaned int
	views    map[*Conn]*claims.Session
}

// entry is a lock entry or an election candidate of queue key. token is
// the revision of its creation (order key and fencing token); contents
// the lock's description or the candidate's id; value a candidate's
// published value and valueRev the revision of its last change (the only
// fields that change). gone is closed when it leaves its queue: the
// predecessor wait of the entry behind it (driver.WaitGone) watches it.
type entry struct {
	key      string
	token    int64
	contents string
	value    []byte
	valueRev int64
	sess     *session
	gone     chan struct{}
}

// lock locks the store and returns its unlock.
func (s *Store) lock() (unlock func()) {
	s.mu.Lock()
	return s.mu.Unlock
}

// notify wakes the leader watches: the store changed.
func (s *Store) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// next hands out the next revision.
func (s *Store) next() int64 {
	s.rev++
	return s.rev
}

// openSession starts a new session owned by c.
func (s *Store) openSession(c *Conn) *session {
	s.lastSession++
	ss := &session{id: s.lastSession, owner: c, views: map[*Conn]*claims.Session{}}
	s.sessions[ss.id] = ss
	return ss
}

// endSession ends ss: FIRST every view of it is declared lost (Done
// closes, leadership contexts are cancelled, waiters wake with LockLost,
// before Lost returns), THEN its entries leave their queues, so the old
// holder already knows when the new one wins (see the package doc; a
// networked backend declares the loss a safety margin before the store
// can expire its lease).
func (s *Store) endSession(ss *session) {
	if ss == nil || ss.ended {
		return
	}
	ss.ended = true
	for _, v := range ss.views {
		v.Lost()
	}
	delete(s.sessions, ss.id)
	for key, q := range s.queues {
		kept := q[:0]
		for _, e := range q {
			if e.sess != ss {
				kept = append(kept, e)
			} else {
				close(e.gone)
			}
		}
		s.setQueue(key, kept)
	}
	s.notify()
}

// enqueue appends a new entry to queue key on the live session ss.
func (s *Store) enqueue(key, contents string, value []byte, ss *session) *entry {
	e := &entry{key: key, token: s.next(), contents: contents, value: value, sess: ss, gone: make(chan struct{})}
	s.setQueue(key, append(s.queues[key], e))
	s.notify()
	return e
}

// remove takes e out of its queue.
func (s *Store) remove(e *entry) {
	q := s.queues[e.key]
	if i := slices.Index(q, e); i >= 0 {
		s.setQueue(e.key, append(q[:i:i], q[i+1:]...))
		close(e.gone)
		s.notify()
	}
}

// find returns the entry of key's queue with token, or nil.
func (s *Store) find(key string, token int64) *entry {
	for _, e := range s.queues[key] {
		if e.token == token {
			return e
		}
	}
	return nil
}

// setQueue stores q as key's queue (deleting an empty one).
func (s *Store) setQueue(key string, q []*entry) {
	if len(q) == 0 {
		delete(s.queues, key)
		return
	}
	s.queues[key] = q
}

// holds reports whether the entry of key with token heads its queue on
// the live session ss: the store-side check behind IfHeld and Check.
func (s *Store) holds(key string, token int64, ss *session) bool {
	h := s.head(key)
	return h != nil && h.token == token && h.sess == ss && !ss.ended
}

// orphan is the store's side of a cut link: every view of ss is lost at
// once, and the store ends ss SessionTimeout later unless a Conn adopts it
// first. Called with store.mu held.
func (s *Store) orphan(ss *session) {
	if ss.ended {
		return
	}
	for _, v := range ss.views {
		v.Lost()
	}
	ss.owner = nil
	ss.orphaned++
	gen := ss.orphaned
	time.AfterFunc(SessionTimeout, func() {
		defer s.lock()()
		if ss.owner == nil && ss.orphaned == gen {
			s.endSession(ss)
		}
	})
	s.notify()
}

// head returns the entry at the head of key's queue, or nil.
func (s *Store) head(key string) *entry {
	if q := s.queues[key]; len(q) > 0 {
		return q[0]
	}
	return nil
}

// entryPath is where an entry shows in ListDir: <key>/locks/<token>.
func entryPath(key string, token int64) string {
	return backendkit.JoinPath(key, backendkit.LocksDirName+"/"+strconv.FormatInt(token, 10))
}

// write stores a copy of data at full as version rev and tells the
// watchers.
func (s *Store) write(full string, data []byte, rev int64) {
	stored := append([]byte(nil), data...)
	f := s.files[full]
	if f == nil {
		f = &file{data: stored, version: rev, created: rev}
		s.files[full] = f
	} else {
		f.history = append(f.history, &file{data: f.data, version: f.version})
		if len(f.history) == historyLimit { // compact the oldest version
			f.history = append(f.history[:0], f.history[1:]...)
		}
		f.data, f.version = stored, rev
	}
	s.record(full, f)
}

// delete deletes the file at full and tells the watchers.
func (s *Store) delete(full string) {
	delete(s.files, full)
	s.record(full, nil)
}

// watcher is a registered watch of a store path prefix (the exact path
// when exact). pending holds, by store path, what changed since the watch
// last took its changes (so a deletion is never missed while rapid writes
// coalesce); signal has a value while pending is not empty.
type watcher struct {
	prefix  string
	exact   bool
	pending map[string]*change
	signal  chan struct{}
}

// change is what happened to one file since its watch last looked.
type change struct {
	gone bool  // the file was deleted (at least once)
	now  *file // a copy of the file's data and version now; nil when absent
}

// snapshot returns a copy of what a watch needs of f.
func (f *file) snapshot() *file { return &file{data: append([]byte{}, f.data...), version: f.version} }

// watch registers a watcher of the store path full (exact) or of every
// store path starting with it.
func (s *Store) watch(full string, exact bool) *watcher {
	w := &watcher{prefix: full, exact: exact, pending: map[string]*change{}, signal: make(chan struct{}, 1)}
	s.watchers[w] = struct{}{}
	return w
}

// record tells the watchers of full that it now is f (nil: deleted).
func (s *Store) record(full string, f *file) {
	for w := range s.watchers {
		if w.exact && full != w.prefix || !w.exact && !strings.HasPrefix(full, w.prefix) {
			continue
		}
		ch := cmp.Or(w.pending[full], &change{})
		w.pending[full] = ch
		if f == nil {
			ch.gone, ch.now = true, nil
		} else {
			ch.now = f.snapshot()
		}
		select {
		case w.signal <- struct{}{}:
		default:
		}
	}
}

// checkVersion returns errNotFound when f is nil and errVersion when want
// is a version (not backendkit.AnyVersion) other than f's.
func checkVersion(f *file, want int64) error {
	if f == nil {
		return errNotFound
	}
	if want != backendkit.AnyVersion && f.version != want {
		return errVersion
	}
	return nil
}

// versionData returns the contents f held at version v.
func (f *file) versionData(v int64) ([]byte, error) {
	if f.version == v {
		return f.data, nil
	}
	for _, h := range f.history {
		if h.version == v {
			return h.data, nil
		}
	}
	if oldest := f.history; len(oldest) > 0 && oldest[0].version != f.created && v >= f.created && v < oldest[0].version {
		return nil, errCompacted // between the file's creation and its oldest kept version
	}
	return nil, errNotFound
}

// SetClaimsDefect gives every Conn opened from now on a claims engine with
// the deliberate defect d, for the mutation kit (mutation.EngineDefect).
func (s *Store) SetClaimsDefect(d claims.Defect) {
	defer s.lock()()
	s.defect = d
}

// Restart simulates a restart of the store process with durable files: it
// ends every session (every claim held or awaited is lost, the holders
// learning it first) and refuses the next refuse requests with
// Unavailable. Files, versions and the revision counter survive, so
// fencing tokens keep growing. Watches keep running. It returns at once:
// the refused requests are counted, not timed.
func (s *Store) Restart(refuse int) {
	defer s.lock()()
	for _, ss := range s.sessions {
		s.endSession(ss)
	}
	s.refuse = max(refuse, 0)
}
