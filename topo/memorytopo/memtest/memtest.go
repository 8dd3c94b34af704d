// Package memtest sets up an in-memory topology for a unit test in one
// call, and gives the test the controls it needs over it:
//
//	s := memtest.New(t, memtest.Options{Cells: []string{"zone1"}})
//	ts := s.Server                 // a *topo.Server: give it to the code under test
//	other := s.NewClient()         // a second process on the same store, its own session
//	s.Client.ExpireSession()       // the first one's session is lost: its locks and terms end
//	other.Partition()              // the second one is cut off until other.Heal()
//	s.Factory.AddFault(memorytopo.Fault{Op: memorytopo.OpUpdate, Path: "config/*"})
//
// Every client is a *topo.Server of its own over one store, with its own
// sessions, decorated with Options.Middleware like a production Server.
// The Client keeps the *memorytopo.Conn behind each connection it opened,
// so its session controls work through any middleware (no type assertion
// on a decorated Conn). Everything New opens is closed when the test ends
// (testing.TB.Cleanup).
//
// Timing: memorytopo has no fake clock. Session and lease lapses (after
// PauseKeepAlive, Partition or a fault blocking renewal) take
// Options.SessionTTL of real time, so a test of a lapse sets a short one
// and waits on channels (a lock's or term's Done), never on sleeps.
// ExpireSession ends a session at once.
//
// docs/testing.md has recipes (happy path, compare-and-set conflicts,
// contention, watches, faults, session loss, partition and fencing, a lease
// that lapses, a leader that is cut off), each a test of this package.
package memtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// Options configures New. The zero value is a store with only the global
// cell, memorytopo's default TTLs and no middleware.
type Options struct {
	// Cells are the cells New creates besides the global one: each has a
	// CellInfo record (server address "", root "/<cell>"), so that every
	// client's Server.ConnForCell opens it. Names must be valid cell names
	// (non-empty, no "/", not "global"); New fails the test otherwise.
	Cells []string
	// SessionTTL is how long after its renewal stops a session or lease
	// lapses (memorytopo.Options.SessionTTL; 0 means
	// memorytopo.DefaultSessionTTL, 30 s). Set it short, e.g. 200 ms, to
	// test a lapse (PauseKeepAlive, Partition) in real time.
	SessionTTL time.Duration
	// NamedLockTTL is the TTL of LockName locks (0 means
	// memorytopo.DefaultNamedLockTTL).
	NamedLockTTL time.Duration
	// History is how many versions of each file GetVersion can return (0
	// means memorytopo.DefaultHistory).
	History int
	// Middleware decorates every connection of every client (the global
	// cell and every cell, as topo.WithMiddleware does; the first is
	// outermost).
	Middleware []topo.Middleware
}

// Store is one in-memory store set up by New, and its first client.
type Store struct {
	// Factory is the store's memorytopo Factory: inject faults with it
	// (AddFault, SetError, SetLatency, Hang, BreakWatches) and read its
	// call counters (CallCount, zero when New returns). Faults apply to
	// every client of the store.
	Factory *memorytopo.Factory
	// Server is the first client's Server (Client.Server).
	Server *topo.Server
	// Client is the first client, opened by New.
	Client *Client

	t    testing.TB
	opts Options
}

// New creates a store configured by opts, writes the cells' records and
// opens its first client (Store.Client, whose Server is Store.Server).
// When the test ends it removes every fault and closes every client. It
// fails the test (t.Fatal) when a cell cannot be created, so call it from
// the test's goroutine.
func New(t testing.TB, opts Options) *Store {
	t.Helper()
	s := &Store{
		Factory: memorytopo.NewFactoryWithOptions(memorytopo.Options{
			SessionTTL:   opts.SessionTTL,
			NamedLockTTL: opts.NamedLockTTL,
			History:      opts.History,
		}),
		t:    t,
		opts: opts,
	}
	// Faults go first, so that no client's Close waits on a hung store
	// (Cleanup runs last-registered first).
	s.Client = s.NewClient()
	t.Cleanup(s.Factory.ClearFaults)
	s.Server = s.Client.Server
	ctx := context.Background()
	seen := map[string]bool{}
	for _, cell := range opts.Cells {
		if seen[cell] {
			continue
		}
		seen[cell] = true
		if err := s.Server.CreateCellInfo(ctx, cell, &topodatapb.CellInfo{ServerAddress: "", Root: "/" + cell}); err != nil {
			t.Fatalf("memtest: cell %q: %v", cell, err)
		}
	}
	s.Factory.ResetCallCounts()
	return s
}

