package mutation_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/test"
	"github.com/topokit/topokit/topo/test/mutation"
)

// memOptions wires memorytopo for the suite as a backend author would wire
// their own backend; cur returns the store of the subtest in progress.
func memOptions(cur func() *memorytopo.Factory, open func(t *testing.T, f *memorytopo.Factory) func() topo.Conn) test.Options {
	return test.Options{
		ExpireSession: func(t *testing.T, conn topo.Conn) {
			mc, ok := conn.(*memorytopo.Conn)
			require.Truef(t, ok, "ExpireSession got %T, not the backend's own Conn", conn)
			mc.ExpireSession()
		},
		Partition: func(t *testing.T) test.Partitioned {
			c := open(t, cur())().(*memorytopo.Conn)
			return test.Partitioned{Conn: c, Cut: c.Partition, Heal: c.Heal}
		},
		SessionBound: time.Second,
		FaultyStore: func(t *testing.T) test.FaultyStore {
			f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: time.Second})
			return test.FaultyStore{
				Open: open(t, f),
				Fault: func(t *testing.T) {
					f.AddFault(memorytopo.Fault{Op: memorytopo.OpAny, Err: topo.Unavailable, Times: 20})
				},
			}
		},
	}
}

// TestRunTargeted runs the kit as a backend author would, from another
// package, on a few mutants in targeted mode: each child runs only the
// subtest that catches its mutant, the baseline those subtests.
func TestRunTargeted(t *testing.T) {
	var cur *memorytopo.Factory
	open := func(t *testing.T, f *memorytopo.Factory) func() topo.Conn {
		return func() topo.Conn {
			c, err := f.NewConn("mem", "/root")
			require.NoError(t, err)
			return c
		}
	}
	mutation.Run(t, func(t *testing.T) func() topo.Conn {
		cur = memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: time.Second})
		return open(t, cur)
	}, memOptions(func() *memorytopo.Factory { return cur }, open), mutation.Config{
		Mutants:  []string{"token-decreases", "done-only-on-release", "txn-read-then-write", "ifheld-ignores-fence"},
		Targeted: true,
		Parallel: 2,
		Timeout:  2 * time.Minute,
	})
}
