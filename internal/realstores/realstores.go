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
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// Store is one store's server, started for a test.
type Store struct {
	// Open returns a new Conn on the server, at the root All was given,
	// closed when t ends.
	Open func(t *testing.T) topo.Conn
	// Expire ends c's session (memorytopo's ExpireSession; etcd: its
	// leases revoked) behind its claims and returns once c noticed. Nil
	// where the test has no such control (ZooKeeper, Consul): close the
	// Conn instead.
	Expire func(t *testing.T, c topo.Conn)
}

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
			}
		},
		"etcd": func(t *testing.T) Store {
			addr := etcdtest.Start(t)
			return Store{
				Open: func(t *testing.T) topo.Conn {
					c, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{addr}}, root)
					require.NoError(t, err)
					t.Cleanup(c.Close)
					return c
				},
				Expire: func(t *testing.T, c topo.Conn) {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					require.NoError(t, c.(*etcd2topo.Conn).RevokeLeases(ctx))
				},
			}
		},
		"zookeeper": func(t *testing.T) Store {
			addr := zktest.Start(t)
			return Store{Open: func(t *testing.T) topo.Conn {
				c, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}}, root)
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			}}
		},
		"consul": func(t *testing.T) Store {
			addr := consultest.Start(t)
			return Store{Open: func(t *testing.T) topo.Conn {
				c, err := consultopo.NewConn(consultopo.Options{Address: addr, MinSessionTTL: consultest.SessionTTLMin}, root[1:])
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			}}
		},
	}
}
