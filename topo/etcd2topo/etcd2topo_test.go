package etcd2topo

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/test"
)

// serverAddr is the package's shared etcd member, started by TestMain.
// Every test uses its own root on it.
var serverAddr string

var rootCount atomic.Int64

func TestMain(m *testing.M) {
	addr, stop, err := etcdtest.Launch()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serverAddr = addr
	code := m.Run()
	stop()
	os.Exit(code)
}

// newRoot returns a root no other test uses.
func newRoot() string { return fmt.Sprintf("/test%d", rootCount.Add(1)) }

// testOptions are the Options tests open Conns with: short lock TTLs so
// that lapses are quick.
func testOptions(endpoints string) Options {
	return Options{Endpoints: strings.Split(endpoints, ","), LockTTL: 3 * time.Second}
}

// openConn opens a Conn on endpoints at root and closes it at test end.
func openConn(t testing.TB, endpoints, root string) *Conn {
	t.Helper()
	c, err := NewConn(testOptions(endpoints), root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// rawClient returns a plain etcd client on endpoints, closed at test end.
func rawClient(t testing.TB, endpoints string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoints, ","), DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return cli
}

// leaseIDs returns the ids of the Conn's live leases (test hook).
func (c *Conn) leaseIDs() []clientv3.LeaseID {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]clientv3.LeaseID, 0, len(c.leases))
	for l := range c.leases {
		ids = append(ids, l.id)
	}
	return ids
}

// expireSession revokes every lease of conn through a separate client, as
// if etcd had expired them: the Conn is not told.
func expireSession(t *testing.T, conn topo.Conn) {
	t.Helper()
	c := conn.(*Conn)
	cli := rawClient(t, serverAddr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, id := range c.leaseIDs() {
		_, err := cli.Revoke(ctx, id)
		require.NoError(t, err)
	}
}

func TestSuite(t *testing.T) {
	test.Run(t, func(t *testing.T) func() topo.Conn {
		root := newRoot()
		return func() topo.Conn {
			c, err := NewConn(testOptions(serverAddr), root)
			require.NoError(t, err)
			return c
		}
	}, test.Options{ExpireSession: expireSession})
}

func TestFactoryRegistered(t *testing.T) {
	f, err := topo.GetFactory("etcd2")
	require.NoError(t, err)
	conn, err := f.Create("global", serverAddr, newRoot())
	require.NoError(t, err)
	defer conn.Close()
	ctx := context.Background()
	v, err := conn.Create(ctx, "a/b", []byte("x"))
	require.NoError(t, err)
	data, v2, err := conn.Get(ctx, "a/b")
	require.NoError(t, err)
	require.Equal(t, "x", string(data))
	require.Equal(t, v, v2)

	_, err = f.Create("global", "", "/r")
	require.ErrorIs(t, err, topo.InvalidArgument)
	_, err = f.Create("global", serverAddr, "/r/../x")
	require.ErrorIs(t, err, topo.InvalidPath)
}
