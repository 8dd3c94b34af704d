package consultopo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/test"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/test/mutation"
)

// agent is the Consul dev agent shared by every test of the package; each
// test works under a root of its own.
var agent *consultest.Agent

func TestMain(m *testing.M) {
	var err error
	agent, err = consultest.NewAgent()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	agent.Stop()
	os.Exit(code)
}

// testOptions are the options of the tests' Conns: the defaults, except a
// short blocking-query wait so that a restarted agent is noticed quickly.
func testOptions() Options {
	// The claims engine's defect of a mutation kit child (TestMutants),
	// none otherwise.
	return Options{Address: agent.Addr(), WatchPollDuration: 2 * time.Second, defect: mutation.EngineDefect()}
}

// shortTTL is the session TTL of shortTTLOptions: the test agents accept
// TTLs down to consultest.SessionTTLMin, so waits for a session that
// lapses take seconds.
const shortTTL = 4 * time.Second

// shortTTLOptions is testOptions with sessions of shortTTL.
func shortTTLOptions() Options {
	o := testOptions()
	o.MinSessionTTL, o.SessionTTL = consultest.SessionTTLMin, shortTTL
	return o
}

// testRoot returns a root unique to the call (named after t, with a random
// suffix so that -count=N runs on the shared agent do not collide).
func testRoot(t testing.TB) string {
	r := strings.NewReplacer("/", "_", " ", "_", "#", "_")
	return "topokit-test/" + r.Replace(t.Name()) + "-" + strconv.FormatUint(rand.Uint64(), 36)
}

// newTestConn opens a Conn under root, closed at the end of t.
func newTestConn(t testing.TB, root string) *Conn {
	t.Helper()
	return newConnWith(t, testOptions(), root)
}

// newShortTTLConn is newTestConn with sessions of shortTTL, for a test
// that destroys the Conn's sessions (expireSession): the Conn notices at
// its next renewal, every half TTL (7.5 s with the default TTL).
func newShortTTLConn(t testing.TB, root string) *Conn {
	t.Helper()
	return newConnWith(t, shortTTLOptions(), root)
}

// newConnWith opens a Conn with opts under root, closed at the end of t.
func newConnWith(t testing.TB, opts Options, root string) *Conn {
	t.Helper()
	c, err := NewConn(opts, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// rawClient returns a plain consul api client on the shared agent.
func rawClient(t testing.TB) *api.Client {
	t.Helper()
	cfg := api.DefaultConfig()
	cfg.Address = agent.Addr()
	c, err := api.NewClient(cfg)
	require.NoError(t, err)
	return c
}

// expireSession destroys every session of conn through the raw api, as an
// operator or a session TTL lapse would, and returns once the Conn has
// noticed (each session is marked lost), as the suite requires.
func expireSession(t *testing.T, conn topo.Conn) {
	t.Helper()
	c, ok := conn.(*Conn)
	require.Truef(t, ok, "ExpireSession got a %T, not a *consultopo.Conn", conn)
	sessions := connSessions(c)
	raw := rawClient(t)
	for _, s := range sessions {
		_, err := raw.Session().Destroy(s.id, (&api.WriteOptions{}).WithContext(context.Background()))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		for _, s := range sessions {
			if !s.lost() {
				return false
			}
		}
		return true
	}, 2*MinSessionTTL+30*time.Second, time.Millisecond, "the Conn did not notice that its sessions were destroyed")
}

// TestConformance runs the shared suite on the package's dev agent (a
// fresh root per subtest). Partitions put a faultproxy in front of one
// Conn; the faulty store is a persistent single-server agent that is
// restarted.
func TestConformance(t *testing.T) {
	newStore, opts := conformanceWiring()
	test.Run(t, newStore, opts)
}

// conformanceWiring returns the shared suite's store opener and options
// for the package's agents.
func conformanceWiring() (func(t *testing.T) func() topo.Conn, test.Options) {
	var root string // the current subtest's root (subtests run one at a time)
	return func(t *testing.T) func() topo.Conn {
			root = testRoot(t)
			r := root
			return func() topo.Conn {
				c, err := NewConn(shortTTLOptions(), r)
				require.NoError(t, err)
				return c
			}
		}, test.Options{
			GetVersionUnsupported: true,
			ExpireSession:         expireSession,
			Partition: func(t *testing.T) test.Partitioned {
				p, err := faultproxy.New(agent.Addr())
				require.NoError(t, err)
				t.Cleanup(func() { _ = p.Close() })
				opts := shortTTLOptions()
				opts.Address = p.Addr()
				c, err := NewConn(opts, root)
				require.NoError(t, err)
				return test.Partitioned{Conn: c, Cut: p.Blackhole, Heal: p.Heal}
			},
			// Consul invalidates a session up to twice its TTL after the last
			// renewal, and then holds its locks back for the lock-delay.
			SessionBound: 2*shortTTL + DefaultLockDelay,
			FaultyStore: func(t *testing.T) test.FaultyStore {
				a := consultest.StartAgentWithOptions(t, consultest.AgentOptions{Persistent: true})
				r := testRoot(t)
				opener := func(reads ReadMode) func() topo.Conn {
					return func() topo.Conn {
						opts := shortTTLOptions()
						opts.Address = a.Addr()
						opts.Reads = reads
						c, err := NewConn(opts, r)
						require.NoError(t, err)
						return c
					}
				}
				return test.FaultyStore{
					// The defaults (consistent reads) must give read-your-writes;
					// the linearizability check asks for consistent reads
					// explicitly.
					Open:             opener(testOptions().Reads),
					OpenLinearizable: opener(ReadConsistent),
					Fault:            func(t *testing.T) { a.Restart(t) },
				}
			},
		}
}

func TestFactoryRegistered(t *testing.T) {
	f, err := topo.GetFactory(FactoryName)
	require.NoError(t, err)
	c, err := f.Create("cell", agent.Addr(), testRoot(t))
	require.NoError(t, err)
	defer c.Close()
	ctx := t.Context()
	v, err := c.Create(ctx, "a/b", []byte("x"))
	require.NoError(t, err)
	got, v2, err := c.Get(ctx, "/a/b")
	require.NoError(t, err)
	require.Equal(t, "x", string(got))
	require.Equal(t, v, v2)
}

// connSessions returns the sessions c holds now.
func connSessions(c *Conn) []*session {
	c.mu.Lock()
	defer c.mu.Unlock()
	sessions := make([]*session, 0, len(c.sessions))
	for s := range c.sessions {
		sessions = append(sessions, s)
	}
	return sessions
}
