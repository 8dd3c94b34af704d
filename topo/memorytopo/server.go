package memorytopo

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// Name is the name memorytopo registers its process-wide Factory under.
const Name = "memory"

// Default option values, used for zero fields of Options.
const (
	// DefaultSessionTTL is the TTL of a Conn's session, which Lock and
	// elections use: 30 s.
	DefaultSessionTTL = 30 * time.Second
	// DefaultNamedLockTTL is the TTL of LockName locks: 24 h.
	DefaultNamedLockTTL = 24 * time.Hour
	// DefaultHistory is how many versions of each file GetVersion can
	// return (the current one included): 16.
	DefaultHistory = 16
)

func init() { topo.MustRegisterFactory(Name, NewFactory()) }

// Options configures a Factory. Zero fields take the defaults above.
type Options struct {
	// SessionTTL is how long after renewal stops (see OpKeepAlive and
	// Conn.PauseKeepAlive) a Conn's session lapses, dropping the locks taken
	// with Lock and TryLock and its election entries.
	SessionTTL time.Duration
	// NamedLockTTL is the TTL of locks taken with LockName.
	NamedLockTTL time.Duration
	// History is how many versions of each file are kept for GetVersion,
	// the current one included (at least 1). Older versions report
	// Compacted.
	History int
	// Defect makes the claims engine of every Conn deliberately wrong in
	// one way, for the mutation kit (topo/test/mutation) only. Zero: none.
	Defect claims.Defect
}

func (o Options) withDefaults() Options {
	o.SessionTTL = backendkit.OrDefault(o.SessionTTL, DefaultSessionTTL)
	o.NamedLockTTL = backendkit.OrDefault(o.NamedLockTTL, DefaultNamedLockTTL)
	o.History = backendkit.OrDefault(o.History, DefaultHistory)
	return o
}

// Factory creates Conns to in-memory stores. Each distinct serverAddress
// passed to Create is a separate store, created on first use and kept for
// the Factory's lifetime; root prefixes every path within it. Fault
// injection and call counters set on a Factory apply to all its Conns. A
// Factory is safe for concurrent use.
type Factory struct {
	opts Options

	mu     sync.Mutex
	stores map[string]*store

	faultMu          sync.Mutex // serialises updateFaults
	faultState       atomic.Pointer[faultState]
	keepAliveBlocked atomic.Bool
	counters         [numOperations]counter
}

// NewFactory returns a Factory with default Options and no stores.
func NewFactory() *Factory { return NewFactoryWithOptions(Options{}) }

// NewFactoryWithOptions returns a Factory configured by opts (zero fields
// take the defaults).
func NewFactoryWithOptions(opts Options) *Factory {
	return &Factory{opts: opts.withDefaults(), stores: map[string]*store{}}
}

// Create implements topo.Factory: it returns a new Conn, with its own
// simulated session, to the store named serverAddress (any string; "" is a
// valid name), rooted at root. cell is only informative. It returns
// InvalidPath when root is not a valid directory path (topo.CleanDirPath).
func (f *Factory) Create(cell, serverAddress, root string) (topo.Conn, error) {
	return f.NewConn(serverAddress, root)
}

// NewConn is Create with a concrete result type, for tests that need
// Conn's extra methods (ExpireSession, PauseKeepAlive, Partition). Each
// call opens a new client with its own session; NewServer's global cell is
// NewConn("", "/global"), its cells NewConn("", "/<cell>").
func (f *Factory) NewConn(serverAddress, root string) (*Conn, error) {
	r, err := topo.CleanDirPath(root)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	s, ok := f.stores[serverAddress]
	if !ok {
		s = newStore(f)
		f.stores[serverAddress] = s
	}
	f.mu.Unlock()
	s.lock()
	// A root inside a queue sees entries at paths without a locks or
	// elections segment: its store places every entry at once.
	if mayBeEntry(r) {
		s.placeAtOnce = true
		s.placeAll()
	}
	idx := s.index(r)
	s.mu.Unlock()
	c := &Conn{
		f:      f,
		s:      s,
		root:   r,
		files:  idx.nodes,
		queues: idx,
		done:   make(chan struct{}),
		leases: map[*lease]struct{}{},
	}
	c.eng = claims.New(driver{c}, claims.Options{Defect: f.opts.Defect, Hooks: c.claimHooks()})
	c.Claims = c.eng
	return c, nil
}

// allStores returns f's stores.
func (f *Factory) allStores() []*store {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Values(f.stores))
}

// refreshLeases re-evaluates every lease's renewal after a fault change.
func (f *Factory) refreshLeases() {
	for _, s := range f.allStores() {
		s.lock()
		for l := range s.leases {
			s.refreshLease(l)
		}
		s.mu.Unlock()
	}
}

