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
//		}, test.Options{ExpireSession: expireSession})
//	}
//
// The subtests are grouped by area (File, Directory, Lock, Watch,
// WatchRecursive, Election, Close, SessionLoss, BadInput, Concurrency) and
// run one after the other; select some with -run, e.g.
// -run 'TestConformance/Lock/TryLock'. Nothing is skipped: every subtest
// runs against every backend, and GetVersion's asserts NoImplementation
// when the backend declares it unsupported.
//
// The suite never sleeps to synchronise and makes no timing assertions. It
// bounds waits instead: things that must happen (a waiter getting a released
// lock, a watch event, a new leader) get up to 30 s, a TryLock that must not
// wait for the holder gets 5 s, and the suite watches for 300 ms for things
// that must not happen (a Lock returning while the lock is held). It never
// waits for a lease or session TTL to lapse; session loss is simulated with
// Options.ExpireSession.
package test

import (
	"testing"

	"github.com/topokit/topokit/topo"
)

// Options describes what a backend declares about itself.
type Options struct {
	// GetVersionUnsupported declares that the store keeps no history, so
	// GetVersion must return a NoImplementation error. No other method may
	// be declared unsupported.
	GetVersionUnsupported bool

	// ExpireSession makes the store drop conn's session or lease as if the
	// connection had been lost (etcd: revoke its lease; ZooKeeper: expire
	// its session; Consul: destroy its session; memorytopo: simulate session
	// loss). The suite uses it to check that held locks report LockLost and
	// leadership contexts are cancelled. It is required. The drop may take
	// effect asynchronously: the suite waits up to 30 s for its
	// consequences. conn is always a connection returned by the opener; the
	// suite does not use it afterwards except to observe the loss.
	ExpireSession func(t *testing.T, conn topo.Conn)
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
