//go:build churn

package memorytopo_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/test"
)

// TestExclusionUnderChurn runs test.RequireExclusionUnderChurn (make
// test-churn) on a fresh store per subtest, partitioned through
// Conn.Partition.
func TestExclusionUnderChurn(t *testing.T) {
	var cur *memorytopo.Factory
	open := func() *memorytopo.Conn {
		c, err := cur.NewConn("mem", "/root")
		require.NoError(t, err)
		return c
	}
	test.RequireExclusionUnderChurn(t, func(t *testing.T) func() topo.Conn {
		cur = memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: conformanceSessionTTL})
		return func() topo.Conn { return open() }
	}, test.Options{
		Partition: func(t *testing.T) test.Partitioned {
			c := open()
			return test.Partitioned{Conn: c, Cut: c.Partition, Heal: c.Heal}
		},
		SessionBound: conformanceSessionTTL,
	})
}
