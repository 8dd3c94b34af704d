package topoctl

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// scrape GETs http://addr/metrics and returns its samples, keyed by
// series as the text format writes them (name{label="value",...}, labels
// sorted by name).
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
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
		require.Positive(t, i, "sample line %q", l)
		v, err := strconv.ParseFloat(l[i+1:], 64)
		require.NoError(t, err, "sample line %q", l)
		out[l[:i]] = v
	}
	require.NoError(t, sc.Err())
	return out
}

// waitSample polls addr's /metrics until series has the value want.
func waitSample(t *testing.T, addr, series string, want float64) {
	t.Helper()
	var got map[string]float64
	require.Eventually(t, func() bool {
		got = scrape(t, addr)
		v, ok := got[series]
		return ok && v == want
	}, time.Minute, 20*time.Millisecond, "waiting for %s = %v", series, want)
}

// topoctl --metrics-address, run as a process: watch and lock serve the
// metrics of their store calls on /metrics (Prometheus text format), with
// the backend, cell and operation labels, and stop serving when they end.
func TestMetricsAddressProcess(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	root := "/" + t.Name()
	tg := target{impl: "etcd2", addr: addr, root: root}
	v1 := strings.TrimSpace(tg.ok(t, "put", "x", "one"))
	tg.ok(t, "put", "ks/Keyspace", "k")
	env := connEnv("etcd2", addr, root)
	ports, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)

	w := startProcess(t, env, "--metrics-address", ports[0], "watch", "/x")
	w.waitLine(t, "/x "+v1+` "one"`)
	m := scrape(t, ports[0])
	assert.Equal(t, 1.0, m[`topo_watches_active{backend="etcd2",cell="global",op="Watch"}`], "%v", m)
	assert.Equal(t, 1.0, m[`topo_calls_total{backend="etcd2",cell="global",code="OK",op="Watch"}`], "%v", m)
	assert.Contains(t, m, `topo_call_duration_seconds_count{backend="etcd2",cell="global",op="Watch"}`)
	assert.Contains(t, m, "go_goroutines", "the Go runtime's metrics are served too")
	v2 := strings.TrimSpace(tg.ok(t, "put", "x", "two"))
	w.waitLine(t, "/x "+v2+` "two"`)
	assert.Equal(t, 1.0, scrape(t, ports[0])[`topo_watches_active{backend="etcd2",cell="global",op="Watch"}`])
	assert.Equal(t, 0, w.signalAndWait(t, syscall.SIGINT), w.errb.String())
	_, err = http.Get("http://" + ports[0] + "/metrics")
	require.Error(t, err, "the metrics server outlived watch")

	// The command lets go of topoctl's stdout and stderr once it said
	// "held", so that a failing assertion does not leave the test waiting
	// for the pipes to close.
	l := startProcess(t, env, "--metrics-address", ports[1], "lock", "ks", "--", "sh", "-c", "echo held; exec sleep 600 >/dev/null 2>&1")
	l.waitLine(t, "held")
	waitSample(t, ports[1], `topo_locks_held{backend="etcd2",cell="global"}`, 1)
	m = scrape(t, ports[1])
	assert.Equal(t, 1.0, m[`topo_lock_wait_seconds_count{backend="etcd2",cell="global"}`], "%v", m)
	assert.Equal(t, ExitInterrupted, l.signalAndWait(t, syscall.SIGTERM), l.errb.String())
}

// serve --metrics-address also exposes the embedded etcd server's own
// metrics.
func TestMetricsAddressServe(t *testing.T) {
	t.Parallel()
	addrs, err := etcdembed.FreeAddrs(3)
	require.NoError(t, err)
	env := []string{envDataDir + "=" + t.TempDir(), envImplementation + "=", envServerAddress + "=", envRoot + "=", envCell + "="}
	srv := startProcess(t, env, "--metrics-address", addrs[2], "serve", "--listen-client-address", addrs[0], "--listen-peer-address", addrs[1])
	srv.waitLine(t, "Stop it with Ctrl-C")
	waitSample(t, addrs[2], "etcd_server_has_leader", 1)
	assert.Contains(t, scrape(t, addrs[2]), "process_start_time_seconds")
	assert.Equal(t, 0, srv.signalAndWait(t, syscall.SIGTERM), srv.errb.String())
}

// --metrics-address is refused (usage error, exit 2) by commands that do
// not run long, an address that cannot be bound fails the command (exit
// 1), and --log-level debug logs one record per store call.
func TestMetricsAddressAndDebugLog(t *testing.T) {
	t.Parallel()
	tg := target{impl: "memory", addr: t.Name(), root: "/"}
	tg.fails(t, ExitUsage, []string{"--metrics-address applies to the long-running commands only"}, "--metrics-address", "127.0.0.1:0", "ls", "/")
	tg.fails(t, ExitUsage, []string{"--metrics-address applies to the long-running commands only"}, "--metrics-address", "127.0.0.1:0", "leader", "e")
	tg.fails(t, ExitFailure, []string{"--metrics-address"}, "--metrics-address", "256.0.0.1:1", "watch", "/x")

	r := tg.run(t, "", "--log-level", "debug", "put", "a", "b")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, `msg="topo call" backend=memory cell=global op=Update path=a`)
	r = tg.run(t, "", "--log-level", "debug", "get", "a")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, 1, strings.Count(r.stderr, `msg="topo call"`), r.stderr)
	assert.Contains(t, r.stderr, `msg="topo call" backend=memory cell=global op=Get path=a`)
	r = tg.run(t, "", "get", "a")
	assert.NotContains(t, r.stderr, "topo call", "calls are logged at debug only")
}

// elect and leader --observe serve their metrics too: leadership held
// while elected, and the observer's WaitForNewLeader call.
func TestMetricsAddressElect(t *testing.T) {
	t.Parallel()
	tg := target{impl: "memory", addr: t.Name(), root: "/"}
	ports, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	e := tg.start(t, "--metrics-address", ports[0], "elect", "primary", "--id", "a")
	e.waitOutput(t, "elected a")
	waitSample(t, ports[0], `topo_leadership_held{backend="memory",cell="global",election="primary"}`, 1)
	assert.Equal(t, 1.0, scrape(t, ports[0])[`topo_leadership_changes_total{backend="memory",cell="global",election="primary"}`])

	obs := tg.start(t, "--metrics-address", ports[1], "leader", "--observe", "primary")
	obs.waitOutput(t, "a\n")
	waitSample(t, ports[1], `topo_calls_total{backend="memory",cell="global",code="OK",op="Observe"}`, 1)
	assert.Equal(t, 0, obs.stop(t), obs.stderr.String())
	assert.Equal(t, 0, e.stop(t), e.stderr.String())
}
