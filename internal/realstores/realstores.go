// Package realstores opens Conns of each backend on a real server of its
// store, for the tests of the packages built on topo.Conn (election,
// semaphore) that run one scenario on every store. It is test support:
// each server is started by the test that asks for it and stopped when
// that test ends.
package realstores

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// Store is one store's server, started for a test.
type Store struct {
	// Open returns a new Conn on the server, at the root All was given,
	// closed when t ends.
	Open func(t *testing.T) topo.Conn
	// Addr is the server's address (host:port) for the store's own
	// client; "" for memorytopo.
	Addr string
	// Dial returns a new Conn as Open does, on the server at addr (a
	// proxy in front of Addr); nil for memorytopo.
	Dial func(t *testing.T, addr string) topo.Conn
	// Expire ends c's session (memorytopo's ExpireSession; etcd: its
	// leases revoked) behind its claims and returns once c noticed. Nil
	// where the test has no such control (ZooKeeper, Consul): close the
	// Conn instead.
	Expire func(t *testing.T, c topo.Conn)
	// OpenCut returns a new Conn whose traffic can be cut, with a short
	// session or lease TTL (CutTTL), and the functions that cut and heal
	// it: memorytopo's Partition and Heal; on the real stores a
	// faultproxy in front of the server, Blackhole and Heal.
	OpenCut func(t *testing.T) (conn topo.Conn, cut, heal func())
	// CutTTL is the session or lease TTL of OpenCut's Conns (memorytopo:
	// the factory's session TTL; etcd: LockTTL; ZooKeeper: the session
	// timeout; Consul: SessionTTL).
	CutTTL time.Duration
}

// Names returns All's store names in the order tests run them.
func Names() []string { return []string{"memory", "etcd", "zookeeper", "consul"} }

// All returns, by store name (memory, etcd, zookeeper, consul), a
// function that starts that store's server for t (memorytopo: a factory
// whose sessions live 2 s) and returns its Store, whose Conns are rooted
// at root (a path such as "/sem"; Consul's root is the same without its
// leading slash).
func All(root string) map[string]func(t *testing.T) Store {
	return map[string]func(t *testing.T) Store{
		"memory": func(t *testing.T) Store {
			f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: 2 * time.Second})
			return Store{
				Open: func(t *testing.T) topo.Conn {
					c, err := f.NewConn("", root)
					require.NoError(t, err)
					t.Cleanup(c.Close)
					return c
				},
				Expire: func(t *testing.T, c topo.Conn) { c.(*memorytopo.Conn).ExpireSession() },
				OpenCut: func(t *testing.T) (topo.Conn, func(), func()) {
					c, err := f.NewConn("", root)
					require.NoError(t, err)
					t.Cleanup(c.Close)
					return c, c.Partition, c.Heal
				},
				CutTTL: 2 * time.Second,
			}
		},
		"etcd": func(t *testing.T) Store {
			addr := etcdtest.Start(t)
			dial := func(t *testing.T, addr string) topo.Conn {
				c, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{addr}}, root)
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			}
			return Store{
				Open: func(t *testing.T) topo.Conn { return dial(t, addr) },
				Addr: addr,
				Dial: dial,
				Expire: func(t *testing.T, c topo.Conn) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					require.NoError(t, c.(*etcd2topo.Conn).RevokeLeases(ctx))
				},
				OpenCut: func(t *testing.T) (topo.Conn, func(), func()) {
					p := proxy(t, addr)
					c, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{p.Addr()}, LockTTL: 2 * time.Second}, root)
					require.NoError(t, err)
					t.Cleanup(c.Close)
					return c, p.Blackhole, p.Heal
				},
				CutTTL: 2 * time.Second,
			}
		},
		"zookeeper": func(t *testing.T) Store {
			addr := zktest.Start(t)
			dial := func(t *testing.T, addr string) topo.Conn {
				c, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}}, root)
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			}
			return Store{
				Open: func(t *testing.T) topo.Conn { return dial(t, addr) },
				Addr: addr,
				Dial: dial,
				OpenCut: func(t *testing.T) (topo.Conn, func(), func()) {
					p := proxy(t, addr)
					c, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{p.Addr()}, SessionTimeout: 4 * time.Second}, root)
					require.NoError(t, err)
					t.Cleanup(c.Close)
					return c, p.Blackhole, p.Heal
				},
				CutTTL: 4 * time.Second,
			}
		},
		"consul": func(t *testing.T) Store {
			addr := consultest.Start(t)
			dial := func(t *testing.T, addr string) topo.Conn {
				c, err := consultopo.NewConn(consultopo.Options{Address: addr, MinSessionTTL: consultest.SessionTTLMin}, root[1:])
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			}
			return Store{
				Open: func(t *testing.T) topo.Conn { return dial(t, addr) },
				Addr: addr,
				Dial: dial,
				OpenCut: func(t *testing.T) (topo.Conn, func(), func()) {
					p := proxy(t, addr)
					c, err := consultopo.NewConn(consultopo.Options{Address: p.Addr(), SessionTTL: 4 * time.Second, MinSessionTTL: consultest.SessionTTLMin}, root[1:])
					require.NoError(t, err)
					t.Cleanup(c.Close)
					return c, p.Blackhole, p.Heal
				},
				CutTTL: 4 * time.Second,
			}
		},
	}
}

// proxy starts a faultproxy in front of addr, closed when t ends.
func proxy(t *testing.T, addr string) *faultproxy.Proxy {
	p, err := faultproxy.New(addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}
