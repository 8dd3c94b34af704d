package vitessinterop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	vlog "vitess.io/vitess/go/vt/log"
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

// The servers, started by TestMain and shared by every test (each test
// uses fresh roots of its own).
var etcdAddr, zkAddr, consulAddr string

var rootSeq atomic.Int64

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Vitess logs every connection, lock and watch at info level: warnings
	// and errors only, on stderr (as bench/vitess does).
	vlog.SwapLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	addr, stopEtcd, err := etcdtest.Launch()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stopEtcd()
	etcdAddr = addr
	zs, err := zktest.Launch()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer zs.Stop()
	zkAddr = zs.Addr()
	agent, err := consultest.NewAgent()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer agent.Stop()
	consulAddr = agent.Addr()
	return m.Run()
}

// store opens Conns of both libraries on one root of one real server.
type store struct {
	name string
	// root returns a fresh root, in the form both libraries accept.
	root func(t *testing.T) string
	// vitess opens a Vitess Conn on root as Vitess's factory does, closed
	// at the end of t.
	vitess func(t *testing.T, root string) vtopo.Conn
	// topokit opens a topokit Conn on root, closed at the end of t.
	topokit func(t *testing.T, root string) topo.Conn
	// candidates counts, with a raw client, the candidate entries of
	// election name under root (both libraries' layout: etcd keys under
	// elections/<name>/locks/, ZooKeeper sequential children of
	// elections/<name>). nil on Consul, where a waiting Vitess candidate
	// has no entry (only a session blocked on the election key; topokit's
	// candidates queue under elections/<name>/locks/queue/).
	candidates func(t *testing.T, root, name string) int
	// lockers counts, with a raw client, the entries (holder and waiters)
	// of directory dir's lock under root: etcd keys under <dir>/locks/,
	// ZooKeeper children of <dir>/locks. nil on Consul (Vitess's waiters
	// have no entry; topokit's queue under <dir>/locks/queue/).
	lockers func(t *testing.T, root, dir string) int
}

func stores() []store {
	return []store{
		{
			name: "etcd",
			root: func(*testing.T) string { return fmt.Sprintf("/interop%d", rootSeq.Add(1)) },
			vitess: func(t *testing.T, root string) vtopo.Conn {
				c, err := vetcd.Factory{}.Create("zone1", etcdAddr, root)
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			},
			candidates: func(t *testing.T, root, name string) int {
				return etcdCount(t, root+"/elections/"+name+"/locks/")
			},
			lockers: func(t *testing.T, root, dir string) int {
				return etcdCount(t, root+"/"+dir+"/locks/")
			},
			topokit: func(t *testing.T, root string) topo.Conn {
				c, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{etcdAddr}}, root)
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			},
		},
		{
			name: "zk",
			root: zkRoot,
			vitess: func(t *testing.T, root string) vtopo.Conn {
				c, err := vzk.Factory{}.Create("zone1", zkAddr, root)
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			},
			candidates: func(t *testing.T, root, name string) int {
				return zkSequential(t, root+"/elections/"+name)
			},
			lockers: func(t *testing.T, root, dir string) int {
				return zkSequential(t, root+"/"+dir+"/locks")
			},
			topokit: func(t *testing.T, root string) topo.Conn {
				c, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{zkAddr}}, root)
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			},
		},
		{
			name: "consul",
			root: func(*testing.T) string { return fmt.Sprintf("interop%d", rootSeq.Add(1)) },
			vitess: func(t *testing.T, root string) vtopo.Conn {
				c, err := vconsul.Factory{}.Create("zone1", consulAddr, root)
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			},
			topokit: func(t *testing.T, root string) topo.Conn {
				c, err := consultopo.NewConn(consultopo.Options{Address: consulAddr}, root)
				require.NoError(t, err)
				t.Cleanup(c.Close)
				return c
			},
		},
	}
}

