package etcd2topo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestFactoryErrorGivesNilConn: a failed CreateContext returns a nil
// topo.Conn, not a nil *Conn inside one (whose Close a caller would call).
func TestFactoryErrorGivesNilConn(t *testing.T) {
	c, err := Factory{}.CreateContext(context.Background(), "", "", "/x")
	require.True(t, topo.IsErrType(err, topo.InvalidArgument), "%v", err)
	require.True(t, c == nil, "a failed CreateContext returned %#v", c)
}
