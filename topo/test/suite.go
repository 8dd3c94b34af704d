// Package test is topokit's conformance suite: one entry point, Run, that
// checks any topo.Conn implementation against the contract documented on
// topo.Conn. Every bundled backend runs it against a real server, and
// authors of custom backends run it against theirs:
//
//	func TestConformance(t *testing.T) {
//		test.Run(t, func(t *testing.T) func() topo.Conn {
//			root := uniqueRoot(t) // a fresh, empty root on a shared server
//			return func() topo.Conn {
//				c, err := mybackend.NewConn(addr, root)
//				require.NoError(t, err)
//				return c
//			}
//		}, test.Options{
//			ExpireSession: expireSession, // drop a Conn's session; return once it noticed
//			Partition:     partition,     // a Conn behind a faultproxy.Proxy
//			SessionBound:  ttl,           // how long the store keeps a silent session
//			FaultyStore:   faultyStore,   // a cluster that loses a member
//		})
//	}
//
// docs/backends.md walks through each option. The subtests are grouped by
// area (File, Directory, Lock, Watch, WatchRecursive, Election, Close,
// SessionLoss, Partition, BadInput, CheckOrder, Concurrency, Faults, and
// issue 11's Fence, Stale and Txn) and run one after the other; select
// some with -run, e.g.
// -run 'TestConformance/Lock/TryLock'. Nothing is skipped: every subtest
// runs against every backend, and GetVersion's asserts NoImplementation
// when the backend declares it unsupported.
//
// The suite never sleeps to synchronise and makes no timing assertions. It
// bounds waits instead: things that must happen (a waiter getting a released
// lock, a watch event, a new leader) get up to 30 s, a TryLock that must not
// wait for the holder gets 5 s, and the suite watches for 300 ms for things
// that must not happen (a Lock returning while the lock is held). It never
// waits for a lease or session TTL to lapse except in the Partition group,
// where a cut-off holder must give its locks and leadership up before the
// store hands them to someone else; session loss is otherwise simulated with
// Options.ExpireSession.
//
// CheckOrder holds the calls whose arguments fail several of backendkit's
// checks at once (docs/backends.md, "The check order"): on an open and on
// a closed Conn, each returns the first failing check's error with
// backendkit's message (so a backend must check through backendkit, or
// word its errors alike), an ended context comes before any bad input,
// and Closed comes only after the input was found good.
//
// Overlap is checked at the moment a new holder wins: when a new Lock or
// WaitForLeadership returns, the old holder's Check must already fail and
// its leadership context must already be cancelled.
//
// Fencing (issue 11; docs/semantics.md states the contract):
//   - Fence: over many handovers of one lock directory between Conns, by
//     every lock call, to queued waiters and fresh callers, ending by
//     Unlock or ExpireSession (and, on the FaultyStore, across its fault),
//     every holder's Token is positive, fixed, and greater than every
//     earlier holder's; the same for the terms of one election
//     (LeaderParticipation.Term is NotLeader before leading, while queued,
//     and after Stop, and the same Fence throughout a term). Done is open
//     while the claim is held, closed when Unlock or Stop returns, after
//     ExpireSession, and after a partition once the successor holds
//     (checked in Stale/AfterPartition).
//   - Stale: a holder whose lock or term was dropped (ExpireSession; a
//     partition until successors hold, then healed; the same with the
//     stale holder's first call after the heal a guarded write) has every
//     GuardedUpdate, GuardedDelete and IfHeld Txn refused with a
//     *TxnError wrapping LockLost, and the store, read back whole, shows
//     none of them; the successors' guarded writes succeed.
//   - Txn: every op kind, every failure code with the failing op's index
//     (and nothing written), conditions evaluated against the state
//     before the transaction, the returned versions against Get, List and
//     Watch; malformed transactions refused with typed errors, writing
//     nothing; and atomicity: concurrent multi-file transfers between
//     counters conditioned on versions, whose sum every snapshot validated
//     by a Txn of IfVersion checks preserves, and whose history porcupine
//     checks against a model of the counters, also across the
//     FaultyStore's fault.
package test

import (
	"testing"
	"time"

	"github.com/topokit/topokit/topo"
)

