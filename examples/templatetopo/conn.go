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

// MaxTxnOps is the most operations one Txn takes. The store itself has no
// limit; a real store does (etcd: --max-txn-ops, 128 by default; Consul:
// 64), and a backend checks it before sending anything, with
// backendkit.TxnTooLarge. This one is here to show where.
const MaxTxnOps = 128

// STEP 1 of a backend: register the factory in init. MustRegisterFactory
// panics (naming the factory) if the name is taken, so a build that links
// two backends of one name fails at start instead of opening the wrong one.
func init() { topo.MustRegisterFactory(FactoryName, NewFactory()) }

// Factory opens Conns to in-process Stores, one Store per server address,
// created on first use: Conns of one Factory with the same address share a
// store, whatever their roots. The registered "template" factory is one
// such Factory, so within one process (for example a custom topoctl run
// in-process by its tests) every user of the name shares its stores.
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
	s := f.stores[address]
	if s == nil {
		s = NewStore()
		f.stores[address] = s
	}
	return s
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

// Conn is a topo.Conn on a Store, rooted at a directory of it. It is safe
// for concurrent use.
//
// The Conn has a link to the store that Cut breaks and Heal restores, and
// a session that holds its lock and election entries (see the package
// doc).
type Conn struct {
	store *Store
	// root is the canonical root ("" for the store's root); every path is
	// joined to it (Conn.full).
	root string
	// closed is set by Close; closing is closed by it (waiters and watches
	// select on it).
	closed    atomic.Bool
	closing   chan struct{}
	closeOnce sync.Once

	// The link and the session, guarded by store.mu (the one mutex).
	cut    bool
	healed chan struct{} // closed by Heal; replaced by Cut
	sess   *session      // the current session; nil before the first lock or after it ended
	// adopted are sessions of other Conns whose candidacies c resumed
	// (ResumeLeaderParticipation); c ends them as it ends its own.
	adopted map[*session]struct{}
	// orphans are the sessions c gave up when it was cut (Cut), which it
	// ends on Heal unless another Conn adopted them.
	orphans []*session

	// Claims are c's locks and elections: eng, run over c's driver
	// (driver.go).
	claims.Claims
	eng *claims.Engine
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
	s.mu.Lock()
	defect := s.defect
	s.mu.Unlock()
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
func (c *Conn) fullPrefix(prefix string) string {
	if c.root == "" {
		return prefix
	}
	return c.root + "/" + prefix
}

// rel returns the path relative to the root of a store path below it.
func (c *Conn) rel(full string) string {
	if c.root == "" {
		return full
	}
	return full[len(c.root)+1:]
}

// STEP 2: one place where every request "goes to the store".
//
// do runs req against the store as one request: under the store's mutex,
// which makes each request atomic and the whole store linearizable. It is
// where a networked backend sends its request and waits for the answer. It
// refuses the request, without running it, when the Conn is closed
// (errConnClosed), when the link is cut or the store is restarting
// (errUnreachable). The caller maps what it returns with mapErr.
func (c *Conn) do(req func(s *Store) error) error {
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
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

// session returns the Conn's live session, opening a new one when there is
// none (the first lock or campaign, or after the last session ended). Called
// inside a request (store.mu held).
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

// STEP 3: map the store's errors, in one place, through
// backendkit.MapError: it passes *topo.Error values through, turns an
// ended context into Timeout or Interrupted, a closed Conn into Closed, and
// asks classify for the rest.
func (c *Conn) mapErr(ctx context.Context, err error, path string) error {
	return backendkit.MapError(ctx, err, path, c.closed.Load(), classify)
}

// classify is the store-specific part of the error mapping: one store
// error, one code. Anything unknown is Unavailable (the outcome of the
// call is unknown: it may be retried).
func classify(err error) topo.ErrorCode {
	switch {
	case errors.Is(err, errNotFound):
		return topo.NoNode
	case errors.Is(err, errExists):
		return topo.NodeExists
	case errors.Is(err, errVersion):
		return topo.BadVersion
	case errors.Is(err, errSessionEnded):
		return topo.LockLost
	case errors.Is(err, errCompacted):
		return topo.Compacted
	case errors.Is(err, errConnClosed):
		return topo.Closed
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
		s := c.store
		s.mu.Lock()
		defer s.mu.Unlock()
		c.closed.Store(true)
		close(c.closing)
		c.endSessions()
	})
}

// ExpireSession makes the store end c's current session (and any session
// c adopted with ResumeLeaderParticipation), as a store does
// when a session's lease lapses: every lock and leadership held or awaited
// through it is lost (Check and Unlock report LockLost, Done closes,
// leadership contexts are cancelled, waiting Lock calls return LockLost)
// and others can take them. It returns once c has observed the loss, which
// here is before the store hands anything on (see the package doc). c
// opens a new session for its next lock or campaign. It is the
// conformance suite's Options.ExpireSession.
func (c *Conn) ExpireSession() {
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
	c.endSessions()
}

// SessionTimeout is how long the store keeps the session of a Conn that
// was cut off (Conn.Cut) before it ends it: meanwhile its entries stay in
// their queues, and another Conn can take its candidacies back
// (ResumeLeaderParticipation), as a restarted process does while its old
// lease lives. It is the only clock in the store.
const SessionTimeout = time.Second

// Cut breaks c's link to the store, as a network partition does: c's
// requests fail with Unavailable (nothing is sent) and its watches stop
// receiving events until Heal. c learns of the break at once and gives up
// every claim of its sessions (Done closes, Check and Unlock say LockLost,
// leadership contexts are cancelled, waiting Lock calls return LockLost);
// the store ends those sessions SessionTimeout later, unless another Conn
// resumed them, and only then hands their locks and leadership on. So the
// cut-off holder always knows first. It is the conformance suite's
// Partitioned.Cut. Idempotent.
func (c *Conn) Cut() {
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
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
// up, and c's next lock or campaign opens a new session. c ends the
// sessions it gave up at the Cut that nobody resumed (their claims ended
// then), so that nothing of them is left behind, as a client that
// reconnects after its session was given up closes it. Idempotent.
func (c *Conn) Heal() {
	s := c.store
	s.mu.Lock()
	defer s.mu.Unlock()
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

// observe runs read as a request of a watch (which, unlike do, Restart does
// not refuse: a watch is one long request), waiting for Heal while the link
// is cut. It returns the channel that the next change of the store closes,
// or ok false when ctx ended or the Conn was closed first.
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
