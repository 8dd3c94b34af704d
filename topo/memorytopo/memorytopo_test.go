package memorytopo_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/test"
)

// conformanceSessionTTL is the SessionTTL of the conformance stores: short,
// so that a partitioned Conn's session lapses quickly (renewal is otherwise
// continuous, so nothing else depends on it).
const conformanceSessionTTL = time.Second

// conformance runs the suite on memorytopo: a fresh
// Factory (so a fresh store) per subtest, every Conn rooted at /root, the
// partition fault through Conn.Partition and the store fault through
// injected errors.
func conformance(t *testing.T) {
	var cur *memorytopo.Factory
	open := func(t *testing.T, f *memorytopo.Factory) func() topo.Conn {
		return func() topo.Conn {
			c, err := f.NewConn("mem", "/root")
			require.NoError(t, err)
			return c
		}
	}
	test.Run(t, func(t *testing.T) func() topo.Conn {
		cur = memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: conformanceSessionTTL})
		return open(t, cur)
	}, test.Options{
		ExpireSession: func(t *testing.T, conn topo.Conn) {
			mc, ok := conn.(*memorytopo.Conn)
			require.True(t, ok, "not a *memorytopo.Conn: %T", conn)
			mc.ExpireSession()
		},
		Partition: func(t *testing.T) test.Partitioned {
			c := open(t, cur)().(*memorytopo.Conn)
			return test.Partitioned{Conn: c, Cut: c.Partition, Heal: c.Heal}
		},
		SessionBound: conformanceSessionTTL,
		FaultyStore: func(t *testing.T) test.FaultyStore {
			f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: conformanceSessionTTL})
			return test.FaultyStore{
				Open: open(t, f),
				Fault: func(t *testing.T) {
					// The next calls fail as against a store that lost
					// its leader, and watches break.
					f.AddFault(memorytopo.Fault{Op: memorytopo.OpAny, Err: topo.Unavailable, Times: 20})
					f.BreakWatches(nil)
				},
			}
		},
	})
}

// TestConformance runs the shared conformance suite against memorytopo.
func TestConformance(t *testing.T) { conformance(t) }

// TestSessionLossEndsClaimsAtOnce: ExpireSession ends every claim on the
// Conn's session before it returns (test.RequireLossEndsClaims).
func TestSessionLossEndsClaimsAtOnce(t *testing.T) {
	f := memorytopo.NewFactory()
	for range 20 {
		c := newConn(t, f)
		test.RequireLossEndsClaims(t, c, c.ExpireSession)
		require.NoError(t, c.Delete(testCtx(t), "d/f", nil))
	}
}
