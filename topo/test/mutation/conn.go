package mutation

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// store is the state the mutants of one store share between its Conns.
type store struct {
	mu     sync.Mutex
	held   map[string]topo.LockDescriptor // stale-unlock: the last lock taken per directory
	tokens map[string]int64               // token-repeats, term-token-repeats: the first token per lock or election

	txnWrites map[string]bool // txn-unwatched: path and contents of every write a transaction sent
}

// recordTxn remembers the path and contents of every write of ops, before
// they are sent, so that no watch event of them can slip past txnWrote
// (txn-unwatched).
func (s *store) recordTxn(ops []topo.TxnOp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.txnWrites == nil {
		s.txnWrites = map[string]bool{}
	}
	for _, op := range ops {
		if op.Kind == topo.TxnCreate || op.Kind == topo.TxnUpdate {
			s.txnWrites[op.Path+"\x00"+string(op.Contents)] = true
		}
	}
}

// txnWrote reports whether a transaction wrote contents to path
// (txn-unwatched).
func (s *store) txnWrote(path string, contents []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.txnWrites[path+"\x00"+string(contents)]
}

// firstToken returns the first token recorded for key, recording tok if
// there is none.
func (s *store) firstToken(key string, tok int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens == nil {
		s.tokens = map[string]int64{}
	}
	if first, ok := s.tokens[key]; ok {
		return first
	}
	s.tokens[key] = tok
	return tok
}

// conn is the author's Conn with the named mutant's defect.
type conn struct {
	topo.Conn
	name  string
	store *store

	mu    sync.Mutex
	cache map[string]cached // stale-reads

	closed atomic.Bool // closed-before-input: Close was called
}

type cached struct {
	data []byte
	v    topo.Version
}

func (c *conn) remember(p string, data []byte, v topo.Version) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache == nil {
		c.cache = map[string]cached{}
	}
	c.cache[strings.TrimPrefix(p, "/")] = cached{data, v}
}

func (c *conn) Get(ctx context.Context, p string) ([]byte, topo.Version, error) {
	if err := c.early(p, func() error { _, err := topo.CleanFilePath(p); return err }); err != nil {
		return nil, nil, err
	}
	if c.name == "stale-reads" {
		c.mu.Lock()
		e, ok := c.cache[strings.TrimPrefix(p, "/")]
		c.mu.Unlock()
		if ok {
			return e.data, e.v, nil
		}
		data, v, err := c.Conn.Get(ctx, p)
		if err == nil {
			c.remember(p, data, v)
		}
		return data, v, err
	}
	return c.Conn.Get(ctx, p)
}

// reservedEscape maps a reserved path to a lookalike the store accepts.
func reservedEscape(p string) string {
	segs := strings.Split(strings.Trim(p, "/"), "/")
	for i, s := range segs {
		if s == backendkit.LocksDirName || s == backendkit.ConsulLockName || (i == 0 && s == backendkit.ElectionsDirName) {
			segs[i] = s + "_"
		}
	}
	return strings.Join(segs, "/")
}

// isDir reports whether p is only a directory.
func (c *conn) isDir(ctx context.Context, p string) bool {
	_, err := c.Conn.ListDir(ctx, p, false)
	return err == nil
}