// NewClient opens another client of the store, as a second process of the
// program under test would: a topo.Server of its own over the same global
// cell and cells, with its own sessions (its locks and election entries
// are its own, and ExpireSession, PauseKeepAlive and Partition on it leave
// the other clients alone), decorated with Options.Middleware. It is
// closed when the test ends; closing it earlier (Client.Close) is how a
// test simulates a process that exits. Safe for concurrent use.
func (s *Store) NewClient() *Client {
	c := &Client{store: s}
	global, err := c.create(topo.GlobalCell, "", "/"+topo.GlobalCell)
	if err != nil {
		s.t.Fatalf("memtest: %v", err) // the root is fixed and valid
	}
	c.Server = topo.NewServer(clientFactory{c}, global,
		topo.WithImplementationName(memorytopo.Name), topo.WithMiddleware(s.opts.Middleware...))
	s.t.Cleanup(c.Close)
	return c
}

// Client is one client of the store: a topo.Server and the
// *memorytopo.Conn behind each connection it opened. Its methods are
// safe for concurrent use, also with calls on its Server's connections.
type Client struct {
	// Server is the client's topo.Server: its GlobalCell and the Conns its
	// ConnForCell returns are decorated with Options.Middleware.
	Server *topo.Server

	store *Store

	mu sync.Mutex
	// all holds every Conn the client opened, also those its Server has
	// since replaced (a cell whose record changed is dialled again, and
	// the old Conn may still be in use until it is closed); latest the
	// last one of each cell.
	all         []*memorytopo.Conn
	latest      map[string]*memorytopo.Conn
	partitioned bool
	paused      bool
}

// clientFactory opens the Conns of one Client's Server (its cells).
type clientFactory struct{ c *Client }

// Create implements topo.Factory.
func (f clientFactory) Create(cell, serverAddress, root string) (topo.Conn, error) {
	return f.c.create(cell, serverAddress, root)
}

// create opens a Conn of the store for cell and applies the client's
// partition and paused keep-alive to it.
func (c *Client) create(cell, serverAddress, root string) (*memorytopo.Conn, error) {
	conn, err := c.store.Factory.NewConn(serverAddress, root)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.latest == nil {
		c.latest = map[string]*memorytopo.Conn{}
	}
	c.latest[cell] = conn
	c.all = append(c.all, conn)
	if c.partitioned {
		conn.Partition()
	}
	if c.paused {
		conn.PauseKeepAlive()
	}
	return conn, nil
}

// each runs fn on every Conn the client opened (on a closed one, each
// control is harmless), under c.mu.
func (c *Client) each(fn func(*memorytopo.Conn)) {
	for _, conn := range c.all {
		fn(conn)
	}
}

// Global returns the client's connection to the global cell
// (Server.GlobalCell(), decorated with Options.Middleware).
func (c *Client) Global() topo.Conn { return c.Server.GlobalCell() }

// Conn returns the *memorytopo.Conn behind the client's connection to cell
// (topo.GlobalCell for the global cell), for memorytopo's own controls on
// that one connection; false when the client has not opened cell yet
// (Server.ConnForCell opens it).
func (c *Client) Conn(cell string) (*memorytopo.Conn, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	conn, ok := c.latest[cell]
	return conn, ok
}

// ExpireSession simulates the loss of the client's sessions, as when the
// store expires a client that stopped answering: every lock it holds or
// waits for and every election entry of it is dropped at once on every
// connection it opened (see memorytopo.Conn.ExpireSession): their Done
// channels close, Check returns LockLost, leadership contexts are
// cancelled and other clients take over. The client keeps working under
// new sessions.
func (c *Client) ExpireSession() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.each((*memorytopo.Conn).ExpireSession)
}

// PauseKeepAlive stops the renewal of the client's sessions and leases, as
// when its process freezes: each lapses Options.SessionTTL later (the ttl
// of LockWithTTL, NamedLockTTL for LockName) unless ResumeKeepAlive comes
// first, with the effects of ExpireSession. Calls keep working.
// Connections the client opens meanwhile are paused too.
func (c *Client) PauseKeepAlive() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused = true
	c.each((*memorytopo.Conn).PauseKeepAlive)
}

// ResumeKeepAlive restarts renewal stopped by PauseKeepAlive; sessions and
// leases that have not lapsed are kept.
func (c *Client) ResumeKeepAlive() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.paused = false
	c.each((*memorytopo.Conn).ResumeKeepAlive)
}

// Partition cuts the client off from the store, as a network partition
// would (see memorytopo.Conn.Partition): renewal stops, so its sessions
// lapse Options.SessionTTL later and others take its locks and leadership
// (its leadership contexts end a quarter of the TTL earlier, as a real
// client steps down before its lease lapses), and its calls block until
// Heal, their context ends or it is closed. Connections the client opens
// meanwhile are partitioned too.
func (c *Client) Partition() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partitioned = true
	c.each((*memorytopo.Conn).Partition)
}

// Heal ends Partition: blocked calls proceed and renewal resumes; sessions
// that have not lapsed are kept.
func (c *Client) Heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.partitioned = false
	c.each((*memorytopo.Conn).Heal)
}

// Close closes the client's Server and so every connection it opened, as
// when its process exits: its locks and election entries are released at
// once. Idempotent; the test's cleanup calls it.
func (c *Client) Close() { c.Server.Close() }
