package etcd2topo

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// TestNewConnRefusesTwoClusters: endpoints of two different etcd
// clusters are refused at open with InvalidArgument wrapping
// ErrClusterMismatch naming both endpoints, and nothing is written; two
// endpoints of one cluster (the same member twice) are accepted.
func TestNewConnRefusesTwoClusters(t *testing.T) {
	a, b := etcdtest.Start(t), etcdtest.Start(t)
	_, err := NewConn(Options{Endpoints: []string{a, b}}, "/two")
	require.Error(t, err)
	require.True(t, errors.Is(err, ErrClusterMismatch), "%v", err)
	require.True(t, topo.IsErrType(err, topo.InvalidArgument), "%v", err)
	require.ErrorContains(t, err, a)
	require.ErrorContains(t, err, b)
	for _, ep := range []string{a, b} {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}})
		require.NoError(t, err)
		resp, err := cli.Get(context.Background(), "/two", clientv3.WithPrefix(), clientv3.WithCountOnly())
		cli.Close()
		require.NoError(t, err)
		require.Zero(t, resp.Count)
	}
	c, err := NewConn(Options{Endpoints: []string{a, a}}, "/one")
	require.NoError(t, err)
	c.Close()
}