func (c *conn) Update(ctx context.Context, p string, contents []byte, v topo.Version) (topo.Version, error) {
	if err := c.early(p, func() error { _, _, err := backendkit.CheckUpdate(p, contents, v); return err }); err != nil {
		return nil, err
	}
	switch c.name {
	case "cas-creates-absent":
		if _, _, err := backendkit.CheckUpdate(p, contents, v); err == nil && v != nil {
			if _, _, err := c.Conn.Get(ctx, p); topo.IsErrType(err, topo.NoNode) {
				return c.Conn.Update(ctx, p, contents, nil)
			}
		}
	case "dir-cas-creates-file":
		if _, _, err := backendkit.CheckUpdate(p, contents, v); err == nil && v != nil {
			if _, _, err := c.Conn.Get(ctx, p); topo.IsErrType(err, topo.NoNode) && c.isDir(ctx, p) {
				return c.Conn.Update(ctx, p, contents, nil)
			}
		}
	case "stale-versions":
		_, old, err := c.Conn.Get(ctx, p)
		if _, uerr := c.Conn.Update(ctx, p, contents, v); uerr != nil || err != nil {
			return nil, uerr
		}
		return old, nil
	case "cas-returns-other":
		if _, err := c.Conn.Update(ctx, p, contents, v); err != nil {
			return nil, err
		}
		runtime.Gosched()
		_, cur, err := c.Conn.Get(ctx, p)
		return cur, err
	case "stale-reads":
		nv, err := c.Conn.Update(ctx, p, contents, v)
		if err == nil {
			c.remember(p, contents, nv)
		}
		return nv, err
	case "cas-not-atomic":
		if _, _, err := backendkit.CheckUpdate(p, contents, v); err == nil && v != nil {
			_, cur, err := c.Conn.Get(ctx, p)
			if err != nil {
				return nil, err
			}
			if cur.String() != v.String() {
				return nil, topo.NewError(topo.BadVersion, p)
			}
			runtime.Gosched()
			return c.Conn.Update(ctx, p, contents, nil)
		}
	case "reserved-create":
		if cp, err := topo.CleanFilePath(p); err == nil && topo.IsReserved(cp) {
			return c.Conn.Update(ctx, reservedEscape(cp), contents, nil)
		}
	}
	nv, err := c.Conn.Update(ctx, p, contents, v)
	return nv, c.reworded(err)
}

func (c *conn) Create(ctx context.Context, p string, contents []byte) (topo.Version, error) {
	if err := c.early(p, func() error { _, err := backendkit.CheckCreate(p, contents); return err }); err != nil {
		return nil, err
	}
	switch c.name {
	case "lenient-paths":
		p = strings.ReplaceAll(p, "//", "/")
	case "create-ignores-context":
		ctx = context.Background()
	case "oversize-truncated":
		if len(contents) > topo.MaxValueSize {
			contents = contents[:topo.MaxValueSize]
		}
	case "reserved-create":
		if cp, err := topo.CleanFilePath(p); err == nil && topo.IsReserved(cp) {
			p = reservedEscape(cp)
		}
	}
	v, err := c.Conn.Create(ctx, p, contents)
	return v, c.reworded(err)
}

func (c *conn) Delete(ctx context.Context, p string, v topo.Version) error {
	if err := c.early(p, func() error { _, _, err := backendkit.CheckDelete(p, v); return err }); err != nil {
		return err
	}
	switch c.name {
	case "delete-not-atomic":
		if _, _, err := backendkit.CheckDelete(p, v); err == nil && v != nil {
			_, cur, err := c.Conn.Get(ctx, p)
			if err != nil {
				return err
			}
			if cur.String() != v.String() {
				return topo.NewError(topo.BadVersion, p)
			}
			raceWindow()
			return c.Conn.Delete(ctx, p, nil)
		}
	case "delete-erases-parent":
		if err := c.Conn.Delete(ctx, p, v); err != nil {
			return err
		}
		if i := strings.LastIndexByte(strings.Trim(p, "/"), '/'); i > 0 {
			parent := strings.Trim(p, "/")[:i]
			if _, pv, err := c.Conn.Get(ctx, parent); err == nil {
				_, _ = c.Conn.Update(ctx, parent, nil, pv)
			}
		}
		return nil
	case "reserved-create":
		if cp, err := topo.CleanFilePath(p); err == nil && topo.IsReserved(cp) {
			err := c.Conn.Delete(ctx, reservedEscape(cp), v)
			if topo.IsErrType(err, topo.NoNode) || topo.IsErrType(err, topo.BadVersion) {
				return err
			}
			return nil
		}
	}
	return c.reworded(c.Conn.Delete(ctx, p, v))
}

