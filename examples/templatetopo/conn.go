package templatetopo

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// FactoryName is the name this backend registers with topo: the value of
// topoctl's --topo-implementation and of OpenServer's implementation.
const FactoryName = "template"

// MaxTxnOps is the most operations one Txn takes. The store has no limit;
// a real store does (etcd: 128 by default; Consul: 64), which a backend
// checks before sending anything (backendkit.TxnTooLarge), as here.
const MaxTxnOps = 128

// STEP 1 of a backend: register the factory in init. MustRegisterFactory
// panics (naming the factory) if the name is taken, so a build that links
// two backends of one name fails at start instead of opening the wrong one.
func init() { topo.MustRegisterFactory(FactoryName, NewFactory()) }

// Factory opens Conns to in-process Stores, one Store per server address,
// created on first use: Conns of one Factory with the same address share a
// store, whatever their roots (so do all users of the registered
// "template" factory in one process).
type Factory struct {
	mu     sync.Mutex
	stores map[string]*Store
}

// NewFactory returns a Factory with no stores yet.
func NewFactory() *Factory { return &Factory{stores: map[string]*Store{}} }

// Store returns the store at address, creating it on first use.
func (f *Factory) Store(address string) *Store {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stores[address] == nil {
		f.stores[address] = NewStore()
	}
	return f.stores[address]
}

// Create implements topo.Factory: a Conn to the store at serverAddress
// (any string, "" included), rooted at root. The cell is not used. It
// returns an InvalidPath *topo.Error for a malformed root.
func (f *Factory) Create(cell, serverAddress, root string) (topo.Conn, error) {
	c, err := f.Store(serverAddress).NewConn(root)
	if err != nil {
		return nil, err // not a nil *Conn in a non-nil topo.Conn
	}
	return c, nil
}

// Conn is a topo.Conn on a Store, rooted at a directory of it, with a link
// to the store that Cut breaks and Heal restores and a session that holds
// its entries (see the package doc). It is safe for concurrent use.
type Conn struct {
	store     *Store
	root      string // canonical ("" for the store's root)
	closed    atomic.Bool
	closing   chan struct{} // closed by Close
	closeOnce sync.Once

	// Guarded by store.mu: the link; the current session (nil before the
	// first claim); the sessions of other Conns c resumed candidacies on,
	// which c ends as its own; those c gave up at a Cut, ended on Heal
	// unless adopted.
	cut     bool
	healed  chan struct{} // closed by Heal; replaced by Cut
	sess    *session
	adopted map[*session]struct{}
	orphans []*session

	claims.Claims // c's locks and elections: eng over c's driver
	eng           *claims.Engine
}

// NewConn returns a Conn to s rooted at root (a directory path; "" or "/"
// is the store's root). It returns an InvalidPath *topo.Error for a
// malformed root.
func (s *Store) NewConn(root string) (*Conn, error) {
	r, err := topo.CleanDirPath(root)
	if err != nil {
		return nil, err
	}
	healed := make(chan struct{})
	close(healed)
	unlock := s.lock()
	defect := s.defect
	unlock()
	c := &Conn{store: s, root: r, closing: make(chan struct{}), healed: healed, adopted: map[*session]struct{}{}}
	c.eng = claims.New(driver{c}, claims.Options{Defect: defect})
	c.Claims = c.eng
	return c, nil
}

// full returns the store path of p (a canonical path relative to the root).
func (c *Conn) full(p string) string {
	if p == "" {
		return c.root
	}
	return backendkit.JoinPath(c.root, p)
}

// fullPrefix returns the store prefix of a canonical List or WatchRecursive
// prefix.
func (c *Conn) fullPrefix(prefix string) string { return backendkit.JoinPath(c.root, prefix) }

// rel returns the path relative to the root of a store path below it.
func (c *Conn) rel(full string) string { return full[len(c.fullPrefix("")):] }

// STEP 2: one place where every request "goes to the store".
//
// do runs req as one request, under the store's mutex (atomic,
// linearizable): where a networked backend sends it and waits for the
// answer. It refuses it on a closed Conn (errConnClosed), a cut link or a
// restarting store (errUnreachable). The caller maps errors with mapErr.
func (c *Conn) do(req func(s *Store) error) error {
	s := c.store
	defer s.lock()()
	switch {
	case c.closed.Load():
		return errConnClosed
	case c.cut:
		return errUnreachable
	case s.refuse > 0:
		s.refuse--
		return errUnreachable
	}
	return req(s)
}

// session returns the Conn's live session, opening one when there is none.
// Called inside a request (store.mu held).
func (c *Conn) session(s *Store) *session {
	if c.sess == nil || c.sess.ended || c.sess.owner != c {
		c.sess = s.openSession(c)
	}
	return c.sess
}

