package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

const (
	waitFor = 30 * time.Second
	tick    = 20 * time.Millisecond
)

// instance is one clustermanager started by run() in this process.
type instance struct {
	addr   string
	cancel context.CancelFunc
	done   chan error
}

// stop shuts the instance down cleanly and returns run's error.
func (in *instance) stop(t *testing.T) error {
	t.Helper()
	in.cancel()
	select {
	case err := <-in.done:
		in.done <- err
		return err
	case <-time.After(waitFor):
		require.FailNow(t, "instance did not stop", in.addr)
		return nil
	}
}

// logWriter sends an instance's log lines to t.Log.
type logWriter struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	done   bool
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(w.prefix + strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// startInstance runs one clustermanager with the given store flags.
func startInstance(t *testing.T, name string, storeArgs ...string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{cancel: cancel, done: make(chan error, 1)}
	listening := make(chan string, 1)
	lw := &logWriter{t: t, prefix: name + ": "}
	args := append([]string{"-listen", "127.0.0.1:0", "-resync", "200ms"}, storeArgs...)
	go func() {
		in.done <- run(ctx, args, lw, func(addr string) { listening <- addr })
	}()
	select {
	case in.addr = <-listening:
	case err := <-in.done:
		require.FailNow(t, "instance did not start", "%s: %v", name, err)
	case <-time.After(waitFor):
		require.FailNow(t, "instance did not start", name)
	}
	t.Cleanup(func() {
		assert.NoError(t, in.stop(t))
		lw.mu.Lock()
		lw.done = true
		lw.mu.Unlock()
	})
	return in
}

// noRedirect is a client that reports redirects instead of following them.
var noRedirect = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       10 * time.Second,
}

// follow is a client that follows redirects (307 keeps method and body).
var follow = &http.Client{Timeout: 10 * time.Second}

