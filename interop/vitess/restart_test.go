package vitessinterop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	vtopo "vitess.io/vitess/go/vt/topo"
	vconsul "vitess.io/vitess/go/vt/topo/consultopo"
	vetcd "vitess.io/vitess/go/vt/topo/etcd2topo"
	vzk "vitess.io/vitess/go/vt/topo/zk2topo"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// restartable is a server of its own that a test restarts, with Conns of
// both libraries on it.
type restartable struct {
	restart func()
	root    string
	vitess  func() vtopo.Conn
	topokit func() topo.Conn
	// entries counts the lock entries of dir (nil on Consul), owned
	// lists what sessions or leases own under root.
	entries func(dir string) int
	owned   func() []string
}

func startRestartable(t *testing.T, name string) restartable {
	switch name {
	case "etcd":
		c := etcdtest.StartCluster(t, 1)
		addr := c.Addr(0)
		raw := func() *clientv3.Client {
			cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: wait})
			require.NoError(t, err)
			return cli
		}
		return restartable{
			restart: func() { c.StopMember(0); c.RestartMember(0) },
			root:    "/restart",
			vitess: func() vtopo.Conn {
				v, err := vetcd.Factory{}.Create("zone1", addr, "/restart")
				require.NoError(t, err)
				t.Cleanup(v.Close)
				return v
			},
			topokit: func() topo.Conn {
				k, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{addr}}, "/restart")
				require.NoError(t, err)
				t.Cleanup(k.Close)
				return k
			},
			entries: func(dir string) int {
				cli := raw()
				defer cli.Close()
				resp, err := cli.Get(testCtx(t), "/restart/"+dir+"/locks/", clientv3.WithPrefix(), clientv3.WithCountOnly())
				require.NoError(t, err)
				return int(resp.Count)
			},
			owned: func() []string {
				cli := raw()
				defer cli.Close()
				resp, err := cli.Get(testCtx(t), "/restart/", clientv3.WithPrefix())
				require.NoError(t, err)
				var out []string
				for _, kv := range resp.Kvs {
					if kv.Lease != 0 {
						out = append(out, string(kv.Key))
					}
				}
				return out
			},
		}
	case "zk":
		e := zktest.StartEnsemble(t, 1)
		addr := e.Addr(0)
		raw := func() *zk.Conn {
			z, _, err := zk.Connect([]string{addr}, 30*time.Second, zk.WithLogInfo(false))
			require.NoError(t, err)
			return z
		}
		z := raw()
		_, err := z.Create("/restart", nil, 0, zk.WorldACL(zk.PermAll))
		require.NoError(t, err)
		z.Close()
		return restartable{
			restart: func() { e.Restart(0) },
			root:    "/restart",
			vitess: func() vtopo.Conn {
				v, err := vzk.Factory{}.Create("zone1", addr, "/restart")
				require.NoError(t, err)
				t.Cleanup(v.Close)
				return v
			},
			topokit: func() topo.Conn {
				k, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}}, "/restart")
				require.NoError(t, err)
				t.Cleanup(k.Close)
				return k
			},
			entries: func(dir string) int {
				z := raw()
				defer z.Close()
				ch, _, err := z.Children("/restart/" + dir + "/locks")
				if errors.Is(err, zk.ErrNoNode) {
					return 0
				}
				require.NoError(t, err)
				return len(ch)
			},
			owned: func() []string {
				z := raw()
				defer z.Close()
				return zkOwnedOn(t, z, "/restart")
			},
		}
	default:
		a := consultest.StartAgentWithOptions(t, consultest.AgentOptions{Persistent: true})
		addr := a.Addr()
		return restartable{
			restart: func() { a.Restart(t) },
			root:    "restart",
			vitess: func() vtopo.Conn {
				v, err := vconsul.Factory{}.Create("zone1", addr, "restart")
				require.NoError(t, err)
				t.Cleanup(v.Close)
				return v
			},
			topokit: func() topo.Conn {
				k, err := consultopo.NewConn(consultopo.Options{Address: addr, MinSessionTTL: consultest.SessionTTLMin}, "restart")
				require.NoError(t, err)
				t.Cleanup(k.Close)
				return k
			},
			owned: func() []string {
				cli, err := api.NewClient(&api.Config{Address: addr})
				require.NoError(t, err)
				kvs, _, err := cli.KV().List("restart/", &api.QueryOptions{RequireConsistent: true})
				require.NoError(t, err)
				var out []string
				for _, kv := range kvs {
					if kv.Session != "" {
						out = append(out, fmt.Sprintf("%s (session %s)", kv.Key, kv.Session))
					}
				}
				return out
			},
		}
	}
}

