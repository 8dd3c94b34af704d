// Package test is topokit's conformance suite: one entry point, Run, that
// checks any topo.Conn implementation against the contract documented on
// topo.Conn. Every bundled backend runs it against a real server, and
// authors of custom backends run it against theirs.
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
	// leadership contexts are cancelled. It is required.
	ExpireSession func(t *testing.T, conn topo.Conn)
}

// Run runs every conformance subtest. newStore is called once per subtest
// and returns an opener for a fresh, isolated store (for example a unique
// root on a shared server); each call of the opener returns a new
// connection with its own session or lease. The suite closes every
// connection it opens.
func Run(t *testing.T, newStore func(t *testing.T) (open func() topo.Conn), opts Options) {
	t.Helper()
	run(t, newStore, opts)
}
