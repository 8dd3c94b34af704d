// Package memorytopo is an in-memory topo.Conn for unit tests of programs
// built on topokit. It implements the whole contract of topo.Conn, including
// GetVersion (recent history per file), fail-fast TryLock, LockWithTTL and
// leader election, and adds what a test of a cluster manager needs: fault
// injection (an error for every call, errors per operation and path, added
// latency, a hung server, lease renewal failures), simulated session loss
// (Conn.ExpireSession) and a per-Conn network partition (Conn.Partition),
// plus per-operation call counters.
//
// The package registers a process-wide Factory as "memory", so
// topo.OpenServer("memory", addr, root) works; every distinct serverAddress
// is a separate store that lives as long as the process. Tests usually
// create their own store instead:
//
//	ts, f := memorytopo.NewServerAndFactory(ctx, "zone1", "zone2")
//	defer ts.Close()
//	f.SetError(topo.Unavailable) // every call now fails
//
// # Fault injection
//
// Faults are set on a Factory and apply to every Conn it created, at once
// and until removed; all of it is safe for concurrent use with the calls it
// affects. A call first checks its context (Timeout, Interrupted), then
// validates its input (InvalidPath, InvalidArgument, in backendkit's check
// order: path, reserved names, value, version), then fails with Closed
// after Close, then waits while its Conn is partitioned (Conn.Partition),
// then meets the faults in this order:
//
//   - SetLatency(d): the call waits d first (returning Timeout or
//     Interrupted if its context ends meanwhile, having done nothing).
//   - Hang(): the call blocks until its context ends (Timeout or
//     Interrupted, nothing done), its Conn is closed (Closed) or Unhang is
//     called (it then proceeds).
//   - SetError(err): the call fails with err.
//   - AddFault(Fault{Op, Path, Prefix, Err, Times}): calls of one operation
//     (or all, OpAny) on matching paths fail with Err, optionally only the
//     next Times of them. The returned function removes the fault.
//
// Injected errors are *topo.Error values naming the call's path:
// topo.Unavailable by default, the given code when Err is a topo.ErrorCode,
// and code Unavailable wrapping Err otherwise (errors.Is finds both).
// ClearFaults removes everything. Faults act when a call starts; an
// established Watch, WatchRecursive or WaitForNewLeader stream keeps
// delivering events. BreakWatches ends the established watches with an
// error, as a store-side failure would, to test re-watching.
//
// Sessions and leases are renewed continuously in the simulation. Renewal
// stops while the Factory hangs, while SetError is set, while a Fault with
// Op OpKeepAlive exists, and on one Conn between PauseKeepAlive and
// ResumeKeepAlive; a lease that is not renewed lapses its TTL later
// (Options.SessionTTL for Lock, TryLock and elections, the ttl of
// LockWithTTL, Options.NamedLockTTL for LockName), exactly as if its holder
// had died: its locks report LockLost and its leadership is cancelled.
// Conn.ExpireSession drops all of one Conn's locks and election entries at
// once, as a store expiring the session would; the Conn then continues
// under a new session.
// Conn.Partition cuts one Conn off, as a network partition would: its
// renewal stops (so its session lapses SessionTTL later, handing its locks
// and leadership to others at the moment its own descriptors report
// LockLost) and its new calls block until Conn.Heal. Like a real client,
// which steps down a safety margin before the store can expire its
// session, a partitioned Conn notices the failed renewal a quarter of the
// TTL before the store lapses the lease: the leadership contexts of the
// elections it leads on that lease are cancelled then (Proclaim returns
// NotLeader), while the entry stays in the store until the lapse (Term's
// Done, Check and IfHeld follow the store). Lock descriptors have no
// such margin.
//
// CallCount(op) counts the calls of each Operation made through the
// Factory's Conns (failed ones included); ResetCallCounts zeroes them.
//
// The registered process-wide Factory is reachable, for fault injection on
// Servers opened with topo.OpenServer("memory", ...), as
// topo.GetFactory(memorytopo.Name) asserted to *memorytopo.Factory.
//
// # Layout
//
// Store layout matches etcd2topo and zk2topo: a file is the node <root>/<path>;
// the lock of directory D is the oldest ephemeral entry under D/locks/; the
// leader of election N is the oldest ephemeral entry under elections/N/,
// whose value is the participant id. Versions are topo.NumericVersion values
// from one counter per store, increasing on every write.
//
// While no entry of D's lock is in the tree (none under D/locks/), Lock,
// TryLock, LockWithTTL and LockName of D take their entry's revision (its
// fencing token) at once but queue the entry on D's node without building
// or publishing its nodes: the first is the holder, each waiter waits for
// the one queued before it, and a TryLock that finds the queue non-empty
// fails naming the first. The entries are placed (their nodes built and
// published, under the names and versions they would have had) only when
// something could see them: ListDir, a Get or GetVersion that finds
// nothing at a path with a "locks" segment, or a Conn opened on a root
// not used before. From then on the lock's entries are in the tree, and
// later ones are placed when they queue, until D/locks empties. Every call
// observes the same as if each entry had been placed at once
// (TestUnplacedLockMatchesPlaced); Conns rooted inside a "locks" directory
// switch this off for their store. A Fence's Done channel is made when
// first asked for.
//
// A waiting Lock is let in by the removal of the entry ahead of it (an
// Unlock, the old holder's session loss, lapse or Close, or a waiter
// ahead of it giving up), under the store's write lock: when the removal
// leaves the waiter's entry the oldest, it marks that entry granted and
// wakes its Lock, which returns at once. The old holder's entry is gone
// (its Check fails, its Done is closed) before the grant, so the two
// never overlap; a waiter that leaves (its context ended) removes its
// entry, handing a lock it was granted meanwhile on to the next.
//
// Reads do not serialise: Get (and GetVersion of the current version)
// loads an immutable snapshot of the file without taking a lock, so
// concurrent Gets scale with the number of CPUs. Update of an existing
// file (with or without a version) takes the store-wide mutex only for
// reading plus a mutex of that file's own, so writers of different files
// run in parallel, each file's versions, history and watch events staying
// in order; while a WatchRecursive is active, Update takes the store-wide
// mutex for writing instead, so that a recursive watch gets the events of
// all files in version order. Create, Delete, Txn, List, watch set-up and
// lock or election changes take it for writing; GetVersion of an earlier
// version and ListDir for reading (ListDir for writing while a
// lock entry waits to be placed, see Layout). A write copies the value it is given
// and adds the replaced version to the file's history (a ring of
// Options.History-1 entries: no copy of the history); Get, GetVersion,
// List and watches hand out copies, so callers may modify both what they
// passed and what they got.
//
// # Leader values
//
// Campaign stores its value on the candidate entry when it creates it,
// under the store's write lock; Proclaim replaces it under the same lock
// after checking that the caller's term entry is still in the store (and
// its leadership context live), so a deposed leader's Proclaim is
// NotLeader and never visible. The value is a field of the entry, not a
// node: the entry still holds exactly the participant id, and List,
// ListDir, Get and Watch never show values. Leader reads id, value and
// token (the entry's revision, the term's Token) at once. Observe and
// WaitForNewLeader (a view of Observe: ids only, non-empty, deduplicated)
// read the state current at the call before returning and send it first;
// later states are read under the lock after each change, so they are in
// store order and a resigned or lapsed leader is never sent after its
// successor; a slow receiver gets the latest state (coalescing). Resign
// removes the entry (with an ended ctx it tries for 3 s; if the store is
// unreachable the leadership context is cancelled anyway). ResumeInfo is
// JSON naming the store, election, id and entry; a Conn of the same store
// and root resumes the candidacy by adopting the original Conn's session
// (lease), which it renews from then on (see
// Conn.ResumeLeaderParticipation). Faults and Partition apply to these
// calls (OpCampaign, OpProclaim, OpResign, OpLeader, OpObserve,
// OpResumeLeaderParticipation) as to every call.
//
// # Fencing tokens and transactions
//
// Every lock descriptor and leadership term is a topo.Fence. Its Token is
// the store revision (the counter that versions files, one per store,
// never reset) at which its lock or candidate entry was created, like
// etcd's CreateRevision: the holder of a lock (the leader of an election)
// is always the oldest live entry, so each later holder's token is
// greater than every earlier one's, across Unlock, ExpireSession, lapsed
// leases (after PauseKeepAlive, Partition or a fault blocking renewal) and
// Conn restarts. Done closes at the moment the store drops the entry
// (Unlock, Stop, ExpireSession, a lapse, Close). Term returns the
// leader's current term, NotLeader otherwise.
//
// Conn.Txn evaluates all its conditions against the store as it was, then
// applies all its writes, under the store-wide mutex held for writing:
// one atomic step, with the same versions (each write its own new
// revision), history and watch events as the methods of the same names;
// Get and List see all of a transaction's writes or none. IfHeld holds
// while the lock or term entry is in the store, so a stale holder's
// guarded write (topo.GuardedUpdate, topo.GuardedDelete) is refused with
// LockLost from the moment the store dropped its claim, even before its
// Done is looked at. memorytopo has no limit on the number of ops.
// Faults and partitions apply to Txn as to every call (see OpTxn): they
// act before anything is applied, so a transaction's outcome is never
// unknown here.
package memorytopo

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
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
}

