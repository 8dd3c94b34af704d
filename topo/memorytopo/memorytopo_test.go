package memorytopo_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/test"
)

// TestConformance runs the shared conformance suite against memorytopo: a
// fresh Factory (so a fresh store) per subtest, every Conn rooted at /root.
func TestConformance(t *testing.T) {
	test.Run(t, func(t *testing.T) func() topo.Conn {
		f := memorytopo.NewFactory()
		return func() topo.Conn {
			conn, err := f.Create("global", "mem", "/root")
			require.NoError(t, err)
			return conn
		}
	}, test.Options{
		ExpireSession: func(t *testing.T, conn topo.Conn) {
			mc, ok := conn.(*memorytopo.Conn)
			require.True(t, ok, "not a *memorytopo.Conn: %T", conn)
			mc.ExpireSession()
		},
	})
}