// NewServer returns a topo.Server over a fresh in-memory store (its own
// Factory, with default Options): the global cell is the store address ""
// rooted at "/global" and, for each name in cells, a CellInfo record
// (server address "", root "/<cell>") makes ConnForCell work. So
// f.NewConn("", "/global") opens one more client of the global cell, with
// its own session (package memtest does that, and more, for a test).
// Duplicate cell names are created once. It panics if a cell name is
// invalid (empty, containing "/", or "global"), as a test setup error. ctx
// is used only for its values; the setup is never cancelled.
func NewServer(ctx context.Context, cells ...string) *topo.Server {
	ts, _ := NewServerAndFactory(ctx, cells...)
	return ts
}

// NewServerAndFactory is NewServer that also returns the Factory, for fault
// injection and call counters. The counters start at zero once the cells'
// records are written, so they count only the caller's calls.
func NewServerAndFactory(ctx context.Context, cells ...string) (*topo.Server, *Factory) {
	return NewServerAndFactoryWithOptions(ctx, Options{}, cells)
}

// NewServerAndFactoryWithOptions is NewServerAndFactory with the Factory
// configured by opts (as NewFactoryWithOptions: SessionTTL, NamedLockTTL,
// History; zero fields take the defaults) and the Server by sopts, for
// example topo.WithMiddleware, which decorates the global cell and every
// cell. The Server names its backend Name ("memory") to its middlewares.
// A topo.WithFactory in sopts would open the cells from another store:
// do not pass one. It panics on an invalid cell name, as NewServer does.
func NewServerAndFactoryWithOptions(ctx context.Context, opts Options, cells []string, sopts ...topo.ServerOption) (*topo.Server, *Factory) {
	f := NewFactoryWithOptions(opts)
	global, err := f.Create(topo.GlobalCell, "", "/"+topo.GlobalCell)
	if err != nil {
		panic("memorytopo: " + err.Error())
	}
	ts := topo.NewServer(f, global, append([]topo.ServerOption{topo.WithImplementationName(Name)}, sopts...)...)
	ctx = context.WithoutCancel(ctx)
	seen := map[string]bool{}
	for _, cell := range cells {
		if seen[cell] {
			continue
		}
		seen[cell] = true
		if err := ts.CreateCellInfo(ctx, cell, &topodatapb.CellInfo{ServerAddress: "", Root: "/" + cell}); err != nil {
			panic("memorytopo: NewServer: cell " + cell + ": " + err.Error())
		}
	}
	// The caller counts its own calls, not the set-up's.
	f.ResetCallCounts()
	return ts, f
}

// Conn is a connection to one in-memory store; it implements topo.Conn
// (see there for the contract). Each Conn has its own simulated session,
// which holds its locks (Lock, TryLock) and election entries. Safe for
// concurrent use.
type Conn struct {
	f    *Factory
	s    *store
	root string
	// files and queues are root's index (see store.roots); guarded by the
	// store's mu.
	files  map[string]*node
	queues *rootIndex

	closed    atomic.Bool
	closeOnce sync.Once
	done      chan struct{} // closed by Close

	// cut is non-nil while c is partitioned (Partition); closed by Heal.
	cut atomic.Pointer[chan struct{}]

	// Claims are c's locks and elections: those of eng, the claims
	// engine over c's driver (driver.go), whose hooks count each call and
	// inject faults (claimHooks). Each call meets the faults of its
	// Operation (OpLock, OpUnlock, OpCampaign, ...).
	claims.Claims
	eng *claims.Engine

	// Guarded by s.mu.
	session         *lease
	leases          map[*lease]struct{}
	keepAlivePaused bool
	partitioned     bool
}

var _ topo.Conn = (*Conn)(nil)

// Factory returns the Factory that created c.
func (c *Conn) Factory() *Factory { return c.f }

// Close implements topo.Conn.Close: it ends c's session and leases at once,
// releasing its locks (their Check then returns Closed) and election entries
// (cancelling leadership contexts), ends active watches with Interrupted and
// makes every later call return Closed. Idempotent.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		c.eng.Close()
		c.closed.Store(true)
		close(c.done)
		c.ExpireSession()
	})
}

// ExpireSession simulates the loss of c's session, as when a store expires
// a client that stopped answering: every lock c holds or waits for (Lock,
// TryLock, LockWithTTL, LockName) and every election entry of c is dropped
// at once; their Done channels close, their Check returns LockLost, their
// Unlock returns LockLost, IfHeld on them fails with LockLost, leadership
// contexts are cancelled (Term then returns NotLeader) and other
// participants take over. c
// itself keeps working: later calls start a new session. Safe for concurrent
// use; a no-op on a closed Conn.
func (c *Conn) ExpireSession() {
	c.s.lock()
	defer c.s.mu.Unlock()
	for l := range c.leases {
		c.s.revokeLease(l)
	}
	c.session = nil
}

// refreshLeases re-evaluates the renewal of every lease of c. Call with
// the store's mu held for writing.
func (c *Conn) refreshLeases() {
	for l := range c.leases {
		c.s.refreshLease(l)
	}
}

