package etcdcluster

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/topokit/topokit/internal/etcdembed"
)

// nodeEnv carries a child node's configuration from the test to the
// re-executed test binary.
const nodeEnv = "ETCDCLUSTER_TEST_NODE"

// childConfig is the part of Config a child node takes from its parent.
type childConfig struct {
	Name, DataDir, ClientURL, PeerURL string
	Seeds                             []string
	ClientOnly                        bool
	BootstrapExpect                   int
	// TickMs and ElectionMs are the members' raft timing; zero: 10 and
	// 100 (fast tests).
	TickMs, ElectionMs            uint
	VolunteerTTL, DeciderTTL      time.Duration
	NomineeTimeout, CheckInterval time.Duration
}

// TestMain runs a node instead of the tests when the binary is re-executed
// by a test as a separate OS process.
func TestMain(m *testing.M) {
	if v := os.Getenv(nodeEnv); v != "" {
		os.Exit(runChild(v))
	}
	os.Exit(m.Run())
}

func runChild(v string) int {
	var cc childConfig
	if err := json.Unmarshal([]byte(v), &cc); err != nil {
		fmt.Fprintln(os.Stderr, "bad child config:", err)
		return 2
	}
	lg := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := Run(ctx, Config{
		Name: cc.Name, DataDir: cc.DataDir, ClientURL: cc.ClientURL, PeerURL: cc.PeerURL,
		Seeds: cc.Seeds, ClientOnly: cc.ClientOnly, BootstrapExpect: cc.BootstrapExpect,
		VolunteerTTL: cc.VolunteerTTL, DeciderTTL: cc.DeciderTTL,
		NomineeTimeout: cc.NomineeTimeout, CheckInterval: cc.CheckInterval,
		TickMs: cmp.Or(cc.TickMs, 10), ElectionMs: cmp.Or(cc.ElectionMs, 100), NoFsync: true, Logger: lg, EtcdLogger: etcdLogger(),
	})
	if err != nil {
		lg.Error("node ended", "err", err)
		return 1
	}
	lg.Info("node ended cleanly")
	return 0
}

// etcdLogger returns a logger of the embedded server's warnings to
// stderr, or nil when ETCDCLUSTER_TEST_ETCDLOG is unset.
func etcdLogger() *zap.Logger {
	if os.Getenv("ETCDCLUSTER_TEST_ETCDLOG") == "" {
		return nil
	}
	c := zap.NewProductionConfig()
	c.Level = zap.NewAtomicLevelAt(zap.WarnLevel)
	c.OutputPaths, c.ErrorOutputPaths = []string{"stderr"}, []string{"stderr"}
	l, err := c.Build()
	if err != nil {
		return nil
	}
	return l
}

// harness runs child nodes for one test.
type harness struct {
	t     testing.TB
	dir   string
	procs map[string]*proc
	base  childConfig
}

type proc struct {
	h    *harness
	cfg  childConfig
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string
}

func newHarness(t testing.TB) *harness {
	h := &harness{t: t, dir: t.TempDir(), procs: map[string]*proc{}, base: childConfig{
		VolunteerTTL: 2 * time.Second, DeciderTTL: 2 * time.Second,
		NomineeTimeout: 20 * time.Second, CheckInterval: 200 * time.Millisecond,
	}}
	t.Cleanup(func() {
		for _, p := range h.procs {
			p.kill()
		}
		if t.Failed() {
			for name, p := range h.procs {
				b, _ := os.ReadFile(p.log)
				log, dump, _ := strings.Cut(string(b), "SIGQUIT: quit")
				lines := strings.Split(log, "\n")
				t.Logf("---- log of %s (last 60 lines) ----\n%s", name, strings.Join(lines[max(0, len(lines)-60):], "\n"))
				if dump != "" {
					t.Logf("---- goroutines of %s when it did not exit ----\n%s", name, dump)
				}
			}
		}
	})
	return h
}

// start starts (or restarts, with the same ports and data directory) the
// node name, with seeds the client URLs of the named nodes.
func (h *harness) start(name string, seeds ...string) *proc {
	h.t.Helper()
	p := h.prepare(name, seeds...)
	p.run()
	return p
}

// prepare returns the node name, choosing its ports and data directory
// the first time, without starting it.
func (h *harness) prepare(name string, seeds ...string) *proc {
	h.t.Helper()
	p := h.procs[name]
	if p == nil {
		// A node binds its ports only once it starts its server, perhaps
		// long after this: never hand out a port another node of the
		// harness was given.
		var addrs []string
		for {
			var err error
			addrs, err = etcdembed.FreeAddrs(2)
			require.NoError(h.t, err)
			if !h.assigned(addrs...) {
				break
			}
		}
		cfg := h.base
		cfg.Name = name
		cfg.DataDir = filepath.Join(h.dir, name)
		cfg.ClientURL = "http://" + addrs[0]
		cfg.PeerURL = "http://" + addrs[1]
		for _, s := range seeds {
			cfg.Seeds = append(cfg.Seeds, h.procs[s].cfg.ClientURL)
		}
		p = &proc{h: h, cfg: cfg, log: filepath.Join(h.dir, name+".log")}
		h.procs[name] = p
	}
	return p
}

// assigned reports whether any of addrs is a client or peer address of a
// node of h.
func (h *harness) assigned(addrs ...string) bool {
	for _, p := range h.procs {
		for _, a := range addrs {
			if p.cfg.ClientURL == "http://"+a || p.cfg.PeerURL == "http://"+a {
				return true
			}
		}
	}
	return false
}

