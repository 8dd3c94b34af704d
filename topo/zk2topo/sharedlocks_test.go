package zk2topo

import (
	"testing"

	"github.com/topokit/topokit/topo/claims"
)

// TestDriverLocksShared: the claims engine keeps a lock granted at Create
// off its session's list (unshared: only Session.Lost ends it, LoseEntry
// does not find it) for a GoneSignaler without Monitor, an in-process
// driver. This driver is no such thing: it must keep every lock on its
// session's list.
func TestDriverLocksShared(t *testing.T) {
	_, signals := any(driver{}).(claims.GoneSignaler)
	_, monitors := any(driver{}).(claims.Monitor)
	if signals && !monitors {
		t.Fatal("the driver is a GoneSignaler without Monitor: its locks granted at Create would be unshared")
	}
}