// PauseKeepAlive stops the simulated renewal of c's session and lock
// leases, as when c's process freezes: each lease lapses its TTL later
// (SessionTTL for Lock, TryLock and elections; the ttl of LockWithTTL;
// NamedLockTTL for LockName) unless ResumeKeepAlive comes first. When a
// lease lapses its locks report LockLost and its leadership is cancelled,
// as with ExpireSession. Calls on c keep working. Safe for concurrent use.
func (c *Conn) PauseKeepAlive() { c.setKeepAlivePaused(true) }

// ResumeKeepAlive restarts the renewal stopped by PauseKeepAlive; leases
// that have not lapsed yet are kept. Safe for concurrent use.
func (c *Conn) ResumeKeepAlive() { c.setKeepAlivePaused(false) }

// Partition cuts c off from its store, as a network partition between one
// client and its server would: renewal of c's session and lock leases stops
// (each lapses its TTL later, exactly as with PauseKeepAlive, and the store
// then hands c's locks and leadership to others at the same moment c's
// descriptors report LockLost; its leadership contexts end earlier, see
// below),
// and every call on c, its lock descriptors and its participations that
// starts from now on blocks until Heal (it then proceeds), its context ends
// (Timeout or Interrupted, nothing done; but an Unlock so given up
// releases its lock all the same, its removal from the store retried in
// the background, as a real backend's Unlock does when its request gets
// no answer) or c is closed (Closed). Calls
// already past their start, and established Watch, WatchRecursive,
// WaitForNewLeader and Observe streams, are not affected. A quarter of
// the TTL before the store lapses a session of c, c notices: the
// leadership contexts of c's terms on it are cancelled then, before the
// store hands leadership over (the client-side safety margin of real
// backends); the entries stay in the store until the lapse. Idempotent;
// safe for concurrent use.
func (c *Conn) Partition() { c.setPartitioned(true) }

// Heal ends Partition: blocked calls proceed and renewal resumes; leases
// that have not lapsed yet are kept. Idempotent; safe for concurrent use.
func (c *Conn) Heal() { c.setPartitioned(false) }

// setPartitioned starts (on) or ends a partition of c, unless it already
// is in that state: the cut calls wait on, closed when it ends, and the
// renewal of c's leases.
func (c *Conn) setPartitioned(on bool) {
	c.s.lock()
	defer c.s.mu.Unlock()
	if c.partitioned == on {
		return
	}
	c.partitioned = on
	if on {
		ch := make(chan struct{})
		c.cut.Store(&ch)
	} else if ch := c.cut.Swap(nil); ch != nil {
		close(*ch)
	}
	c.refreshLeases()
}

// waitCut blocks while c is partitioned.
func (c *Conn) waitCut(ctx context.Context, p string) error {
	if ch := c.cut.Load(); ch != nil {
		return await(ctx, *ch, c.done, p)
	}
	return nil
}

func (c *Conn) setKeepAlivePaused(paused bool) {
	c.s.lock()
	defer c.s.mu.Unlock()
	c.keepAlivePaused = paused
	c.refreshLeases()
}

// full returns the store path of the canonical path p.
func (c *Conn) full(p string) string { return joinRoot(c.root, p) }

// fullPrefix returns the store prefix of the canonical prefix p.
func (c *Conn) fullPrefix(p string) string {
	if c.root == "" {
		return p
	}
	return c.root + "/" + p
}

// rel returns the canonical path of the store path full.
func (c *Conn) rel(full string) string {
	if c.root == "" {
		return full
	}
	if full == c.root {
		return ""
	}
	return full[len(c.root)+1:]
}

// closedErr returns Closed for p once c is closed.
func (c *Conn) closedErr(p string) error {
	if c.closed.Load() {
		return topo.NewError(topo.Closed, p)
	}
	return nil
}

// begin starts a call of op on the caller's path raw: it is counted, its
// context is checked, clean checks raw and returns the canonical path, then
// enter runs. Its errors are those of the steps, in that order.
func (c *Conn) begin(ctx context.Context, op Operation, raw string, clean func(string) (string, error)) (string, error) {
	c.f.count(op)
	if err := backendkit.CheckContext(ctx, raw); err != nil {
		return "", err
	}
	p, err := clean(raw)
	if err != nil {
		return "", err
	}
	return p, c.enter(ctx, op, p)
}

// enter runs the common prologue of a call of op on the canonical path p
// (a transaction: OpTxn, "" and its ops txn), once its context and input
// were checked (backendkit's check order: context, path, reserved names,
// value, version, then Closed): the Closed check, then the partition
// (Conn.Partition), then injected faults, then Closed again (the Conn may
// have closed while the call waited).
func (c *Conn) enter(ctx context.Context, op Operation, p string, txn ...backendkit.TxnOp) error {
	if c.cut.Load() == nil && c.f.faultState.Load() == nil {
		return c.closedErr(p) // nothing to wait for: the common case
	}
	if err := c.closedErr(p); err != nil {
		return err
	}
	if err := c.waitCut(ctx, p); err != nil {
		return err
	}
	if err := c.f.faultState.Load().inject(ctx, op, p, txn, c.done); err != nil {
		return err
	}
	return c.closedErr(p)
}