// TestServerRestartWhileTopokitHolds restarts the server (a member, a
// node, an agent of their own, keeping their data) while topokit holds a
// lock and a Vitess process waits for it. When Vitess gets the lock,
// topokit's holder has given it up (Done closed): either it kept the lock
// across the restart (Check nil, Vitess still waiting) and released it,
// or it learned that it lost it. Nothing is left owned.
func TestServerRestartWhileTopokitHolds(t *testing.T) {
	for _, name := range []string{"etcd", "zk", "consul"} {
		t.Run(name, func(t *testing.T) {
			r := startRestartable(t, name)
			ctx := testCtx(t)
			vc, tc := r.vitess(), r.topokit()
			_, err := tc.Create(ctx, "d/f", []byte("x"))
			require.NoError(t, err)
			tld, err := tc.Lock(ctx, "d", "topokit-holder")
			require.NoError(t, err)
			type won struct {
				ld         vtopo.LockDescriptor
				err        error
				doneClosed bool
			}
			vgot := make(chan won, 1)
			go func() {
				// Vitess's Lock may fail while the server restarts (a
				// reset connection); it tries again, as its callers do.
				for {
					ld, err := vc.Lock(ctx, "d", "vitess-holder")
					if err != nil && ctx.Err() == nil {
						select {
						case <-ctx.Done():
						case <-time.After(20 * time.Millisecond):
						}
						continue
					}
					vgot <- won{ld, err, doneClosed(tld)}
					return
				}
			}()
			if r.entries != nil {
				for r.entries("d") != 2 {
					select {
					case <-ctx.Done():
						t.Fatal("Vitess never queued")
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
			r.restart()
			cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			err = tld.Check(cctx)
			cancel()
			t.Logf("topokit's Check after the restart: %v", err)
			if err == nil {
				select {
				case w := <-vgot:
					t.Fatalf("Vitess got the lock (%v) while topokit's Check passes", w.err)
				default:
				}
				require.NoError(t, tld.Unlock(ctx))
			} else {
				require.True(t, topo.IsErrType(err, topo.LockLost), "topokit's Check after the restart: %v", err)
			}
			w := <-vgot
			require.NoError(t, w.err)
			assert.True(t, w.doneClosed, "Vitess took the lock while topokit's Done was open")
			_, err = tc.TryLock(ctx, "d", "topokit-try")
			require.True(t, topo.IsErrType(err, topo.NodeExists), "TryLock while Vitess holds: %v", err)

			// Vitess holds and topokit waits across a second restart:
			// topokit gets the lock only after Vitess's release.
			released := make(chan struct{})
			tgot := make(chan error, 1)
			go func() {
				for {
					ld, err := tc.Lock(ctx, "d", "topokit-waiter")
					if err == nil {
						select {
						case <-released:
						default:
							t.Error("topokit got the lock before Vitess released it")
						}
						err = ld.Unlock(ctx)
						tgot <- err
						return
					}
					if ctx.Err() != nil {
						tgot <- err
						return
					}
					t.Logf("topokit's Lock across the restart: %v; again", err)
					select {
					case <-ctx.Done():
					case <-time.After(100 * time.Millisecond):
					}
				}
			}()
			if r.entries != nil {
				for r.entries("d") != 2 {
					select {
					case <-ctx.Done():
						t.Fatal("topokit never queued")
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
			r.restart()
			// Vitess's Consul lock (api.Lock) gives itself up when its
			// monitor loses the agent: then it no longer holds, by its
			// own account, and topokit may take the lock as soon as the
			// store lets it.
			if err := w.ld.Check(ctx); err != nil {
				t.Logf("Vitess's Check after the restart: %v", err)
				close(released)
				t.Logf("Vitess's Unlock after its loss: %v", w.ld.Unlock(ctx))
			} else {
				close(released)
				require.NoError(t, w.ld.Unlock(ctx))
			}
			require.NoError(t, <-tgot)
			tld, err = tc.TryLock(ctx, "d", "topokit-after")
			require.NoError(t, err)
			require.NoError(t, tld.Unlock(ctx))
			for {
				got := r.owned()
				if len(got) == 0 {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("left: %v", got)
				case <-time.After(20 * time.Millisecond):
				}
			}
		})
	}
}