func (c *conn) List(ctx context.Context, prefix string) ([]topo.KVInfo, error) {
	if err := c.early(prefix, nil); err != nil {
		return nil, err
	}
	kvs, err := c.Conn.List(ctx, prefix)
	if c.name != "list-dir-prefix" || err != nil {
		return kvs, err
	}
	dir := strings.TrimSuffix(strings.TrimPrefix(prefix, "/"), "/")
	var out []topo.KVInfo
	for _, kv := range kvs {
		if dir == "" || kv.Path == dir || strings.HasPrefix(kv.Path, dir+"/") {
			out = append(out, kv)
		}
	}
	if len(out) == 0 {
		return nil, topo.NewError(topo.NoNode, prefix)
	}
	return out, nil
}

func (c *conn) GetVersion(ctx context.Context, p string, v int64) ([]byte, error) {
	if err := c.early(p, func() error { _, err := backendkit.CheckGetVersion(p, v); return err }); err != nil {
		return nil, err
	}
	if c.name == "getversion-latest" {
		data, _, err := c.Conn.Get(ctx, p)
		return data, err
	}
	data, err := c.Conn.GetVersion(ctx, p, v)
	return data, c.reworded(err)
}

func (c *conn) ListDir(ctx context.Context, dir string, full bool) ([]topo.DirEntry, error) {
	if err := c.early(dir, nil); err != nil {
		return nil, err
	}
	entries, err := c.Conn.ListDir(ctx, dir, full)
	switch c.name {
	case "listdir-unsorted":
		slices.Reverse(entries)
	case "no-ephemeral":
		for i := range entries {
			entries[i].Ephemeral = false
		}
	}
	return entries, err
}

// lockDir returns the directory the mutant really locks for dir.
func (c *conn) lockDir(dir string) string {
	if c.name == "reserved-lock" {
		if cp, err := topo.CleanDirPath(dir); err == nil && topo.IsReserved(cp) {
			return reservedEscape(cp)
		}
	}
	return dir
}

func (c *conn) TryLock(ctx context.Context, dir, contents string) (topo.LockDescriptor, error) {
	if err := c.early(dir, func() error { _, err := backendkit.CheckLock(dir, contents); return err }); err != nil {
		return nil, err
	}
	if c.name == "trylock-blocks" {
		return c.Lock(ctx, dir, contents)
	}
	return c.wrapLock(dir)(c.Conn.TryLock(ctx, c.lockDir(dir), contents))
}

func (c *conn) LockWithTTL(ctx context.Context, dir, contents string, ttl time.Duration) (topo.LockDescriptor, error) {
	if err := c.early(dir, func() error { _, err := backendkit.CheckLockWithTTL(dir, contents, ttl); return err }); err != nil {
		return nil, err
	}
	if err := c.ttlFirst(ctx, dir, ttl); err != nil {
		return nil, err
	}
	l, err := c.wrapLock(dir)(c.Conn.LockWithTTL(ctx, c.lockDir(dir), contents, ttl))
	return l, c.reworded(err)
}

func (c *conn) LockName(ctx context.Context, dir, contents string) (topo.LockDescriptor, error) {
	if err := c.early(dir, func() error { _, err := backendkit.CheckLock(dir, contents); return err }); err != nil {
		return nil, err
	}
	return c.wrapLock(dir)(c.Conn.LockName(ctx, c.lockDir(dir), contents))
}

func (c *conn) Lock(ctx context.Context, dir, contents string) (topo.LockDescriptor, error) {
	if err := c.early(dir, func() error { _, err := backendkit.CheckLock(dir, contents); return err }); err != nil {
		return nil, err
	}
	switch c.name {
	case "lock-not-exclusive":
		if _, err := backendkit.CheckLockPath(dir); err != nil {
			return nil, err
		}
		if _, err := c.Conn.ListDir(ctx, dir, false); err != nil {
			return nil, err
		}
		return &fakeLock{}, nil
	case "timeout-as-interrupted":
		l, err := c.Conn.Lock(ctx, dir, contents)
		if topo.IsErrType(err, topo.Timeout) {
			err = topo.NewError(topo.Interrupted, dir)
		}
		return l, err
	case "waiter-stays-blocked":
		l, err := c.Conn.Lock(ctx, dir, contents)
		if topo.IsErrType(err, topo.LockLost) {
			// Wait on, as if still queued, until the lock is free.
			l, err = c.Conn.Lock(ctx, dir, contents)
		}
		return c.wrapLock(dir)(l, err)
	}
	return c.wrapLock(dir)(c.Conn.Lock(ctx, c.lockDir(dir), contents))
}

