package semaphore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/internal/realstores"
	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
)

// rawSem opens Conns on a real store and reads and kills in it with the
// store's own client.
type rawSem struct {
	open func(t *testing.T) topo.Conn
	// keys lists the keys under the semaphore directory d that live on a
	// session or lease (locks, queue entries).
	keys func(t *testing.T, d string) []string
	// all lists every key under d.
	all func(t *testing.T, d string) []string
	// kill ends the session or lease of contender id's lock behind its
	// Conn's back.
	kill func(t *testing.T, d, id string)
}

func rawSems() map[string]func(t *testing.T) rawSem {
	return map[string]func(t *testing.T) rawSem{
		"etcd": func(t *testing.T) rawSem {
			st := realstores.All("/sem")["etcd"](t)
			raw, err := clientv3.New(clientv3.Config{Endpoints: []string{st.Addr}, DialTimeout: 5 * time.Second})
			require.NoError(t, err)
			t.Cleanup(func() { _ = raw.Close() })
			leased := func(t *testing.T, prefix string) (keys []string, leases []clientv3.LeaseID) {
				resp, err := raw.Get(context.Background(), prefix, clientv3.WithPrefix())
				require.NoError(t, err)
				for _, kv := range resp.Kvs {
					if kv.Lease != 0 {
						keys = append(keys, string(kv.Key))
						leases = append(leases, clientv3.LeaseID(kv.Lease))
					}
				}
				return keys, leases
			}
			return rawSem{
				open: st.Open,
				keys: func(t *testing.T, d string) []string {
					k, _ := leased(t, "/sem/"+d+"/")
					return k
				},
				all: func(t *testing.T, d string) []string {
					resp, err := raw.Get(context.Background(), "/sem/"+d+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
					require.NoError(t, err)
					var out []string
					for _, kv := range resp.Kvs {
						out = append(out, strings.TrimPrefix(string(kv.Key), "/sem/"+d+"/"))
					}
					return out
				},
				kill: func(t *testing.T, d, id string) {
					_, ls := leased(t, "/sem/"+d+"/contenders/"+id+"/")
					require.NotEmpty(t, ls)
					_, err := raw.Revoke(context.Background(), ls[0])
					require.NoError(t, err)
				},
			}
		},
		"consul": func(t *testing.T) rawSem {
			st := realstores.All("/sem")["consul"](t)
			raw, err := consulapi.NewClient(&consulapi.Config{Address: st.Addr})
			require.NoError(t, err)
			sessioned := func(t *testing.T, prefix string) (keys, sessions []string) {
				pairs, _, err := raw.KV().List(prefix, nil)
				require.NoError(t, err)
				for _, p := range pairs {
					if p.Session != "" {
						keys = append(keys, p.Key)
						sessions = append(sessions, p.Session)
					}
				}
				return keys, sessions
			}
			return rawSem{
				open: st.Open,
				keys: func(t *testing.T, d string) []string {
					k, _ := sessioned(t, "sem/"+d+"/")
					return k
				},
				all: func(t *testing.T, d string) []string {
					keys, _, err := raw.KV().Keys("sem/"+d+"/", "", nil)
					require.NoError(t, err)
					for i, k := range keys {
						keys[i] = strings.TrimPrefix(k, "sem/"+d+"/")
					}
					return keys
				},
				kill: func(t *testing.T, d, id string) {
					_, ss := sessioned(t, "sem/"+d+"/contenders/"+id+"/")
					require.NotEmpty(t, ss)
					_, err := raw.Session().Destroy(ss[0], nil)
					require.NoError(t, err)
				},
			}
		},
	}
}

// TestRawStoreHolderKilled: with capacity 2, the session or lease of one
// holder is ended behind its back (etcd lease revoked, Consul session
// destroyed) while a contender waits: the contender is admitted in its
// place (never a third holder), the killed holder's Done closes and its
// fence fails, the other holder keeps its slot, a contender that gives up
// leaves nothing in the store, and once all release only the record is
// left.
func TestRawStoreHolderKilled(t *testing.T) {
	for name, start := range rawSems() {
		t.Run(name, func(t *testing.T) {
			rs := start(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			d := dir(t)
			newSem := func() *semaphore.Semaphore {
				s, err := semaphore.New(rs.open(t), d, 2, semaphore.Options{ProbeInterval: 50 * time.Millisecond})
				require.NoError(t, err)
				return s
			}
			s1, s2, s3, s4 := newSem(), newSem(), newSem(), newSem()
			h1, err := s1.Acquire(ctx)
			require.NoError(t, err)
			h2, err := s2.Acquire(ctx)
			require.NoError(t, err)
			hs, err := s1.Holders(ctx)
			require.NoError(t, err)
			require.Len(t, hs, 2)
			got := make(chan topo.LockDescriptor, 1)
			go func() {
				w, err := s3.Acquire(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				got <- w
			}()
			require.Eventually(t, func() bool {
				n := 0
				for _, k := range rs.keys(t, d) {
					if strings.Contains(k, "/contenders/") {
						n++
					}
				}
				return n >= 3 // h1, h2 and the waiter, which holds the gate then
			}, 20*time.Second, 10*time.Millisecond)
			// A second waiter, queued behind the first (which holds the gate),
			// gives up later.
			xctx, xcancel := context.WithCancel(ctx)
			xerr := make(chan error, 1)
			go func() {
				_, err := s4.Acquire(xctx)
				xerr <- err
			}()
			rs.kill(t, d, hs[0].ID)
			var w topo.LockDescriptor
			select {
			case w = <-got:
			case <-ctx.Done():
				t.Fatal("the waiter was never admitted")
			}
			select {
			case <-h1.Done():
			case <-ctx.Done():
				t.Fatal("the killed holder's Done never closed")
			}
			require.Error(t, h1.Check(ctx))
			require.NoError(t, h2.Check(ctx))
			require.Greater(t, w.Token(), h2.Token())
			hs, err = s1.Holders(ctx)
			require.NoError(t, err)
			require.Len(t, hs, 2, "holders: %v", hs)
			xcancel()
			require.ErrorIs(t, <-xerr, topo.Interrupted)
			require.ErrorIs(t, h1.Unlock(ctx), topo.LockLost)
			require.NoError(t, h2.Unlock(ctx))
			require.NoError(t, w.Unlock(ctx))
			require.Eventually(t, func() bool { return len(rs.keys(t, d)) == 0 }, 20*time.Second, 10*time.Millisecond,
				"left in the store: %v", fmt.Sprint(rs.keys(t, d)))
			hs, err = s1.Holders(ctx)
			require.NoError(t, err)
			require.Empty(t, hs)
			require.Equal(t, []string{"holders"}, rs.all(t, d))
		})
	}
}
