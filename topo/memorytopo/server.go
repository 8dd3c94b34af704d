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

// Defaults for zero fields of Options.
const (
	DefaultSessionTTL   = 30 * time.Second // Options.SessionTTL
	DefaultNamedLockTTL = 24 * time.Hour   // Options.NamedLockTTL
	DefaultHistory      = 16               // Options.History
)

func init() { topo.MustRegisterFactory(Name, NewFactory()) }

// Options configures a Factory. Zero fields take the Default values.
type Options struct {
	// SessionTTL is how long after renewal stops (see OpKeepAlive and
	// Conn.PauseKeepAlive) a Conn's session lapses, dropping its Lock and
	// TryLock locks and its election entries.
	SessionTTL time.Duration
	// NamedLockTTL is the TTL of locks taken with LockName.
	NamedLockTTL time.Duration
	// History is how many versions of each file GetVersion can return,
	// the current one included (at least 1); older ones are Compacted.
	History int
	// Defect breaks the claims engine of every Conn in one way, for the
	// mutation kit (topo/test/mutation) only. Zero: none.
	Defect claims.Defect
}

func (o Options) withDefaults() Options {
	o.SessionTTL = backendkit.OrDefault(o.SessionTTL, DefaultSessionTTL)
	o.NamedLockTTL = backendkit.OrDefault(o.NamedLockTTL, DefaultNamedLockTTL)
	o.History = backendkit.OrDefault(o.History, DefaultHistory)
	return o
}

// Factory creates Conns to in-memory stores. Each distinct serverAddress
// is a separate store, created on first use and kept for the Factory's
// lifetime. Faults and call counters of a Factory apply to all its Conns.
// Safe for concurrent use.
type Factory struct {
	opts Options

	mu     sync.Mutex
	stores map[string]*store

	faultMu          sync.Mutex // serialises updateFaults
	faultState       atomic.Pointer[faultState]
	keepAliveBlocked atomic.Bool
	counters         [numOperations]atomic.Int64
}

// NewFactory returns a Factory with default Options and no stores.
func NewFactory() *Factory { return NewFactoryWithOptions(Options{}) }

// NewFactoryWithOptions returns a Factory configured by opts.
func NewFactoryWithOptions(opts Options) *Factory {
	return &Factory{opts: opts.withDefaults(), stores: map[string]*store{}}
}

// Create implements topo.Factory: a new Conn, with its own session, to the
// store named serverAddress (any string, "" included), rooted at root;
// cell is ignored. InvalidPath when root is not a valid directory path.
func (f *Factory) Create(cell, serverAddress, root string) (topo.Conn, error) {
	return f.NewConn(serverAddress, root)
}

// NewConn is Create returning *Conn, for its session controls
// (ExpireSession, PauseKeepAlive, Partition). NewServer's global cell is
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
	// elections segment (see entry.go, Placement).
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

// NewServer returns a topo.Server over a fresh store (its own Factory,
// default Options): the global cell is the store address "" rooted at
// "/global", and each name in cells gets a CellInfo record (address "",
// root "/<cell>"); duplicates are created once. It panics on an invalid
// cell name (empty, containing "/", or "global"). ctx is used only for
// its values; the setup is never cancelled.
func NewServer(ctx context.Context, cells ...string) *topo.Server {
	ts, _ := NewServerAndFactory(ctx, cells...)
	return ts
}

// NewServerAndFactory is NewServer that also returns the Factory, for
// faults and call counters; the counters start at zero after the setup.
func NewServerAndFactory(ctx context.Context, cells ...string) (*topo.Server, *Factory) {
	return NewServerAndFactoryWithOptions(ctx, Options{}, cells)
}

// NewServerAndFactoryWithOptions is NewServerAndFactory with the Factory
// configured by opts and the Server by sopts (e.g. topo.WithMiddleware,
// which decorates the global cell and every cell; the Server names its
// backend Name to its middlewares). Do not pass topo.WithFactory: the
// cells would open from another store. It panics as NewServer does.
func NewServerAndFactoryWithOptions(ctx context.Context, opts Options, cells []string, sopts ...topo.ServerOption) (*topo.Server, *Factory) {
	f := NewFactoryWithOptions(opts)
	global, err := f.Create(topo.GlobalCell, "", "/"+topo.GlobalCell)
	if err != nil {
		panic("memorytopo: " + err.Error())
	}
	ts := topo.NewServer(f, global, append([]topo.ServerOption{topo.WithImplementationName(Name)}, sopts...)...)
	ctx = context.WithoutCancel(ctx)
	for i, cell := range cells {
		if slices.Contains(cells[:i], cell) {
			continue
		}
		if err := ts.CreateCellInfo(ctx, cell, &topodatapb.CellInfo{ServerAddress: "", Root: "/" + cell}); err != nil {
			panic("memorytopo: NewServer: cell " + cell + ": " + err.Error())
		}
	}
	f.ResetCallCounts()
	return ts, f
}

