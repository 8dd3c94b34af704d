package topoctl

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// blackholed returns the address of a proxy to addr that accepts
// connections and passes nothing: a store that never answers.
func blackholed(t *testing.T, addr string) string {
	t.Helper()
	px, err := faultproxy.New(addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	px.Blackhole()
	return px.Addr()
}

// --timeout bounds opening a store that accepts connections and never
// answers: the backend itself gives up at the dial bound --timeout sets
// (half of 6s), with its Unavailable error naming the address and that
// bound, where it waited its own 5s before.
func TestOpenBoundedByTimeout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		impl, root string
		start      func(testing.TB) string
		says       string
	}{
		{"etcd2", "/r", etcdtest.Start, "no etcd member answered at "},
		{"zk2", "/r", zktest.Start, "no ZooKeeper server at "},
		{"consul", "r", consultest.Start, "no Consul agent answered at "},
	} {
		t.Run(c.impl, func(t *testing.T) {
			t.Parallel()
			addr := blackholed(t, c.start(t))
			tg := target{impl: c.impl, addr: addr, root: c.root}
			r := tg.fails(t, ExitFailure, []string{"topoctl: Unavailable: ", c.says + addr}, "--timeout", "6s", "get", "x")
			assert.Contains(t, r.stderr, "within 3s", "the dial bound --timeout set ended the open")
			assert.NotContains(t, r.stderr, "within 5s")
		})
	}
}

// A cell's store is opened with the same bound: one that never answers
// fails with the backend's Unavailable naming its address, not with the
// Timeout of the --timeout that bounds the cell's lookup.
func TestOpenCellBoundedByTimeout(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	tg := target{impl: "etcd2", addr: addr, root: "/" + t.Name()}
	cellAddr := blackholed(t, addr)
	tg.ok(t, "cell", "set", "zone1", "--server-address", cellAddr, "--root", "/z1")
	r := tg.fails(t, ExitFailure, []string{"Unavailable: ", "no etcd member answered at " + cellAddr + " within 2s"}, "--timeout", "4s", "--cell", "zone1", "get", "x")
	assert.NotContains(t, r.stderr, "Timeout")
}

// The dial and the TLS diagnosis of its failure share --timeout: both
// get some of it and, from 4s, together less, leaving a margin for what
// precedes them; a short --timeout (a lock's wait) leaves them their
// least.
func TestDialBounds(t *testing.T) {
	for _, timeout := range []time.Duration{10 * time.Millisecond, 200 * time.Millisecond, time.Second, 4 * time.Second, 5 * time.Second, 16 * time.Second, 30 * time.Second, time.Hour} {
		dial, diag := dialBounds(timeout)
		assert.GreaterOrEqual(t, dial, minDialBound, timeout)
		assert.GreaterOrEqual(t, diag, minProbeBound, timeout)
		if timeout >= 4*time.Second {
			assert.Less(t, dial+diag, timeout)
		}
		assert.LessOrEqual(t, dial, storeDialBound)
		assert.LessOrEqual(t, diag, tlsProbeBound)
	}
	dial, diag := dialBounds(200 * time.Millisecond)
	assert.Equal(t, minDialBound, dial, "a lock's short wait does not cut the connection's dial")
	assert.Equal(t, minProbeBound, diag)
	dial, _ = dialBounds(6 * time.Second)
	assert.Equal(t, 3*time.Second, dial)
	dial, diag = dialBounds(0)
	assert.Zero(t, dial, "no --timeout: the backends' own dial bound")
	assert.Equal(t, tlsProbeBound, diag)
}
