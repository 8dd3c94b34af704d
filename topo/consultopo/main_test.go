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
	return Options{Address: agent.Addr(), WatchPollDuration: 2 * time.Second}
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
	c, err := NewConn(testOptions(), root)
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
// operator or a session TTL lapse would.
func expireSession(t *testing.T, conn topo.Conn) {
	t.Helper()
	c, ok := conn.(*Conn)
	require.Truef(t, ok, "ExpireSession got a %T, not a *consultopo.Conn", conn)
	raw := rawClient(t)
	for _, id := range c.sessionIDs() {
		_, err := raw.Session().Destroy(id, (&api.WriteOptions{}).WithContext(context.Background()))
		require.NoError(t, err)
	}
}

func TestSuite(t *testing.T) {
	test.Run(t, func(t *testing.T) func() topo.Conn {
		root := testRoot(t)
		return func() topo.Conn {
			c, err := NewConn(testOptions(), root)
			require.NoError(t, err)
			return c
		}
	}, test.Options{GetVersionUnsupported: true, ExpireSession: expireSession})
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
