package zktest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/topokit/topokit/internal/freeport"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// Ensemble is a ZooKeeper ensemble (QuorumPeerMain) of n nodes on
// 127.0.0.1, started by StartEnsemble. Each node has its own zoo.cfg, myid
// and data directory. Its methods are safe for concurrent use.
type Ensemble struct {
	t     testing.TB
	dir   string
	addrs []string // client addresses, by node index
	peer  []int    // quorum port, by node index
	elect []int    // leader election port, by node index
	// links, when not nil, are the proxies node i reaches node j's quorum
	// port through (links[i][j]; nil for i == j): see
	// StartEnsembleWithLinks.
	links [][]*faultproxy.Proxy
	extra string // appended to every node's zoo.cfg

	mu    sync.Mutex
	procs []*process // nil while a node is stopped
}

// StartEnsemble starts an ensemble of n nodes (n >= 1; 3 for a fault-tolerant
// quorum) on free 127.0.0.1 ports with data in t.TempDir(), waits until every
// node answers "srvr" with a Mode (so a quorum exists and a leader was
// elected), and kills every node in t.Cleanup. It fails the test when
// ZooKeeper cannot be installed or started.
func StartEnsemble(t testing.TB, n int) *Ensemble {
	t.Helper()
	return startEnsemble(t, n, false, "")
}

// StartEnsembleWithLinks is StartEnsemble with every node reaching every
// other node's quorum port (the one a follower connects to its leader on)
// through a fault proxy of its own, so that CutLink can part one follower
// from its leader while both keep serving their clients. Its syncLimit
// is partedSyncLimit ticks: a follower parted from its leader goes on
// serving its clients for longer than any session timeout the servers
// grant (20 ticks), as followers of a production ensemble may (with
// ZooKeeper's usual 2 s tick and syncLimit 5, for 10 s).
func StartEnsembleWithLinks(t testing.TB, n int) *Ensemble {
	t.Helper()
	return startEnsemble(t, n, true, "")
}

// StartEnsembleWithLinksConfig is StartEnsembleWithLinks with extra
// appended to every node's zoo.cfg: lines of key=value, where a key
// ZooKeeper's configuration does not know sets the Java system property
// "zookeeper."+key (enableEagerACLCheck=true, for one).
func StartEnsembleWithLinksConfig(t testing.TB, n int, extra string) *Ensemble {
	t.Helper()
	return startEnsemble(t, n, true, extra)
}

// partedSyncLimit is the syncLimit of StartEnsembleWithLinks, in ticks.
const partedSyncLimit = 30

func startEnsemble(t testing.TB, n int, links bool, extra string) *Ensemble {
	t.Helper()
	if n < 1 {
		t.Fatalf("zktest: StartEnsemble needs at least one node, got %d", n)
	}
	if err := EnsureInstalled(); err != nil {
		t.Fatal(err)
	}
	// A node that exits during start-up (a free port taken between probe
	// and bind, as Start also allows for) makes the whole ensemble start
	// again on new ports, up to three times.
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var e *Ensemble
		if e, err = tryEnsemble(t, n, links, extra); err == nil {
			return e
		}
		t.Logf("zktest: ensemble start-up attempt %d: %v", attempt+1, err)
	}
	t.Fatal(err)
	return nil
}

// tryEnsemble is one attempt of startEnsemble: its nodes killed and its
// proxies closed when it fails.
func tryEnsemble(t testing.TB, n int, links bool, extra string) (e *Ensemble, err error) {
	e = &Ensemble{t: t, dir: t.TempDir(), procs: make([]*process, n), extra: extra}
	t.Cleanup(e.killAll)
	var proxies []*faultproxy.Proxy
	defer func() {
		if err != nil {
			e.killAll()
			for _, p := range proxies {
				_ = p.Close()
			}
		}
	}()
	ports, err := freeport.Ports(3 * n) // distinct, outside the ephemeral range
	if err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		e.addrs = append(e.addrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[3*i])))
		e.peer = append(e.peer, ports[3*i+1])
		e.elect = append(e.elect, ports[3*i+2])
	}
	if links {
		e.links = make([][]*faultproxy.Proxy, n)
		for i := range n {
			e.links[i] = make([]*faultproxy.Proxy, n)
			for j := range n {
				if i == j {
					continue
				}
				p, err := faultproxy.New(net.JoinHostPort("127.0.0.1", strconv.Itoa(e.peer[j])))
				if err != nil {
					return nil, err
				}
				t.Cleanup(func() { _ = p.Close() })
				proxies = append(proxies, p)
				e.links[i][j] = p
			}
		}
	}
	for i := 0; i < n; i++ {
		if err := e.writeConfig(i); err != nil {
			return nil, err
		}
	}
	for i := 0; i < n; i++ {
		if err := e.startNode(i); err != nil {
			return nil, err
		}
	}
	for i := 0; i < n; i++ {
		if err := e.waitNode(i, StartTimeout); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func (e *Ensemble) nodeDir(i int) string { return filepath.Join(e.dir, fmt.Sprintf("node%d", i+1)) }

func (e *Ensemble) writeConfig(i int) error {
	dir := e.nodeDir(i)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(i+1)+"\n"), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(baseConfig(data))
	syncLimit := 10
	if e.links != nil {
		syncLimit = partedSyncLimit
	}
	fmt.Fprintf(&b, "initLimit=50\nsyncLimit=%d\ncnxTimeout=500\n", syncLimit)
	fmt.Fprintf(&b, "clientPort=%d\nclientPortAddress=127.0.0.1\n", e.clientPort(i))
	for j := range e.addrs {
		peer := e.peer[j]
		if e.links != nil && j != i {
			_, p, _ := net.SplitHostPort(e.links[i][j].Addr())
			peer, _ = strconv.Atoi(p)
		}
		fmt.Fprintf(&b, "server.%d=127.0.0.1:%d:%d\n", j+1, peer, e.elect[j])
	}
	b.WriteString(e.extra)
	return os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(b.String()), 0o644)
}