// wrapLock returns the func that applies the lock descriptor mutants to
// the outcome of a lock call on dir.
func (c *conn) wrapLock(dir string) func(topo.LockDescriptor, error) (topo.LockDescriptor, error) {
	return func(l topo.LockDescriptor, err error) (topo.LockDescriptor, error) { return c.wrap(dir, l, err) }
}

func (c *conn) wrap(dir string, l topo.LockDescriptor, err error) (topo.LockDescriptor, error) {
	var nf *backendkit.LockNeedsFilesError
	if c.name == "lock-file-bare-nonode" && errors.As(err, &nf) {
		return nil, topo.NewError(topo.NoNode, strings.Trim(dir, "/"))
	}
	if err != nil {
		return nil, err
	}
	switch c.name {
	case "unlock-twice-ok":
		return &lenientUnlock{LockDescriptor: l}, nil
	case "closed-claims-lost":
		return &closedAsLost{LockDescriptor: l}, nil
	case "check-lags-loss":
		return &laggingCheck{LockDescriptor: l}, nil
	case "stale-unlock":
		s := c.store
		s.mu.Lock()
		if s.held == nil {
			s.held = map[string]topo.LockDescriptor{}
		}
		key := strings.Trim(dir, "/")
		s.held[key] = l
		s.mu.Unlock()
		return &staleUnlock{LockDescriptor: l, s: s, key: key}, nil
	case "token-repeats":
		return &fencedLock{LockDescriptor: l, token: c.store.firstToken("lock:"+strings.Trim(dir, "/"), l.Token())}, nil
	case "token-decreases":
		return &fencedLock{LockDescriptor: l, token: decreasingBase - l.Token()}, nil
	case "done-never-closes":
		return &fencedLock{LockDescriptor: l, token: l.Token(), done: make(chan struct{})}, nil
	case "done-only-on-release":
		return &fencedLock{LockDescriptor: l, token: l.Token(), done: make(chan struct{}), closeOnUnlock: true}, nil
	}
	return l, nil
}

// raceWindow yields the processor several times between the non-atomic
// steps of a racy mutant, so that a concurrent writer gets to run in
// between even on a fast in-memory store (never a sleep).
func raceWindow() {
	for range 8 {
		runtime.Gosched()
	}
}

// decreasingBase is what token-decreases subtracts the real token from:
// positive for any token a store issues in a test, and decreasing.
const decreasingBase = 1 << 52

// fencedLock is a lock descriptor with a mutated token or Done. A nil
// done passes the real Done through; closeOnUnlock closes done on Unlock
// only (not when the store drops the lock).
type fencedLock struct {
	topo.LockDescriptor
	token         int64
	done          chan struct{}
	closeOnUnlock bool
	once          sync.Once
}

func (l *fencedLock) Token() int64 { return l.token }

func (l *fencedLock) Done() <-chan struct{} {
	if l.done == nil {
		return l.LockDescriptor.Done()
	}
	return l.done
}

func (l *fencedLock) Unlock(ctx context.Context) error {
	err := l.LockDescriptor.Unlock(ctx)
	if l.closeOnUnlock {
		l.once.Do(func() { close(l.done) })
	}
	return err
}

// Unwrap returns the real descriptor, so that the backend's IfHeld finds
// it (backendkit.FenceAs).
func (l *fencedLock) Unwrap() topo.Fence { return l.LockDescriptor }

// fakeLock is a lock that excludes nobody.
type fakeLock struct{ released bool }

func (l *fakeLock) Check(context.Context) error { return nil }
func (l *fakeLock) Token() int64                { return 1 }
func (l *fakeLock) Done() <-chan struct{}       { return nil }
func (l *fakeLock) Unlock(context.Context) error {
	if l.released {
		return topo.NewError(topo.Interrupted, "")
	}
	l.released = true
	return nil
}

