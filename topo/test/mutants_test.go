package test_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/test"
	"github.com/topokit/topokit/topo/test/mutation"
)

// The suite checks itself: each mutant of the mutation kit (package
// topo/test/mutation, which holds the one list of mutants) wraps
// memorytopo, which passes the suite, with one deliberate contract
// violation of the kind a real backend gets wrong, and the WHOLE suite
// runs against it and must fail; the baseline runs the whole suite on
// memorytopo behind the mutants' wrappers and must pass. No mutant relies
// on a sleep to open a race window: the racy ones yield
// (runtime.Gosched) between their non-atomic steps, and the suite's races
// run many rounds.

// mutantSessionTTL is the SessionTTL of the mutants' stores (what a
// partitioned Conn's session lapses after).
const mutantSessionTTL = time.Second

func TestSuiteCatchesMutants(t *testing.T) {
	var cur *memorytopo.Factory
	open := func(t *testing.T, f *memorytopo.Factory) func() topo.Conn {
		return func() topo.Conn {
			c, err := f.NewConn("mem", "/root")
			require.NoError(t, err)
			return c
		}
	}
	newFactory := func() *memorytopo.Factory {
		// In a child running an engine mutant, every Conn's claims engine
		// has that defect (mutation.EngineDefect; none otherwise).
		return memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: mutantSessionTTL, Defect: mutation.EngineDefect()})
	}
	mutation.Run(t, func(t *testing.T) func() topo.Conn {
		cur = newFactory()
		return open(t, cur)
	}, test.Options{
		ExpireSession: func(t *testing.T, conn topo.Conn) {
			conn.(*memorytopo.Conn).ExpireSession()
		},
		Partition: func(t *testing.T) test.Partitioned {
			c := open(t, cur)().(*memorytopo.Conn)
			return test.Partitioned{Conn: c, Cut: c.Partition, Heal: c.Heal}
		},
		SessionBound: mutantSessionTTL,
		FaultyStore: func(t *testing.T) test.FaultyStore {
			f := newFactory()
			return test.FaultyStore{
				Open: open(t, f),
				Fault: func(t *testing.T) {
					f.AddFault(memorytopo.Fault{Op: memorytopo.OpAny, Err: topo.Unavailable, Times: 20})
					f.BreakWatches(nil)
				},
			}
		},
	}, mutation.Config{
		// The children mostly wait (for watch events, blocked locks, the
		// suite's 300 ms "nothing happens" windows), so many run at once
		// even on two cores.
		Parallel: 16,
		Timeout:  3 * time.Minute,
		// memorytopo runs on the claims engine: its mutants too.
		Engine: true,
	})
}
