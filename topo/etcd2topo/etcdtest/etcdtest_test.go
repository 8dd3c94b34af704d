package etcdtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

func newClient(t *testing.T, endpoints string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(endpoints, ","),
		DialTimeout: 5 * time.Second,
	})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestStart(t *testing.T) {
	addr := etcdtest.Start(t)
	require.True(t, strings.HasPrefix(addr, "127.0.0.1:"), addr)
	cli := newClient(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cli.Put(ctx, "k", "v")
	require.NoError(t, err)
	resp, err := cli.Get(ctx, "k")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, "v", string(resp.Kvs[0].Value))
}

func TestStartCluster(t *testing.T) {
	c := etcdtest.StartCluster(t, 3)
	require.Equal(t, 3, c.Size())
	require.Len(t, strings.Split(c.Endpoints(), ","), 3)
	cli := newClient(t, c.Endpoints())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	_, err := cli.Put(ctx, "k", "1")
	require.NoError(t, err)

	leader := c.LeaderIndex()
	c.StopMember(leader)
	require.False(t, c.Running(leader))
	next := c.LeaderIndex()
	require.NotEqual(t, leader, next)

	_, err = cli.Put(ctx, "k", "2")
	require.NoError(t, err)

	c.RestartMember(leader)
	require.True(t, c.Running(leader))
	// The restarted member catches up and serves the latest value.
	one := newClient(t, c.Addr(leader))
	require.Eventually(t, func() bool {
		resp, err := one.Get(ctx, "k")
		return err == nil && len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "2"
	}, 20*time.Second, 10*time.Millisecond)
}

// TestPasswordsHashedCheaply: the members etcdtest starts hash user
// passwords at bcrypt's lowest cost, single members and clusters alike
// (at etcd's default cost one authentication takes about a second under
// the race detector, enough to push a loaded CI past a 5 s dial bound).
func TestPasswordsHashedCheaply(t *testing.T) {
	require.Equal(t, uint(bcrypt.MinCost), etcdtest.StartMember(t).BcryptCost())
	require.Equal(t, uint(bcrypt.MinCost), etcdtest.StartCluster(t, 1).Member(0).BcryptCost())
}

// TestServerVersion: the members run the etcd server version
// ServerVersion names (TOPOKIT_ETCDTEST_SERVER), whatever etcd client
// this test is built with: run it with TOPOKIT_ETCDTEST_SERVER=v3.7.3 to
// see a 3.7 server.
func TestServerVersion(t *testing.T) {
	want, err := etcdtest.ServerVersion()
	require.NoError(t, err)
	addr := etcdtest.Start(t)
	cli := newClient(t, addr)
	st, err := cli.Status(context.Background(), addr)
	require.NoError(t, err)
	require.Equal(t, strings.TrimPrefix(want, "v"), st.Version)
}