// lenientUnlock ignores errors from Unlock.
type lenientUnlock struct{ topo.LockDescriptor }

// closedAsLost says LockLost where the lock says Closed.
type closedAsLost struct{ topo.LockDescriptor }

// Unwrap returns the real descriptor (see fencedLock.Unwrap).
func (l *closedAsLost) Unwrap() topo.Fence { return l.LockDescriptor }

func (l *closedAsLost) Check(ctx context.Context) error { return asLost(l.LockDescriptor.Check(ctx)) }

func (l *closedAsLost) Unlock(ctx context.Context) error { return asLost(l.LockDescriptor.Unlock(ctx)) }

// asLost turns a Closed error into LockLost.
func asLost(err error) error {
	var te *topo.Error
	if errors.As(err, &te) && te.Code == topo.Closed {
		return topo.NewError(topo.LockLost, te.Path)
	}
	return err
}

// Unwrap returns the real descriptor (see fencedLock.Unwrap).
func (l *lenientUnlock) Unwrap() topo.Fence { return l.LockDescriptor }

func (l *lenientUnlock) Unlock(ctx context.Context) error {
	_ = l.LockDescriptor.Unlock(ctx)
	return nil
}

// laggingCheck reports a lost lock as held for 1 s after it first saw the
// loss.
type laggingCheck struct {
	topo.LockDescriptor
	mu       sync.Mutex
	lostSeen time.Time
}

// Unwrap returns the real descriptor (see fencedLock.Unwrap).
func (l *laggingCheck) Unwrap() topo.Fence { return l.LockDescriptor }