// clientURLs returns the client URLs of the named nodes.
func (h *harness) clientURLs(names ...string) []string {
	var eps []string
	for _, n := range names {
		eps = append(eps, h.procs[n].cfg.ClientURL)
	}
	return eps
}

func (h *harness) startClientOnly(name string, seeds ...string) *proc {
	h.t.Helper()
	cfg := h.base
	cfg.Name, cfg.ClientOnly = name, true
	for _, s := range seeds {
		cfg.Seeds = append(cfg.Seeds, h.procs[s].cfg.ClientURL)
	}
	p := &proc{h: h, cfg: cfg, log: filepath.Join(h.dir, name+".log")}
	h.procs[name] = p
	p.run()
	return p
}

func (p *proc) run() {
	t := p.h.t
	t.Helper()
	v, err := json.Marshal(p.cfg)
	require.NoError(t, err)
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), nodeEnv+"="+string(v))
	cmd.Stdout, cmd.Stderr = f, f
	require.NoError(t, cmd.Start())
	p.cmd, p.done = cmd, make(chan struct{})
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
}

// stopAll kills every node.
func (h *harness) stopAll() {
	for _, p := range h.procs {
		p.kill()
	}
}

func (p *proc) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL and waits for the process to end.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// term sends SIGTERM (a graceful leave) and waits up to d for the exit.
func (p *proc) term(d time.Duration) error {
	p.h.t.Helper()
	require.NoError(p.h.t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		p.dumpAndKill()
		return fmt.Errorf("%s did not exit within %v (its goroutines are in its log)", p.cfg.Name, d)
	}
}

// dumpAndKill sends SIGQUIT, which makes the Go runtime write every
// goroutine's stack to the node's log and exit, and SIGKILL when the
// process has not ended 10 s later.
func (p *proc) dumpAndKill() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.kill()
	}
}

// logHas reports whether the node's log has a line containing every one
// of ss.
func (p *proc) logHas(ss ...string) bool { return p.logCount(ss...) > 0 }

// logLines returns the node's log lines containing s.
func (p *proc) logLines(s string) []string {
	b, _ := os.ReadFile(p.log)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// logCount counts the node's log lines containing every one of ss.
func (p *proc) logCount(ss ...string) int {
	f, err := os.Open(p.log)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		all := true
		for _, s := range ss {
			all = all && strings.Contains(sc.Text(), s)
		}
		if all {
			n++
		}
	}
	return n
}

// client returns a member-list-following client on the named nodes.
func (h *harness) client(names ...string) *clientv3.Client {
	h.t.Helper()
	var eps []string
	for _, n := range names {
		eps = append(eps, h.procs[n].cfg.ClientURL)
	}
	cli, err := NewClient(eps, 200*time.Millisecond)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { cli.Close() })
	return cli
}

// eventually polls cond every 100 ms until it returns true or bound
// passes; it then fails with the last description.
func eventually(t testing.TB, bound time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(bound)
	last := ""
	for {
		ok, desc := cond()
		if ok {
			return
		}
		last = desc
		if time.Now().After(deadline) {
			require.FailNowf(t, "condition not reached", "%s within %v; last state: %s", what, bound, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// statusOf reads the status, or describes the error.
func statusOf(cli *clientv3.Client) (*ClusterStatus, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	st, err := Status(ctx, cli, "")
	if err != nil {
		return nil, err.Error()
	}
	b, _ := json.Marshal(st)
	return st, string(b)
}

// waitVoters waits until the started voters are exactly names, with no
// learner and no nomination in flight, and all of them healthy.
func waitVoters(t testing.TB, cli *clientv3.Client, bound time.Duration, names ...string) *ClusterStatus {
	t.Helper()
	want := slices.Clone(names)
	slices.Sort(want)
	var got *ClusterStatus
	eventually(t, bound, fmt.Sprintf("voters %v", want), func() (bool, string) {
		st, desc := statusOf(cli)
		if st == nil {
			return false, desc
		}
		if !slices.Equal(st.Voters(), want) || len(st.Members) != len(want) || st.Nominee != nil || !st.Healthy {
			return false, desc
		}
		for _, m := range st.Members {
			if !m.Healthy {
				return false, desc
			}
		}
		got = st
		return true, ""
	})
	return got
}

// sameData waits until every member's key-value hash at one revision is
// the same.
func sameData(t testing.TB, cli *clientv3.Client, bound time.Duration) {
	t.Helper()
	eventually(t, bound, "identical data on every member", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ml, err := cli.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		resp, err := cli.Get(ctx, "probe")
		if err != nil {
			return false, err.Error()
		}
		rev := resp.Header.Revision
		var ecs endpointClients
		defer ecs.close()
		hashes := map[string]uint32{}
		for _, m := range ml.Members {
			if len(m.ClientURLs) == 0 {
				return false, "unstarted member " + m.Name
			}
			c, err := ecs.get(m.ClientURLs[0])
			if err != nil {
				return false, err.Error()
			}
			h, err := c.HashKV(ctx, m.ClientURLs[0], rev)
			if err != nil {
				return false, fmt.Sprintf("%s: %v", m.Name, err)
			}
			hashes[m.Name] = h.Hash
		}
		var first uint32
		i := 0
		for _, h := range hashes {
			if i > 0 && h != first {
				return false, fmt.Sprintf("hashes at revision %d differ: %v", rev, hashes)
			}
			first = h
			i++
		}
		return true, ""
	})
}