// zkRoot returns a fresh root and creates its znode: Vitess's ZooKeeper
// NewLeaderParticipation creates elections/<name> and its parent but not
// the root (a deployment's root exists), so the tests create it as an
// operator would.
func zkRoot(t *testing.T) string {
	root := fmt.Sprintf("/interop%d", rootSeq.Add(1))
	z := rawZK(t)
	defer z.Close()
	_, err := z.Create(root, nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err, "create %s", root)
	return root
}

// rawZK connects a raw ZooKeeper client (close it).
func rawZK(t *testing.T) *zk.Conn {
	z, _, err := zk.Connect([]string{zkAddr}, 30*time.Second, zk.WithLogInfo(false))
	require.NoError(t, err)
	return z
}

// etcdCount counts the keys under prefix with a raw client.
func etcdCount(t *testing.T, prefix string) int {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdAddr}, DialTimeout: wait})
	require.NoError(t, err)
	defer cli.Close()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	return int(resp.Count)
}

// zkSequential counts the children of zp named by ZooKeeper's sequence
// numbers alone (Vitess's election candidates), or with any prefix
// ending in digits (lock entries), with a raw client.
func zkSequential(t *testing.T, zp string) int {
	z := rawZK(t)
	defer z.Close()
	children, _, err := z.Children(zp)
	if errors.Is(err, zk.ErrNoNode) {
		return 0
	}
	require.NoError(t, err)
	n := 0
	for _, c := range children {
		if len(c) >= 10 && strings.Trim(c[len(c)-10:], "0123456789") == "" {
			n++
		}
	}
	return n
}

// waitLockers polls, when s can count lock entries, until dir's lock
// under root has n entries (so that a waiter is queued before the test
// releases the lock).
func (s store) waitLockers(ctx context.Context, t *testing.T, root, dir string, n int) {
	t.Helper()
	if s.lockers == nil {
		return
	}
	for s.lockers(t, root, dir) != n {
		select {
		case <-ctx.Done():
			t.Fatalf("lock %s never had %d entries: %v", dir, n, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// waitCandidates polls, when s can count candidates, until election name
// under root has n of them (so that a waiter is queued before the test
// lets the leader go).
func (s store) waitCandidates(ctx context.Context, t *testing.T, root, name string, n int) {
	t.Helper()
	if s.candidates == nil {
		return
	}
	for s.candidates(t, root, name) != n {
		select {
		case <-ctx.Done():
			t.Fatalf("election %s never had %d candidates: %v", name, n, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// wait bounds every blocking step of a test: a step that has not happened
// by then never will (it is a failure, not a timing assertion).
const wait = 2 * time.Minute

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// seen collects the ids a leader channel reported, for waiting until one
// shows up.
type seen struct {
	mu     sync.Mutex
	ids    map[string]bool
	last   string
	closed bool
	change chan struct{} // closed and replaced on every update
}

// follow drains ch into a new seen until ch closes.
func follow[T any](ch <-chan T, id func(T) string) *seen {
	s := &seen{ids: map[string]bool{}, change: make(chan struct{})}
	go func() {
		for v := range ch {
			s.mu.Lock()
			s.last = id(v)
			s.ids[s.last] = true
			close(s.change)
			s.change = make(chan struct{})
			s.mu.Unlock()
		}
		s.mu.Lock()
		s.closed = true
		close(s.change)
		s.mu.Unlock()
	}()
	return s
}

// waitClosed blocks until the channel closed, failing t if ctx ends
// first.
func (s *seen) waitClosed(ctx context.Context, t *testing.T, what string) {
	t.Helper()
	for {
		s.mu.Lock()
		closed, ch := s.closed, s.change
		s.mu.Unlock()
		if closed {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%s never closed: %v", what, ctx.Err())
		}
	}
}

// waitFor blocks until the channel reported id, failing t if it closes or
// ctx ends first.
func (s *seen) waitFor(ctx context.Context, t *testing.T, what, id string) {
	t.Helper()
	for {
		s.mu.Lock()
		ok, closed, ch := s.ids[id], s.closed, s.change
		s.mu.Unlock()
		if ok {
			return
		}
		require.False(t, closed, "%s closed before reporting %q", what, id)
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("%s never reported %q: %v", what, id, ctx.Err())
		}
	}
}
