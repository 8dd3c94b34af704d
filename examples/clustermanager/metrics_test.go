package main

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// scrape GETs addr's /metrics and returns its samples by series, as the
// Prometheus text format writes them (labels sorted by name).
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := follow.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		require.Positive(t, i, l)
		v, err := strconv.ParseFloat(l[i+1:], 64)
		require.NoError(t, err, l)
		out[l[:i]] = v
	}
	require.NoError(t, sc.Err())
	return out
}

// Every instance serves the metrics of its topo connections on its HTTP
// port at /metrics: the leader reports the leadership it holds, every
// instance the member lock it holds, its watch and its store calls.
func TestMetricsOnEtcd(t *testing.T) {
	addr := etcdtest.Start(t)
	args := []string{"-topo-implementation", "etcd2", "-topo-global-server-address", addr, "-topo-global-root", "/clustermanager-metrics"}
	ins := []*instance{startInstance(t, "a", args...), startInstance(t, "b", args...)}
	leader := leaderOf(t, ins)
	const held = `topo_leadership_held{backend="etcd2",cell="global",election="clustermanager"}`
	const locks = `topo_locks_held{backend="etcd2",cell="global"}`
	for i, in := range ins {
		// Registration runs beside the campaign: wait for the member lock.
		require.Eventually(t, func() bool { return scrape(t, in.addr)[locks] >= 1 }, 30*time.Second, 10*time.Millisecond,
			"instance %s never held its member lock", in.addr)
		m := scrape(t, in.addr)
		if i == leader {
			assert.Equal(t, 1.0, m[held], "leader %v", m)
		} else {
			assert.Zero(t, m[held], "follower")
		}
		watches := 0.0
		calls := 0.0
		for k, v := range m {
			if strings.HasPrefix(k, `topo_watches_active{backend="etcd2",cell="global",op=`) {
				watches += v
			}
			if strings.HasPrefix(k, `topo_calls_total{backend="etcd2",cell="global",code="OK",op=`) {
				calls += v
			}
		}
		assert.GreaterOrEqual(t, watches, 1.0, "%v", m)
		assert.Positive(t, calls, "%v", m)
		assert.Contains(t, m, "go_goroutines")
	}
}