// adopt makes c the owner of ss, a session another Conn opened (or
// adopted). Called inside a request.
func (c *Conn) adopt(ss *session) {
	if prev := ss.owner; prev != nil && prev != c {
		delete(prev.adopted, ss) // prev.sess stays, but session() sees it is no longer prev's
	}
	ss.owner = c
	if c.sess != ss {
		c.adopted[ss] = struct{}{}
	}
}

// endSessions ends every session c owns. Called with store.mu held.
func (c *Conn) endSessions() {
	s := c.store
	if c.sess != nil && c.sess.owner == c {
		s.endSession(c.sess)
	}
	for ss := range c.adopted {
		s.endSession(ss)
	}
	clear(c.adopted)
}

// STEP 3: map the store's errors in one place, backendkit.MapError
// (*topo.Error values pass; an ended context is Timeout or Interrupted, a
// closed Conn Closed; classify does the rest).
func (c *Conn) mapErr(ctx context.Context, err error, path string) error {
	return backendkit.MapError(ctx, err, path, c.closed.Load(), classify)
}

// classify maps one store error to one code; anything unknown is
// Unavailable (the outcome is unknown: it may be retried).
func classify(err error) topo.ErrorCode {
	for _, m := range []struct {
		err  error
		code topo.ErrorCode
	}{{errNotFound, topo.NoNode}, {errExists, topo.NodeExists}, {errVersion, topo.BadVersion},
		{errSessionEnded, topo.LockLost}, {errCompacted, topo.Compacted}, {errConnClosed, topo.Closed}} {
		if errors.Is(err, m.err) {
			return m.code
		}
	}
	return topo.Unavailable
}

// Close implements topo.Conn.Close: later calls return Closed, watches end
// with Interrupted, waiting Lock and WaitForLeadership calls return Closed,
// and the store ends the Conn's session, which releases its locks and
// leadership (their Done closes and leadership contexts are cancelled
// before anyone else can take them). Idempotent.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		c.eng.Close()
		defer c.store.lock()()
		c.closed.Store(true)
		close(c.closing)
		c.endSessions()
	})
}

// ExpireSession makes the store end c's current session and those it
// adopted, as when a lease lapses: every claim held or awaited through
// them is lost (Check and Unlock report LockLost, Done closes, leadership
// contexts are cancelled, waiting Lock calls return LockLost), c learning
// it before the store hands anything on. c opens a new session for its
// next claim. It is the suite's Options.ExpireSession.
func (c *Conn) ExpireSession() {
	defer c.store.lock()()
	c.endSessions()
}

// SessionTimeout is how long the store keeps the session of a Conn that
// was cut off (Conn.Cut) before it ends it: meanwhile its entries stay,
// and another Conn can resume its candidacies. The store's only clock.
const SessionTimeout = time.Second

// Cut breaks c's link to the store, as a partition does: c's requests
// fail with Unavailable and its watches receive nothing until Heal. c
// gives up every claim of its sessions at once (as ExpireSession); the
// store ends them SessionTimeout later, unless another Conn resumed them,
// and only then hands their claims on, so the cut-off holder knows first.
// It is the suite's Partitioned.Cut. Idempotent.
func (c *Conn) Cut() {
	s := c.store
	defer s.lock()()
	if c.cut {
		return
	}
	c.cut = true
	c.healed = make(chan struct{})
	if c.sess != nil && c.sess.owner == c {
		c.orphans = append(c.orphans, c.sess)
	}
	for ss := range c.adopted {
		c.orphans = append(c.orphans, ss)
	}
	for _, ss := range c.orphans {
		s.orphan(ss)
	}
	c.sess = nil
	clear(c.adopted)
}

// Heal restores c's link: requests reach the store again, watches catch
// up, c's next claim opens a new session, and c ends the sessions it gave
// up at the Cut that nobody resumed. Idempotent.
func (c *Conn) Heal() {
	s := c.store
	defer s.lock()()
	if !c.cut {
		return
	}
	c.cut = false
	close(c.healed)
	for _, ss := range c.orphans {
		if ss.owner == nil {
			s.endSession(ss)
		}
	}
	c.orphans = nil
}

// observe runs read as a request of a watch (one long request, which
// Restart does not refuse), waiting for Heal while the link is cut. It
// returns the channel the next change closes, or false when ctx ended or
// the Conn closed first.
func (c *Conn) observe(ctx context.Context, read func(s *Store)) (changed <-chan struct{}, ok bool) {
	s := c.store
	for {
		s.mu.Lock()
		if c.closed.Load() {
			s.mu.Unlock()
			return nil, false
		}
		if c.cut {
			healed := c.healed
			s.mu.Unlock()
			select {
			case <-healed:
				continue
			case <-ctx.Done():
			case <-c.closing:
			}
			return nil, false
		}
		read(s)
		changed = s.changed
		s.mu.Unlock()
		return changed, true
	}
}