// Options describes what a backend declares about itself, and the faults
// it lets the suite inject. Every func field is required: Run fails at once
// (naming the field) when one is missing, because a backend that cannot be
// tested under a fault cannot be shown safe under it.
type Options struct {
	// GetVersionUnsupported declares that the store keeps no history, so
	// GetVersion must return a NoImplementation error. No other method may
	// be declared unsupported.
	GetVersionUnsupported bool

	// ExpireSession makes the store drop conn's session or lease (etcd:
	// revoke its leases; ZooKeeper: expire its session; Consul: destroy its
	// sessions; memorytopo: Conn.ExpireSession). It must return only once
	// the store has dropped the session AND conn has observed the loss (as
	// it does in production, where an expiry follows a disconnection or a
	// missed renewal that the holder notices first): from then on the suite
	// requires conn's lock descriptors to report LockLost and its
	// leadership contexts to be cancelled, at once and without polling.
	// conn is always a connection returned by the opener; the suite does
	// not use it afterwards except to observe the loss and to show that a
	// stale Unlock, Stop or guarded write (IfHeld) harms nobody.
	ExpireSession func(t *testing.T, conn topo.Conn)

	// Partition opens a new connection to the store of the subtest in
	// progress (the one the last newStore call returned; subtests run one
	// after the other) whose traffic crosses a fault the suite controls,
	// typically a topo/test/faultproxy.Proxy in front of that one Conn. The
	// suite closes Partitioned.Conn when the subtest ends, after healing it;
	// the wiring stops its proxy with t.Cleanup.
	Partition func(t *testing.T) Partitioned

	// SessionBound is how long after Partitioned.Cut the store may keep the
	// cut Conn's session or lease alive before it hands the Conn's locks
	// and leadership to others: etcd the lease TTL, ZooKeeper the session
	// timeout, Consul twice the session TTL plus the lock-delay, memorytopo
	// the SessionTTL. The suite waits up to SessionBound plus its own 30 s
	// for a successor. It is not a timing assertion.
	SessionBound time.Duration

	// FaultyStore returns a store that survives a fault of its own (a
	// 3-node ZooKeeper ensemble losing its leader, a 3-member etcd cluster
	// with a member restarted, a restarted Consul agent; a store in
	// process has no server to lose: a burst of requests refused with
	// Unavailable, as memorytopo's injected faults and the template's
	// Store.Restart do), for the linearizability and read-your-writes
	// checks under faults.
	FaultyStore func(t *testing.T) FaultyStore
}

// Partitioned is a connection whose traffic to the store can be cut.
type Partitioned struct {
	// Conn is a connection to the subtest's store, with its own session or
	// lease, opened like the opener's connections except for the fault.
	Conn topo.Conn
	// Cut stops all traffic between Conn and the store, in both directions,
	// as a network partition does (calls on Conn then hang or fail). It
	// returns at once; it is idempotent.
	Cut func()
	// Heal lets the traffic flow again. Idempotent.
	Heal func()
}

// FaultyStore is a fresh store, isolated from other subtests, that can be
// hit by a fault while clients use it.
type FaultyStore struct {
	// Open returns a new connection with the backend's default options.
	Open func() topo.Conn
	// OpenLinearizable returns a new connection with the backend's
	// linearizable-read option on. Nil means Open's connections already
	// read linearizably (etcd's default).
	OpenLinearizable func() topo.Conn
	// Fault injects the fault (kill the leader, restart a member or the
	// agent) and returns once the store serves requests again. The suite
	// calls it while clients are running.
	Fault func(t *testing.T)
}

// Run runs every conformance subtest. newStore is called once per subtest
// and returns an opener for a fresh, isolated store (for example a unique
// root on a shared server); each call of the opener returns a new
// connection with its own session or lease. The suite closes every
// connection it opens, when the subtest that opened it ends. Subtests run
// sequentially, so newStore and the opener need not be safe for concurrent
// use by the suite, but the connections they return are used concurrently.
func Run(t *testing.T, newStore func(t *testing.T) (open func() topo.Conn), opts Options) {
	t.Helper()
	run(t, newStore, opts)
}

// RunGroups runs the conformance subtests of the named groups only (the
// first path element of a subtest's name: "File", "Directory", "Watch",
// "WatchRecursive", ...), for a Conn that is checked for part of the
// contract (a read cache checks reads and watches). Its arguments are
// Run's.
func RunGroups(t *testing.T, groups []string, newStore func(t *testing.T) (open func() topo.Conn), opts Options) {
	t.Helper()
	run(t, newStore, opts, groups...)
}