func getJSON(addr, path string, v any) error {
	resp, err := follow.Get("http://" + addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func status(addr string) (Status, error) {
	var s Status
	err := getJSON(addr, "/status", &s)
	return s, err
}

// leaderOf waits until every instance in ins agrees on one leader that
// reports itself as leader, and returns its index in ins.
func leaderOf(t *testing.T, ins []*instance) int {
	t.Helper()
	leader := -1
	require.Eventually(t, func() bool {
		var id string
		leader = -1
		for i, in := range ins {
			s, err := status(in.addr)
			if err != nil || s.Leader == "" || (id != "" && s.Leader != id) {
				return false
			}
			id = s.Leader
			if s.IsLeader {
				if s.ID != id {
					return false
				}
				leader = i
			}
		}
		return leader >= 0
	}, waitFor, tick, "no agreed leader")
	return leader
}

// putDesired sends the desired state to addr, following a redirect to the
// leader, and returns the stored version.
func putDesired(t *testing.T, addr string, shards ...string) string {
	t.Helper()
	body, err := json.Marshal(DesiredState{Shards: shards})
	require.NoError(t, err)
	var version string
	require.Eventually(t, func() bool {
		req, err := http.NewRequest(http.MethodPut, "http://"+addr+"/desired", bytes.NewReader(body))
		require.NoError(t, err)
		resp, err := follow.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
		var out map[string]string
		if json.NewDecoder(resp.Body).Decode(&out) != nil {
			return false
		}
		version = out["version"]
		return true
	}, waitFor, tick, "PUT /desired never succeeded")
	return version
}

// waitReconciled waits until every instance in ins sees one assignment per
// instance in members (by address), together covering exactly shards, all
// computed from desired version version.
func waitReconciled(t *testing.T, ins []*instance, members []*instance, version string, shards ...string) {
	t.Helper()
	want := slices.Clone(shards)
	slices.Sort(want)
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = idFromAddr(m.addr)
	}
	slices.Sort(ids)
	require.Eventually(t, func() bool {
		for _, in := range ins {
			var got map[string]Assignment
			if err := getJSON(in.addr, "/assignments", &got); err != nil {
				return false
			}
			var gotIDs, gotShards []string
			for id, a := range got {
				if a.DesiredVersion != version || a.Member != id {
					return false
				}
				gotIDs = append(gotIDs, id)
				gotShards = append(gotShards, a.Shards...)
			}
			slices.Sort(gotIDs)
			slices.Sort(gotShards)
			if !slices.Equal(gotIDs, ids) || !slices.Equal(gotShards, want) {
				return false
			}
		}
		return true
	}, waitFor, tick, "assignments never matched desired version %s over %v", version, ids)
}

// testFailover starts three instances on the store named by storeArgs,
// checks the follower redirect and the reconciliation, stops the leader and
// checks that another instance takes over and reconciles.
func testFailover(t *testing.T, storeArgs ...string) {
	ins := []*instance{
		startInstance(t, "i0", storeArgs...),
		startInstance(t, "i1", storeArgs...),
		startInstance(t, "i2", storeArgs...),
	}
	li := leaderOf(t, ins)
	leader := ins[li]
	follower := ins[(li+1)%3]

	// A follower redirects leader-only requests to the leader.
	req, err := http.NewRequest(http.MethodPut, "http://"+follower.addr+"/desired", strings.NewReader(`{"shards":["x"]}`))
	require.NoError(t, err)
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
	require.Equal(t, "http://"+leader.addr+"/desired", resp.Header.Get("Location"))

	shards := []string{"s1", "s2", "s3", "s4", "s5"}
	v1 := putDesired(t, follower.addr, shards...)
	waitReconciled(t, ins, ins, v1, shards...)

	// Stop the leader: another instance takes over, drops the departed
	// member's assignment and spreads its shards over the others.
	require.NoError(t, leader.stop(t))
	rest := slices.Delete(slices.Clone(ins), li, li+1)
	newLeader := rest[leaderOf(t, rest)]
	require.NotEqual(t, leader.addr, newLeader.addr)
	waitReconciled(t, rest, rest, v1, shards...)

	// Reconciliation goes on under the new leader.
	shards = append(shards, "s6", "s7")
	v2 := putDesired(t, rest[0].addr, shards...)
	require.NotEqual(t, v1, v2)
	waitReconciled(t, rest, rest, v2, shards...)

	// A leader-only POST works through a follower, too.
	var got map[string]Assignment
	require.Eventually(t, func() bool {
		for _, in := range rest {
			resp, err := follow.Post("http://"+in.addr+"/reconcile", "application/json", nil)
			if err != nil {
				return false
			}
			err = json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || len(got) != 2 {
				return false
			}
		}
		return true
	}, waitFor, tick)
}

// TestFailoverOnEtcd is the main scenario on the default backend: three
// instances on a real embedded etcd; the leader stops, another takes over
// and reconciliation goes on.
func TestFailoverOnEtcd(t *testing.T) {
	addr := etcdtest.Start(t)
	testFailover(t, "-topo-implementation", "etcd2", "-topo-global-server-address", addr, "-topo-global-root", "/clustermanager-test")
}

// TestCrashOnEtcd: the leader's process dies (its Conn closes without any
// cleanup, revoking its lease); another instance takes over and removes the
// dead member.
func TestCrashOnEtcd(t *testing.T) {
	addr := etcdtest.Start(t)
	testCrash(t, func(t *testing.T) topo.Conn {
		conn, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{addr}}, "/clustermanager-crash")
		require.NoError(t, err)
		return conn
	})
}

func TestFailoverOnMemorytopo(t *testing.T) {
	testFailover(t, "-topo-implementation", "memory", "-topo-global-server-address", "failover", "-topo-global-root", "/global")
}

func TestRunRejectsBadFlags(t *testing.T) {
	var out bytes.Buffer
	require.Error(t, run(context.Background(), []string{"-no-such-flag"}, &out, nil))
	require.Error(t, run(context.Background(), []string{"extra"}, &out, nil))
	err := run(context.Background(), []string{"-listen", "127.0.0.1:0", "-topo-implementation", "nope"}, &out, nil)
	require.ErrorContains(t, err, "registered implementations")
}

