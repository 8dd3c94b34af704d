package templatetopo

import (
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

// This file is the "store": the part a real backend does not write but
// talks to over the network (etcd, ZooKeeper, Consul). It is kept apart
// from the Conn on purpose, so that what the Conn does (check arguments,
// pick a session, send one request, map the answer) reads as it would
// against a remote store. Its errors are its own (errNotFound, ...), like a
// store client's, and the Conn maps them (see Conn.mapErr).

// The store's own errors, as a store client would return them. Only
// Conn.mapErr turns them into *topo.Error values.
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
// share one etcd. It is safe for concurrent use.
//
// Every write (of a file, a lock entry or an election entry) takes the
// next store revision: file versions and fencing tokens are revisions, so
// they only grow, for the Store's whole life (Restart keeps the revision,
// as a store with durable storage does).
type Store struct {
	// id names the store in ResumeInfo, so that info of one store is
	// refused by another.
	id string
	mu sync.Mutex
	// rev is the last revision handed out.
	rev int64
	// files maps a full path (the Conn's root joined with the file's path)
	// to the file.
	files map[string]*file
	// queues maps a full directory path to its entries, oldest first: the
	// lock entries of a locked directory (<dir>/locks/<token>), or the
	// candidates of an election (elections/<name>/locks/<token>). The first
	// entry holds the lock (leads); the others wait in order.
	queues map[string][]*entry
	// sessions are the live sessions by id.
	sessions    map[int64]*session
	lastSession int64
	// changed is closed (and replaced) on every change: leader watches
	// (Observe) wait on it.
	changed chan struct{}
	// watchers are the registered file watches (Watch, WatchRecursive).
	watchers map[*watcher]struct{}
	// refuse is how many more requests to refuse with errUnreachable
	// (Restart).
	refuse int
	// defect is given to the claims engine of every Conn (mutation kit).
	defect claims.Defect
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

// file is one file: its value, version, creation revision and the older
// versions GetVersion returns.
type file struct {
	data    []byte
	version int64
	// created is the revision of the write that created the file (a
	// delete followed by a create gives a new one): GetVersion tells a
	// compacted version from one the file never had with it.
	created int64
	// history holds older versions, oldest first (at most historyLimit-1).
	history []oldVersion
}

type oldVersion struct {
	version int64
	data    []byte
}

// session is the lifetime of a Conn's lock and election entries. It ends
// when the store ends it (Conn.ExpireSession, Conn.Cut, Conn.Close,
// Store.Restart); a Conn then opens a new one for its next lock or
// campaign.
type session struct {
	id    int64
	ended bool
	// owner is the Conn whose Close, Cut and ExpireSession end the session:
	// the one that opened it, or the one that adopted it
	// (ResumeLeaderParticipation).
	owner *Conn
	// orphaned counts the times the session lost its owner's link
	// (Conn.Cut); a pending expiry acts only if no Conn adopted it since.
	orphaned int
	// views are the engines' views of the session, one per Conn that has
	// claims on it (the opener, and an adopter): ending the session, or
	// giving it up at a Cut, declares each lost (claims.Session.Lost)
	// before anything else happens.
	views map[*Conn]*claims.Session
}

// entry is one entry of a queue: a lock entry or an election candidate.
// value and valueRev change (Proclaim); the other fields do not.
type entry struct {
	key string // the queue (full path)
	// token is the revision of the entry's creation: its order key and
	// fencing token.
	token int64
	// contents is the lock's description, or the candidate's id.
	contents string
	// value is a candidate's published value (Campaign, Proclaim), and
	// valueRev the revision of its last change.
	value    []byte
	valueRev int64
	sess     *session
	// gone is closed when the entry leaves its queue: the predecessor
	// wait of the entry behind it (driver.WaitGone) watches it alone.
	gone chan struct{}
}

// notify wakes every watch: the store changed.
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

// endSession ends ss: FIRST every engine with claims on it learns it (each
// view is declared lost: Done closes, leadership contexts are cancelled,
// waiters wake with LockLost, all before Lost returns), THEN its entries
// leave their queues, which lets the next entries be granted. This order
// is what makes "the old holder already knows when the new one wins" true
// by construction here: the notice is a function call in the same
// process. A networked store cannot promise it (its notice may arrive
// after the successor's grant), so a networked backend must declare the
// loss on its own, a safety margin before the store can expire its lease
// (see etcd2topo's and zk2topo's session handling).
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

// enqueue appends a new entry to the queue key on session ss (which must
// be live), with value published beside it, and returns it.
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
// the live session ss: the lock is held, the term is current. This is
// the store-side check behind IfHeld and Check.
func (s *Store) holds(key string, token int64, ss *session) bool {
	h := s.head(key)
	return h != nil && h.token == token && h.sess == ss && !ss.ended
}

// orphan is the store's side of a cut link: every claim of ss ends on the
// holder's side at once (lost), and the store ends ss SessionTimeout later
// unless a Conn adopts it first. Called with store.mu held.
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
		s.mu.Lock()
		defer s.mu.Unlock()
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

// write stores a copy of data at full as a new version at revision rev,
// creating the file if absent, and tells the watchers.
func (s *Store) write(full string, data []byte, rev int64) {
	stored := append([]byte(nil), data...)
	f := s.files[full]
	if f == nil {
		f = &file{data: stored, version: rev, created: rev}
		s.files[full] = f
	} else {
		f.history = append(f.history, oldVersion{f.version, f.data})
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

// watcher is a registered watch. For each path it watches, the store
// records what changed since the watch last took its changes: so a watch
// never misses a deletion, even of a file it never saw (created and
// deleted while it was busy), while rapid writes of one file coalesce.
type watcher struct {
	prefix string // a store path prefix; the exact path when exact
	exact  bool
	// pending holds the changes not yet taken, by store path.
	pending map[string]*change
	// signal has a value while pending is not empty.
	signal chan struct{}
}

// change is what happened to one file since its watch last looked.
type change struct {
	gone bool       // the file was deleted (at least once)
	now  *fileState // the file now; nil when absent
}

// fileState is what a watch sees of one file (a copy).
type fileState struct {
	data    []byte
	version int64
}

// stateOf returns a copy of what a watch needs of f.
func stateOf(f *file) fileState {
	return fileState{data: append([]byte{}, f.data...), version: f.version}
}

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
		ch := w.pending[full]
		if ch == nil {
			ch = &change{}
			w.pending[full] = ch
		}
		if f == nil {
			ch.gone, ch.now = true, nil
		} else {
			st := stateOf(f)
			ch.now = &st
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
// the deliberate defect d: for the mutation kit (mutation.EngineDefect)
// only. Call it before opening Conns.
func (s *Store) SetClaimsDefect(d claims.Defect) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.defect = d
}

// Restart simulates a restart of the store process with durable files: it
// ends every session (every lock and leadership held or awaited is lost,
// the holders learning it first, as always) and refuses the next refuse
// requests with Unavailable, as requests sent while the store is down
// fail. Files, versions and the revision counter survive, so fencing
// tokens keep growing across the restart. Watches keep running (they see
// the entries go). It returns once the store serves requests again, which
// is at once: the refused requests are counted, not timed.
func (s *Store) Restart(refuse int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ss := range s.sessions {
		s.endSession(ss)
	}
	s.refuse = max(refuse, 0)
}