// Conn is a topo.Conn: a client of one in-memory store with its own
// session (see the package doc). Safe for concurrent use.
type Conn struct {
	f      *Factory
	s      *store
	root   string
	files  map[string]*node // root's index (store.roots); s.mu
	queues *rootIndex

	closed    atomic.Bool
	closeOnce sync.Once
	done      chan struct{} // closed by Close

	cut atomic.Pointer[chan struct{}] // while partitioned; Heal closes it

	claims.Claims // the locks and elections of eng, over driver{c}
	eng           *claims.Engine

	// Guarded by s.mu.
	session         *lease
	leases          map[*lease]struct{}
	keepAlivePaused bool
	partitioned     bool
}

var _ topo.Conn = (*Conn)(nil)

// ConnOf finds the *Conn behind conn, itself or wrapped by decorators
// with Unwrap() topo.Conn methods (see topo.Middleware), for its test
// controls (ExpireSession, PauseKeepAlive, Partition, Heal):
//
//	c, ok := memorytopo.ConnOf(ts.GlobalCell())
//
// It reports false when conn is of another backend or a decorator on the
// way has no Unwrap method. Safe for concurrent use.
func ConnOf(conn topo.Conn) (*Conn, bool) { return topo.ConnAs[*Conn](conn) }

// Factory returns the Factory that created c.
func (c *Conn) Factory() *Factory { return c.f }

// Close implements topo.Conn.Close, ending c's session and leases at
// once (see ExpireSession); Check then returns Closed.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		c.eng.Close()
		c.closed.Store(true)
		close(c.done)
		c.ExpireSession()
	})
}

// ExpireSession simulates the store expiring c's session: every lock c
// holds or waits for (of any kind) and every election entry of c is
// dropped at once; their Done channels close, Check, Unlock and IfHeld
// fail with LockLost, leadership contexts are cancelled (Term then
// returns NotLeader) and others take over. c keeps working: later calls
// start a new session. Safe for concurrent use; a no-op once closed.
func (c *Conn) ExpireSession() {
	c.s.lock()
	defer c.s.mu.Unlock()
	for l := range c.leases {
		c.s.revokeLease(l)
	}
	c.session = nil
}

func (c *Conn) refreshLeases() {
	for l := range c.leases {
		c.s.refreshLease(l)
	}
}

// PauseKeepAlive stops the renewal of c's leases, as when c's process
// freezes: each lapses its TTL later (see the package doc) unless
// ResumeKeepAlive comes first, with ExpireSession's effects on its
// claims. Calls on c keep working. Safe for concurrent use.
func (c *Conn) PauseKeepAlive() { c.setKeepAlivePaused(true) }

// ResumeKeepAlive restarts the renewal stopped by PauseKeepAlive; leases
// not lapsed yet are kept. Safe for concurrent use.
func (c *Conn) ResumeKeepAlive() { c.setKeepAlivePaused(false) }

// Partition cuts c off from its store as a network partition would:
// renewal of c's leases stops as with PauseKeepAlive, and every call on
// c, its lock descriptors and participations that starts from now on
// blocks until Heal (then proceeds), its context ends (Timeout or
// Interrupted, nothing done; an Unlock so given up still releases in the
// background, as a real backend's does) or c closes (Closed). Calls
// already started and established Watch, WatchRecursive, WaitForNewLeader
// and Observe streams are unaffected. The leadership contexts of c's
// terms end a quarter of the TTL before their lease lapses (the real
// backends' client-side safety margin), their entries staying until then;
// lock descriptors end at the lapse. Idempotent; safe for concurrent use.
func (c *Conn) Partition() { c.setPartitioned(true) }

// Heal ends Partition: blocked calls proceed and renewal resumes; leases
// not lapsed yet are kept. Idempotent; safe for concurrent use.
func (c *Conn) Heal() { c.setPartitioned(false) }

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

func (c *Conn) setKeepAlivePaused(paused bool) {
	c.s.lock()
	defer c.s.mu.Unlock()
	c.keepAlivePaused = paused
	c.refreshLeases()
}

// full and fullPrefix return the store path of the canonical path or
// prefix p; rel is the inverse.
func (c *Conn) full(p string) string { return joinRoot(c.root, p) }

func (c *Conn) fullPrefix(p string) string {
	if c.root == "" {
		return p
	}
	return c.root + "/" + p
}

func (c *Conn) rel(full string) string {
	if c.root == "" {
		return full
	}
	if full == c.root {
		return ""
	}
	return full[len(c.root)+1:]
}

func (c *Conn) closedErr(p string) error {
	if c.closed.Load() {
		return topo.NewError(topo.Closed, p)
	}
	return nil
}

// begin starts a call of op on the caller's path raw: it counts it,
// checks its context, cleans raw and runs enter, in that order.
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

// enter is the prologue of a call of op on the canonical path p (a
// transaction: OpTxn, "" and its ops txn), after its context and input
// checks: Closed, the partition, the faults, then Closed again (c may
// have closed while the call waited).
func (c *Conn) enter(ctx context.Context, op Operation, p string, txn ...backendkit.TxnOp) error {
	if err := c.closedErr(p); err != nil {
		return err
	}
	if ch := c.cut.Load(); ch != nil {
		if err := await(ctx, *ch, c.done, p); err != nil {
			return err
		}
	}
	if err := c.f.faultState.Load().inject(ctx, op, p, txn, c.done); err != nil {
		return err
	}
	return c.closedErr(p)
}