// testCrash runs three Managers directly on conns from open, then makes the
// leader's process "crash": its store connection closes without any
// cleanup, so its member info stays behind. Another instance must take over
// and, finding the crashed member's registration lock free, remove it.
func testCrash(t *testing.T, open func(t *testing.T) topo.Conn) {
	type mgr struct {
		m    *Manager
		conn topo.Conn
		stop context.CancelFunc
		done chan error
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	var ms []*mgr
	for i := range 3 {
		conn := open(t)
		lw := &logWriter{t: t, prefix: fmt.Sprintf("m%d: ", i)}
		m, err := NewManager(ctx, conn, Config{
			ID:     fmt.Sprintf("m%d", i),
			Addr:   fmt.Sprintf("127.0.0.1:%d", 1000+i),
			Resync: 100 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(lw, nil)),
		})
		require.NoError(t, err)
		rctx, stop := context.WithCancel(ctx)
		x := &mgr{m: m, conn: conn, stop: stop, done: make(chan error, 1)}
		go func() { x.done <- m.Run(rctx) }()
		t.Cleanup(func() {
			stop()
			<-x.done
			conn.Close()
			lw.mu.Lock()
			lw.done = true
			lw.mu.Unlock()
		})
		ms = append(ms, x)
	}
	leaderIs := func(cands []*mgr) int {
		idx := -1
		require.Eventually(t, func() bool {
			for i, x := range cands {
				id, err := x.m.election.Leader(ctx)
				if err != nil || id == "" {
					return false
				}
				mctx, err := x.m.election.WithMastership(ctx)
				if err == nil && mctx.Err() == nil {
					idx = i
				}
			}
			return idx >= 0
		}, waitFor, tick)
		return idx
	}
	_, err := ms[0].conn.Update(ctx, desiredPath, []byte(`{"shards":["a","b","c","d"]}`), nil)
	require.NoError(t, err)
	assigned := func(x *mgr, members int) bool {
		got := x.m.Assignments()
		n := 0
		for _, a := range got {
			n += len(a.Shards)
		}
		return len(got) == members && n == 4
	}
	require.Eventually(t, func() bool { return assigned(ms[0], 3) }, waitFor, tick)

	li := leaderIs(ms)
	crashed := ms[li]
	crashed.conn.Close() // no resignation, no deregistration
	require.Error(t, <-crashed.done, "a Manager whose Conn closed reports it")
	crashed.done <- nil

	rest := slices.Delete(slices.Clone(ms), li, li+1)
	leaderIs(rest)
	require.Eventually(t, func() bool { return assigned(rest[0], 2) && assigned(rest[1], 2) }, waitFor, tick)
	_, _, err = rest[0].conn.Get(ctx, memberInfoPath(crashed.m.cfg.ID))
	require.ErrorIs(t, err, topo.NoNode, "the crashed member's info was not removed")
}

func TestCrashOnMemorytopo(t *testing.T) {
	f := memorytopo.NewFactory()
	testCrash(t, func(t *testing.T) topo.Conn {
		conn, err := f.Create(topo.GlobalCell, "crash", "/global")
		require.NoError(t, err)
		return conn
	})
}

func TestFailoverOnConsul(t *testing.T) {
	addr := consultest.Start(t)
	testFailover(t, "-topo-implementation", "consul", "-topo-global-server-address", addr, "-topo-global-root", "clustermanager-test")
}

func TestCrashOnConsul(t *testing.T) {
	addr := consultest.Start(t)
	testCrash(t, func(t *testing.T) topo.Conn {
		conn, err := consultopo.NewConn(consultopo.Options{Address: addr}, "clustermanager-crash")
		require.NoError(t, err)
		return conn
	})
}

func TestFailoverOnZooKeeper(t *testing.T) {
	addr := zktest.Start(t)
	testFailover(t, "-topo-implementation", "zk2", "-topo-global-server-address", addr, "-topo-global-root", "/clustermanager-test")
}

func TestCrashOnZooKeeper(t *testing.T) {
	addr := zktest.Start(t)
	testCrash(t, func(t *testing.T) topo.Conn {
		conn, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}, SessionTimeout: 10 * time.Second}, "/clustermanager-crash")
		require.NoError(t, err)
		return conn
	})
}