func (l *laggingCheck) Check(ctx context.Context) error {
	err := l.LockDescriptor.Check(ctx)
	if !topo.IsErrType(err, topo.LockLost) {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostSeen.IsZero() {
		l.lostSeen = time.Now()
	}
	if time.Since(l.lostSeen) < time.Second {
		return nil
	}
	return err
}

// staleUnlock: the Unlock of a lost lock releases whoever holds the
// directory's lock now, and reports success.
type staleUnlock struct {
	topo.LockDescriptor
	s   *store
	key string
}

// Unwrap returns the real descriptor (see fencedLock.Unwrap).
func (l *staleUnlock) Unwrap() topo.Fence { return l.LockDescriptor }

func (l *staleUnlock) Unlock(ctx context.Context) error {
	err := l.LockDescriptor.Unlock(ctx)
	if !topo.IsErrType(err, topo.LockLost) {
		return err
	}
	l.s.mu.Lock()
	cur := l.s.held[l.key]
	l.s.mu.Unlock()
	if cur != nil && cur != l.LockDescriptor {
		_ = cur.Unlock(ctx)
	}
	return nil
}

func (c *conn) Watch(ctx context.Context, p string) (*topo.WatchData, <-chan *topo.WatchData, error) {
	if err := c.early(p, func() error { _, err := topo.CleanFilePath(p); return err }); err != nil {
		return nil, nil, err
	}
	cur, ch, err := c.Conn.Watch(ctx, p)
	if (c.name != "watch-silent-delete" && c.name != "txn-unwatched") || err != nil {
		return cur, ch, err
	}
	out := make(chan *topo.WatchData)
	go func() {
		defer close(out)
		for wd := range ch {
			if c.name == "watch-silent-delete" && topo.IsErrType(wd.Err, topo.NoNode) {
				continue
			}
			if c.name == "txn-unwatched" && wd.Err == nil && c.store.txnWrote(p, wd.Contents) {
				continue
			}
			out <- wd
		}
	}()
	return cur, out, nil
}

func (c *conn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	if err := c.early(prefix, nil); err != nil {
		return nil, nil, err
	}
	init, ch, err := c.Conn.WatchRecursive(ctx, prefix)
	if err != nil || (c.name != "watchrecursive-ends-on-delete" && c.name != "watchrecursive-forgets") {
		return init, ch, err
	}
	out := make(chan *topo.WatchDataRecursive)
	go func() {
		defer func() {
			for range ch {
			}
		}()
		defer close(out)
		deleted := map[string]bool{}
		for wd := range ch {
			if c.name == "watchrecursive-forgets" {
				if deleted[wd.Path] && wd.Err == nil {
					continue
				}
				if topo.IsErrType(wd.Err, topo.NoNode) {
					deleted[wd.Path] = true
				}
			}
			out <- wd
			if c.name == "watchrecursive-ends-on-delete" && wd.Err != nil {
				return
			}
		}
	}()
	return init, out, nil
}

func (c *conn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	if err := c.early(name, nil); err != nil {
		return nil, err
	}
	p, err := c.Conn.NewLeaderParticipation(name, id)
	if err != nil {
		return p, err
	}
	switch c.name {
	case "leadership-never-cancelled":
		return &uncancelledLeader{LeaderParticipation: p}, nil
	case "leadership-cancelled-late":
		return &lateLeader{LeaderParticipation: p}, nil
	case "nested-elections-leak":
		return &leakyElection{LeaderParticipation: p, c: c, name: strings.Trim(name, "/")}, nil
	case "newleader-latest-only":
		return &latestOnlyLeader{LeaderParticipation: p}, nil
	case "term-token-repeats", "term-after-stop", "done-never-closes", "done-only-on-release":
		return &termMutant{LeaderParticipation: p, c: c, election: strings.Trim(name, "/")}, nil
	}
	return p, nil
}

// termMutant mutates the terms of a participation: term-token-repeats
// gives every term the election's first token, term-after-stop keeps
// returning the last term after Stop, done-never-closes gives terms a Done
// that never closes, done-only-on-release one that closes on Stop only.
// Within one real term it returns one wrapper, so a term is one Fence.
type termMutant struct {
	topo.LeaderParticipation
	c        *conn
	election string

	mu      sync.Mutex
	real    topo.Fence // the real term last wrapped
	wrapped *fencedTerm
	stopped bool
}

func (p *termMutant) Term() (topo.Fence, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped && p.c.name == "term-after-stop" && p.wrapped != nil {
		return p.wrapped, nil
	}
	f, err := p.LeaderParticipation.Term()
	if err != nil {
		return nil, err
	}
	if p.wrapped != nil && p.real.Token() == f.Token() && p.real.Done() == f.Done() {
		return p.wrapped, nil
	}
	w := &fencedTerm{Fence: f, token: f.Token()}
	switch p.c.name {
	case "term-token-repeats":
		w.token = p.c.store.firstToken("election:"+p.election, f.Token())
	case "done-never-closes", "done-only-on-release":
		w.done = make(chan struct{})
	}
	p.real, p.wrapped = f, w
	return w, nil
}

func (p *termMutant) Stop() {
	p.LeaderParticipation.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.c.name == "done-only-on-release" && p.wrapped != nil {
		p.wrapped.once.Do(func() { close(p.wrapped.done) })
	}
}

// fencedTerm is a term with a mutated token or Done (nil: the real one).
type fencedTerm struct {
	topo.Fence
	token int64
	done  chan struct{}
	once  sync.Once
}

func (f *fencedTerm) Token() int64 { return f.token }

func (f *fencedTerm) Done() <-chan struct{} {
	if f.done == nil {
		return f.Fence.Done()
	}
	return f.done
}

// Unwrap returns the real term (see fencedLock.Unwrap).
func (f *fencedTerm) Unwrap() topo.Fence { return f.Fence }

// Txn applies the transaction mutants.
func (c *conn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	if err := c.early("", nil); err != nil {
		return nil, err
	}
	switch c.name {
	case "txn-writes-first":
		return c.txnWritesFirst(ctx, ops)
	case "txn-partial-on-failure":
		return c.txnPartial(ctx, ops)
	case "ifheld-ignores-fence":
		return c.txnIgnoreFence(ctx, ops)
	case "txn-index-off":
		vs, err := c.Conn.Txn(ctx, ops...)
		var te *topo.TxnError
		if errors.As(err, &te) && te.Index > 0 {
			return nil, &topo.TxnError{Index: 0, Kind: te.Kind, Err: te.Err}
		}
		return vs, err
	case "txn-read-then-write":
		return c.txnReadThenWrite(ctx, ops)
	case "txn-unwatched":
		c.store.recordTxn(ops)
		return c.Conn.Txn(ctx, ops...)
	}
	return c.Conn.Txn(ctx, ops...)
}

// at runs ops through the real Txn and renumbers a *TxnError it returns
// from its position in ops to index[position] of the caller's
// transaction, with the kind of the caller's op.
func (c *conn) at(ctx context.Context, orig []topo.TxnOp, index []int, ops ...topo.TxnOp) ([]topo.Version, error) {
	vs, err := c.Conn.Txn(ctx, ops...)
	var te *topo.TxnError
	if errors.As(err, &te) && te.Index >= 0 && te.Index < len(index) {
		i := index[te.Index]
		return nil, &topo.TxnError{Index: i, Kind: orig[i].Kind, Err: te.Err}
	}
	return vs, err
}

// txnWritesFirst applies each write on its own, in order, then checks the
// conditions: a failing condition leaves the writes applied.
func (c *conn) txnWritesFirst(ctx context.Context, ops []topo.TxnOp) ([]topo.Version, error) {
	if _, err := backendkit.CheckTxn(ctx, ops); err != nil {
		return nil, err
	}
	vs := make([]topo.Version, len(ops))
	var conds []topo.TxnOp
	var condIndex []int
	for i, op := range ops {
		if op.Kind.IsCondition() {
			conds, condIndex = append(conds, op), append(condIndex, i)
			continue
		}
		v, err := c.at(ctx, ops, []int{i}, op)
		if err != nil {
			return nil, err
		}
		vs[i] = v[0]
	}
	if len(conds) > 0 {
		if _, err := c.at(ctx, ops, condIndex, conds...); err != nil {
			return nil, err
		}
	}
	return vs, nil
}

// txnPartial runs the real transaction; when an op fails, it applies the
// writes before it anyway, as a store applying ops one by one would.
func (c *conn) txnPartial(ctx context.Context, ops []topo.TxnOp) ([]topo.Version, error) {
	vs, err := c.Conn.Txn(ctx, ops...)
	var te *topo.TxnError
	if errors.As(err, &te) && failureCode(err) && te.Index <= len(ops) {
		for j, op := range ops[:te.Index] {
			if !op.Kind.IsCondition() {
				_, _ = c.at(ctx, ops, []int{j}, op)
			}
		}
	}
	return vs, err
}

// failureCode reports whether err is a condition's failure (not bad input).
func failureCode(err error) bool {
	for _, code := range []topo.ErrorCode{topo.NodeExists, topo.NoNode, topo.BadVersion, topo.LockLost} {
		if topo.IsErrType(err, code) {
			return true
		}
	}
	return false
}

// txnIgnoreFence drops the IfHeld ops (after the argument checks).
func (c *conn) txnIgnoreFence(ctx context.Context, ops []topo.TxnOp) ([]topo.Version, error) {
	if _, err := backendkit.CheckTxn(ctx, ops); err != nil {
		return nil, err
	}
	var kept []topo.TxnOp
	var index []int
	for i, op := range ops {
		if op.Kind != topo.TxnIfHeld {
			kept, index = append(kept, op), append(index, i)
		}
	}
	vs := make([]topo.Version, len(ops))
	if len(kept) == 0 {
		return vs, nil
	}
	got, err := c.at(ctx, ops, index, kept...)
	if err != nil {
		return nil, err
	}
	for k, i := range index {
		vs[i] = got[k]
	}
	return vs, nil
}

// txnReadThenWrite emulates a transaction with a read of each condition
// (and of each write's implied condition), each a transaction of its own,
// then the writes, unconditionally, one by one. Alone it behaves; against
// concurrent writers it is not atomic.
func (c *conn) txnReadThenWrite(ctx context.Context, ops []topo.TxnOp) ([]topo.Version, error) {
	if _, err := backendkit.CheckTxn(ctx, ops); err != nil {
		return nil, err
	}
	for i, op := range ops {
		cond, ok := impliedCondition(op)
		if !ok {
			continue
		}
		if _, err := c.at(ctx, ops, []int{i}, cond); err != nil {
			return nil, err
		}
	}
	runtime.Gosched()
	vs := make([]topo.Version, len(ops))
	for i, op := range ops {
		var w topo.TxnOp
		switch op.Kind {
		case topo.TxnCreate, topo.TxnUpdate:
			w = topo.UpdateOp(op.Path, op.Contents, nil)
		case topo.TxnDelete:
			w = topo.DeleteOp(op.Path, nil)
		default:
			continue
		}
		v, err := c.at(ctx, ops, []int{i}, w)
		if err != nil {
			return nil, err
		}
		vs[i] = v[0]
		runtime.Gosched()
	}
	return vs, nil
}

// impliedCondition returns the condition op checks: itself for a
// condition, and the condition a write carries.
func impliedCondition(op topo.TxnOp) (topo.TxnOp, bool) {
	switch op.Kind {
	case topo.TxnCreate:
		return topo.IfAbsent(op.Path), true
	case topo.TxnUpdate:
		if op.Version == nil {
			return topo.TxnOp{}, false
		}
		return topo.IfVersion(op.Path, op.Version), true
	case topo.TxnDelete:
		if op.Version == nil {
			return topo.IfPresent(op.Path), true
		}
		return topo.IfVersion(op.Path, op.Version), true
	}
	return op, true
}

// uncancelledLeader hands out a leadership context that never ends.
type uncancelledLeader struct{ topo.LeaderParticipation }

func (p *uncancelledLeader) WaitForLeadership() (context.Context, error) {
	ctx, err := p.LeaderParticipation.WaitForLeadership()
	if err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

// lateLeader hands out a leadership context cancelled 1 s after the real
// one.
type lateLeader struct {
	topo.LeaderParticipation
	mu   sync.Mutex
	real context.Context
	late context.Context
}

func (p *lateLeader) WaitForLeadership() (context.Context, error) {
	ctx, err := p.LeaderParticipation.WaitForLeadership()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.real != ctx {
		late, cancel := context.WithCancel(context.WithoutCancel(ctx))
		context.AfterFunc(ctx, func() { time.AfterFunc(time.Second, cancel) })
		p.real, p.late = ctx, late
	}
	return p.late, nil
}

// leakyElection: an election without a leader of its own reports the
// leader of a nested election (as a prefix scan over elections/<name>/
// would).
type leakyElection struct {
	topo.LeaderParticipation
	c    *conn
	name string
}

func (p *leakyElection) GetCurrentLeaderID(ctx context.Context) (string, error) {
	id, err := p.LeaderParticipation.GetCurrentLeaderID(ctx)
	if err != nil || id != "" {
		return id, err
	}
	entries, err := p.c.Conn.ListDir(ctx, "elections/"+p.name, true)
	if err != nil {
		return "", nil
	}
	for _, e := range entries {
		if e.Type != topo.TypeDirectory {
			continue
		}
		nested, err := p.c.Conn.NewLeaderParticipation(p.name+"/"+e.Name, "probe")
		if err != nil {
			continue
		}
		if id, err := nested.GetCurrentLeaderID(ctx); err == nil && id != "" {
			return id, nil
		}
	}
	return "", nil
}

// latestOnlyLeader: WaitForNewLeader keeps only the latest id until the
// reader takes it.
type latestOnlyLeader struct{ topo.LeaderParticipation }

func (p *latestOnlyLeader) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	in, err := p.LeaderParticipation.WaitForNewLeader(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan string)
	go func() {
		defer close(out)
		var latest string
		have := false
		for {
			var send chan string
			if have {
				send = out
			}
			select {
			case id, ok := <-in:
				if !ok {
					return
				}
				latest, have = id, true
			case send <- latest:
				have = false
			}
		}
	}()
	return out, nil
}
