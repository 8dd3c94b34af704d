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
	"github.com/topokit/topokit/topo/claims"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/test"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/test/mutation"
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
	return Options{Endpoints: strings.Split(endpoints, ","), LockTTL: 3 * time.Second, defect: mutation.EngineDefect()}
}

// suiteLockTTL is the LockTTL of the Conns the conformance suite never
// cuts off (its Options.Partition Conn keeps testOptions' 3 s, the
// SessionBound): long enough that a keep-alive stall under CI load does
// not make their shared leases lapse (with 3 s, renewals stalled about
// 1.4 s lost a lease and failed a TryLock on it with LockLost, "requested
// lease not found"), and unlike the TTLs the suite passes to LockWithTTL
// (30 s, 1 min), so that those locks still get leases of their own.
const suiteLockTTL = 20 * time.Second

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

// expireSession revokes every lease of conn, as if etcd had expired them,
// and returns once the Conn has noticed, as the suite requires.
func expireSession(t *testing.T, conn topo.Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, conn.(*Conn).RevokeLeases(ctx))
}

// TestConformance runs the shared suite on the package's etcd member (a
// fresh root per subtest). Partitions put a faultproxy in front of one
// Conn; the faulty store is a 3-member cluster whose leader is stopped and
// restarted.
func TestConformance(t *testing.T) {
	newStore, opts := wiring()
	test.Run(t, newStore, opts)
}

// TestMutants runs the mutation kit on etcd2topo, the claims engine's
// mutants included (testOptions puts mutation.EngineDefect into every
// Conn's engine): the suite must fail on each mutant and pass on the
// baseline. Targeted: each mutant against the subtest that catches it
// (the whole suite per mutant takes too long against a real server).
//
// Left out: engine-loss-keeps-claims. Its target, LeaderValues/
// ProclaimDeposed, expires the session in etcd, and on etcd the watch
// that follows each entry (followEntry) then ends the claim even when
// Session.Lost does not; the suite's Partition/Leader and
// Partition/Waiter, where the Conn cannot hear from etcd, catch it
// (TOPOKIT_SUITE_MUTANT=engine-loss-keeps-claims go test -run
// '^TestMutants$/^Partition$' fails).
func TestMutants(t *testing.T) {
	var names []string
	for _, m := range append(mutation.Mutants(), mutation.EngineMutants()...) {
		if m.Name != string(claims.DefectLossKeepsClaims) {
			names = append(names, m.Name)
		}
	}
	newStore, opts := wiring()
	mutation.Run(t, newStore, opts, mutation.Config{Mutants: names, Engine: true, Targeted: true, Parallel: 4, Timeout: 5 * time.Minute})
}

// wiring is the wiring of topo/test for etcd2topo: a fresh root per
// subtest on the package's etcd member, a faultproxy for partitions, a
// 3-member cluster for the faulty store.
func wiring() (newStore func(t *testing.T) func() topo.Conn, opts test.Options) {
	var root string // the current subtest's root (subtests run one at a time)
	return func(t *testing.T) func() topo.Conn {
			root = newRoot()
			r := root
			return func() topo.Conn {
				o := testOptions(serverAddr)
				o.LockTTL = suiteLockTTL
				c, err := NewConn(o, r)
				require.NoError(t, err)
				return c
			}
		}, test.Options{
			ExpireSession: expireSession,
			Partition: func(t *testing.T) test.Partitioned {
				p, err := faultproxy.New(serverAddr)
				require.NoError(t, err)
				t.Cleanup(func() { _ = p.Close() })
				c, err := NewConn(testOptions(p.Addr()), root)
				require.NoError(t, err)
				return test.Partitioned{Conn: c, Cut: p.Blackhole, Heal: p.Heal}
			},
			// The server expires a lease that is not renewed after its TTL.
			SessionBound: testOptions(serverAddr).LockTTL,
			FaultyStore: func(t *testing.T) test.FaultyStore {
				cl := etcdtest.StartCluster(t, 3)
				r := newRoot()
				return test.FaultyStore{
					// etcd reads are linearizable by default.
					Open: func() topo.Conn {
						c, err := NewConn(testOptions(cl.Endpoints()), r)
						require.NoError(t, err)
						return c
					},
					Fault: func(t *testing.T) {
						i := cl.LeaderIndex()
						cl.StopMember(i)
						cl.LeaderIndex()
						cl.RestartMember(i)
					},
				}
			},
		}
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

// connLeases returns the leases c holds now.
func connLeases(c *Conn) []*lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	leases := make([]*lease, 0, len(c.leases))
	for l := range c.leases {
		leases = append(leases, l)
	}
	return leases
}

// heldEntry is a test's view of the entry behind a lock descriptor or a
// participation's current term.
type heldEntry struct {
	key   string
	rev   int64
	lease *lease
	own   bool
}

// entryBehind returns the entry behind x: a topo.Fence (a lock
// descriptor or a term) or a topo.LeaderParticipation that leads.
func entryBehind(t testing.TB, x any) heldEntry {
	t.Helper()
	f, ok := x.(topo.Fence)
	if !ok {
		p, ok := x.(topo.LeaderParticipation)
		require.Truef(t, ok, "neither a Fence nor a participation: %T", x)
		var err error
		f, err = p.Term()
		require.NoError(t, err, "the participation does not lead")
	}
	g, ok := claims.FenceGuard(f)
	require.Truef(t, ok, "not a claims engine Fence: %T", f)
	l := g.Session().Ref().(*lease)
	return heldEntry{key: g.Entry().Key, rev: g.Entry().Token, lease: l, own: l.own}
}