func (o Options) withDefaults() Options {
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.NamedLockTTL <= 0 {
		o.NamedLockTTL = DefaultNamedLockTTL
	}
	if o.History < 1 {
		o.History = DefaultHistory
	}
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

	faults           faults
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
	s.mu.Lock()
	idx := s.index(r)
	s.mu.Unlock()
	return &Conn{
		f:      f,
		s:      s,
		root:   r,
		idx:    idx,
		done:   make(chan struct{}),
		leases: map[*lease]struct{}{},
	}, nil
}

// refreshLeases re-evaluates every lease's renewal after a fault change.
func (f *Factory) refreshLeases() {
	f.mu.Lock()
	stores := make([]*store, 0, len(f.stores))
	for _, s := range f.stores {
		stores = append(stores, s)
	}
	f.mu.Unlock()
	for _, s := range stores {
		s.mu.Lock()
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
	idx  *rootIndex // lock-free read index of root
	// rootNode caches the node of root (see store.connRoot); guarded by
	// the store's mu held for writing.
	rootNode *node

	closed    atomic.Bool
	closeOnce sync.Once
	done      chan struct{} // closed by Close

	// cut is non-nil while c is partitioned (Partition); closed by Heal.
	cut atomic.Pointer[chan struct{}]

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
		c.closed.Store(true)
		close(c.done)
		c.s.mu.Lock()
		for l := range c.leases {
			c.s.revokeLease(l, false)
		}
		c.session = nil
		c.s.mu.Unlock()
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
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for l := range c.leases {
		c.s.revokeLease(l, true)
	}
	c.session = nil
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
// (Timeout or Interrupted, nothing done) or c is closed (Closed). Calls
// already past their start, and established Watch, WatchRecursive,
// WaitForNewLeader and Observe streams, are not affected. A quarter of
// the TTL before the store lapses a session of c, c notices: the
// leadership contexts of c's terms on it are cancelled then, before the
// store hands leadership over (the client-side safety margin of real
// backends); the entries stay in the store until the lapse. Idempotent;
// safe for concurrent use.
func (c *Conn) Partition() {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.partitioned {
		return
	}
	ch := make(chan struct{})
	c.cut.Store(&ch)
	c.partitioned = true
	for l := range c.leases {
		c.s.refreshLease(l)
	}
}

// Heal ends Partition: blocked calls proceed and renewal resumes; leases
// that have not lapsed yet are kept. Idempotent; safe for concurrent use.
func (c *Conn) Heal() {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if !c.partitioned {
		return
	}
	c.partitioned = false
	if ch := c.cut.Swap(nil); ch != nil {
		close(*ch)
	}
	for l := range c.leases {
		c.s.refreshLease(l)
	}
}

// waitCut blocks while c is partitioned.
func (c *Conn) waitCut(ctx context.Context, p string) error {
	ch := c.cut.Load()
	if ch == nil {
		return nil
	}
	select {
	case <-*ch:
		return nil
	case <-ctx.Done():
		return interruptedOrTimeout(ctx, p)
	case <-c.done:
		return topo.NewError(topo.Closed, p)
	}
}

func (c *Conn) setKeepAlivePaused(paused bool) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.keepAlivePaused = paused
	for l := range c.leases {
		c.s.refreshLease(l)
	}
}

// full returns the store path of the canonical path p.
func (c *Conn) full(p string) string {
	if c.root == "" {
		return p
	}
	if p == "" {
		return c.root
	}
	return c.root + "/" + p
}

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

// enter runs the common prologue of a call of op on the canonical path p,
// once its context and input were checked (backendkit's check order:
// context, path, reserved names, value, version, then Closed): the Closed
// check, then the partition (Conn.Partition), then injected faults, then
// Closed again (the Conn may have closed while the call waited).
func (c *Conn) enter(ctx context.Context, op Operation, p string) error {
	if err := c.closedErr(p); err != nil {
		return err
	}
	if err := c.waitCut(ctx, p); err != nil {
		return err
	}
	if err := c.f.inject(ctx, op, p, c.done); err != nil {
		return err
	}
	return c.closedErr(p)
}