func (e *Ensemble) clientPort(i int) int {
	_, p, _ := net.SplitHostPort(e.addrs[i])
	n, _ := strconv.Atoi(p)
	return n
}

func (e *Ensemble) startNode(i int) error {
	dir := e.nodeDir(i)
	p, err := startJVM("org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "zoo.cfg"),
		filepath.Join(dir, fmt.Sprintf("zookeeper-%d.log", time.Now().UnixNano())))
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.procs[i] = p
	e.mu.Unlock()
	return nil
}

func (e *Ensemble) waitNode(i int, timeout time.Duration) error {
	e.mu.Lock()
	p := e.procs[i]
	e.mu.Unlock()
	if p == nil {
		return fmt.Errorf("zktest: node %d is stopped", i)
	}
	return p.waitReady(e.addrs[i], timeout)
}

func (e *Ensemble) killAll() {
	for i := range e.procs {
		e.Kill(i)
	}
}

// CutLink stops the quorum traffic between nodes i and j, both ways (their
// leader election traffic and their clients' traffic still flow), as a
// partition between two members does. Only for an ensemble of
// StartEnsembleWithLinks.
func (e *Ensemble) CutLink(i, j int) {
	e.links[i][j].Blackhole()
	e.links[j][i].Blackhole()
}

// HealLink lets the quorum traffic between nodes i and j flow again.
func (e *Ensemble) HealLink(i, j int) {
	e.links[i][j].Heal()
	e.links[j][i].Heal()
}

// Size returns the number of nodes.
func (e *Ensemble) Size() int { return len(e.addrs) }

// Addr returns node i's client address "127.0.0.1:PORT" (i from 0).
func (e *Ensemble) Addr(i int) string { return e.addrs[i] }

// Addrs returns every node's client address, by node index.
func (e *Ensemble) Addrs() []string { return append([]string(nil), e.addrs...) }

// Servers returns the comma-separated client addresses, the server list a
// ZooKeeper client (and the zk2 factory) takes.
func (e *Ensemble) Servers() string { return strings.Join(e.addrs, ",") }

// Kill kills node i's JVM with SIGKILL (a crash) and waits for it to exit.
// Killing a stopped node does nothing.
func (e *Ensemble) Kill(i int) {
	e.mu.Lock()
	p := e.procs[i]
	e.procs[i] = nil
	e.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// Stop shuts node i down with SIGTERM (killing it after 10 s) and waits for
// it to exit. Stopping a stopped node does nothing.
func (e *Ensemble) Stop(i int) {
	e.mu.Lock()
	p := e.procs[i]
	e.procs[i] = nil
	e.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

// Restart starts a stopped or killed node i again with its old data and
// waits until it serves (answers "srvr" with a Mode, i.e. rejoined a
// quorum). It fails the test on error. Restarting a running node does
// nothing.
func (e *Ensemble) Restart(i int) {
	e.t.Helper()
	e.mu.Lock()
	running := e.procs[i] != nil
	e.mu.Unlock()
	if running {
		return
	}
	if err := e.startNode(i); err != nil {
		e.t.Fatal(err)
	}
	if err := e.waitNode(i, StartTimeout); err != nil {
		e.t.Fatal(err)
	}
}

// Running reports whether node i's JVM is running (not stopped or killed).
func (e *Ensemble) Running(i int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.procs[i] != nil && !e.procs[i].exited()
}

// Mode returns node i's "srvr" Mode ("leader", "follower"), or an error
// when the node does not serve (stopped, or without a quorum).
func (e *Ensemble) Mode(i int) (string, error) { return Mode(e.addrs[i]) }

// Leader returns the index of the node that reports Mode leader, or -1 when
// none does right now.
func (e *Ensemble) Leader() int {
	for i := range e.addrs {
		if !e.Running(i) {
			continue
		}
		if m, err := Mode(e.addrs[i]); err == nil && m == "leader" {
			return i
		}
	}
	return -1
}

// WaitLeader polls until a node reports Mode leader and every other running
// node serves, and returns the leader's index. It fails the test after
// timeout.
func (e *Ensemble) WaitLeader(timeout time.Duration) int {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if l := e.Leader(); l >= 0 {
			ok := true
			for i := range e.addrs {
				if i != l && e.Running(i) {
					if _, err := Mode(e.addrs[i]); err != nil {
						ok = false
					}
				}
			}
			if ok {
				return l
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("zktest: no ZooKeeper leader among %s within %v", e.Servers(), timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Pause freezes node i's JVM (SIGSTOP to its process group): it keeps its
// connections but processes nothing (neither clients nor the quorum's
// traffic) until Resume, like a hung or lagging member. It returns an
// error when the node is stopped.
func (e *Ensemble) Pause(i int) error {
	e.mu.Lock()
	p := e.procs[i]
	e.mu.Unlock()
	if p == nil {
		return fmt.Errorf("zktest: node %d is stopped", i)
	}
	return p.signal(syscall.SIGSTOP)
}

// Resume lets a paused node i run again (SIGCONT).
func (e *Ensemble) Resume(i int) error {
	e.mu.Lock()
	p := e.procs[i]
	e.mu.Unlock()
	if p == nil {
		return fmt.Errorf("zktest: node %d is stopped", i)
	}
	return p.signal(syscall.SIGCONT)
}
