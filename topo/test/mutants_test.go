package test_test

import (
	"testing"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
	"github.com/topokit/topokit/topo/test/mutation"
)

// The suite checks itself: each mutant of the mutation kit (package
// topo/test/mutation, which holds the one list of mutants) wraps a
// backend that passes the suite with one deliberate contract violation,
// of the kind a real backend gets wrong, and the WHOLE suite runs against
// it and must fail; the baseline runs the whole suite unmutated and must
// pass. No mutant relies on a sleep to open a race window: the racy ones
// yield (runtime.Gosched) between their non-atomic steps, and the suite's
// races run many rounds.

// mutantSessionTTL is the SessionTTL of the mutants' stores (what a
// partitioned Conn's session lapses after).
const mutantSessionTTL = time.Second

func TestSuiteCatchesMutants(t *testing.T) {
	var cur *refStore
	mutation.Run(t, func(t *testing.T) func() topo.Conn {
		cur = newRefStore(mutantSessionTTL)
		return func() topo.Conn { return cur.conn(t) }
	}, refOptions(func() *refStore { return cur }, mutantSessionTTL), mutation.Config{
		// The children mostly wait (for watch events, blocked locks, the
		// suite's 300 ms "nothing happens" windows), so many run at once
		// even on two cores.
		Parallel: 16,
		Timeout:  3 * time.Minute,
	})
}

var _ = test.Run
