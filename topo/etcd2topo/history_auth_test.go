package etcd2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// TestWatchFromRevisionRefusedIsPermissionDenied: a history watch that
// etcd refuses for want of credentials or permission ends with
// PermissionDenied (so that a caller stops retrying), whichever of etcd's
// auth refusals it was: a Conn without credentials (etcd: user name is
// empty) and a user with no role (permission denied).
func TestWatchFromRevisionRefusedIsPermissionDenied(t *testing.T) {
	am := etcdtest.StartWithAuth(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nobody, err := NewConn(Options{Endpoints: []string{am.Addr}, Username: am.Nobody.Name, Password: am.Nobody.Password}, "/auth")
	require.NoError(t, err)
	t.Cleanup(nobody.Close)
	for name, c := range map[string]*Conn{"no credentials": openConn(t, am.Addr, "/auth"), "no role": nobody} {
		_, err := c.WatchFromRevision(ctx, "d/f", false, 1, func(backendkit.RevisionEvent) error { return nil })
		require.ErrorIs(t, err, topo.PermissionDenied, name)
	}
}
