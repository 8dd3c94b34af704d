package templatetopo_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/election/electiontest"
	"github.com/topokit/topokit/examples/templatetopo"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
	"github.com/topokit/topokit/topo/test/mutation"
)

// sessionBound is what the suites are told about partitions: how long
// after Cut the store may keep a cut Conn's session, its SessionTimeout.
const sessionBound = templatetopo.SessionTimeout

// restartRefusals is how many requests a Store.Restart refuses in the
// FaultyStore's fault.
const restartRefusals = 20

// wiring is the wiring of topo/test for the template, the thing to copy
// for a new backend: a fresh store per subtest, Conns rooted below it, and
// each fault the suite needs, backed by the store. TestConformance (and a
// mutation kit run) pass it to the suite.
func wiring() (newStore func(t *testing.T) func() topo.Conn, opts test.Options) {
	var cur *templatetopo.Store // the store of the subtest in progress
	open := func(t *testing.T, s *templatetopo.Store) func() topo.Conn {
		return func() topo.Conn {
			c, err := s.NewConn("/root")
			require.NoError(t, err)
			return c
		}
	}
	newStore = func(t *testing.T) func() topo.Conn {
		cur = newStore0()
		return open(t, cur)
	}
	return newStore, test.Options{
		ExpireSession: func(t *testing.T, conn topo.Conn) {
			c, ok := conn.(*templatetopo.Conn)
			require.Truef(t, ok, "not a *templatetopo.Conn: %T", conn)
			c.ExpireSession()
		},
		Partition: func(t *testing.T) test.Partitioned {
			c := open(t, cur)().(*templatetopo.Conn)
			return test.Partitioned{Conn: c, Cut: c.Cut, Heal: c.Heal}
		},
		SessionBound: sessionBound,
		FaultyStore: func(t *testing.T) test.FaultyStore {
			s := newStore0()
			return test.FaultyStore{
				Open:  open(t, s),
				Fault: func(t *testing.T) { s.Restart(restartRefusals) },
			}
		},
	}
}

// newStore0 returns a new Store; in a child process of the mutation kit
// running a claims engine mutant, its Conns' engines have the defect.
func newStore0() *templatetopo.Store {
	s := templatetopo.NewStore()
	s.SetClaimsDefect(mutation.EngineDefect())
	return s
}

// TestConformance runs the shared conformance suite against the template.
func TestConformance(t *testing.T) {
	newStore, opts := wiring()
	test.Run(t, newStore, opts)
}

// TestElectionHarness runs election/electiontest on the template through
// election.TopoFactory, one Conn per instance.
func TestElectionHarness(t *testing.T) {
	s := templatetopo.NewStore()
	newConn := func(t *testing.T) *templatetopo.Conn {
		c, err := s.NewConn("/global")
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	factory := func(t *testing.T, conn topo.Conn, id string) *election.TopoFactory {
		f, err := election.NewTopoFactory(conn, id)
		require.NoError(t, err)
		return f
	}
	electiontest.Run(t, func(t *testing.T, id string) election.Factory {
		return factory(t, newConn(t), id)
	}, electiontest.Options{
		LoseMastership: func(t *testing.T, f election.Factory) {
			f.(*election.TopoFactory).Conn().(*templatetopo.Conn).ExpireSession()
		},
		Partition: func(t *testing.T, id string) electiontest.Partitioned {
			c := newConn(t)
			return electiontest.Partitioned{Factory: factory(t, c, id), Cut: c.Cut, Heal: c.Heal}
		},
		SessionBound: sessionBound,
	})
}

// TestSessionLossEndsClaimsAtOnce: ExpireSession ends every claim on the
// Conn's session before it returns (test.RequireLossEndsClaims), as a
// backend built from this template must.
func TestSessionLossEndsClaimsAtOnce(t *testing.T) {
	for range 20 {
		_, conns := newConns(t, 1)
		test.RequireLossEndsClaims(t, conns[0], conns[0].ExpireSession)
	}
}
