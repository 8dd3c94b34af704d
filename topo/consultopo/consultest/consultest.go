// Package consultest runs real Consul agents for tests: `consul agent -dev`
// (Consul v1.13.9, the newest MPL-2.0 release, built once from tools/consul
// into a cache directory) bound to 127.0.0.1 on free ports in a temporary
// directory.
//
// Tests that need one agent call Start. Packages that share one agent
// between all their tests start it from TestMain with NewAgent and stop it
// with Agent.Stop, giving every subtest a fresh root:
//
//	var agent *consultest.Agent
//
//	func TestMain(m *testing.M) {
//		var err error
//		agent, err = consultest.NewAgent()
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		agent.Stop()
//		os.Exit(code)
//	}
//
// A dev agent keeps its state in memory: Restart brings the agent back on
// the same address with an empty store (no keys, no sessions, indexes
// starting over). An agent started with AgentOptions.Persistent is a
// single-server datacenter keeping its state in its data dir instead, so it
// comes back from Restart (or Kill and Start) with its keys and sessions;
// tests use it to ride out short outages. An agent started with
// AgentOptions.ACL enforces ACLs (default policy "deny"): its
// ManagementToken may do anything, and ReadOnlyToken creates a token that
// may only read, for permission tests.
package consultest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/topokit/topokit/internal/freeport"
	"github.com/topokit/topokit/internal/testpki"

	"github.com/hashicorp/consul/api"
)

// Version is the Consul release the helpers run.
const Version = "v1.13.9"

// startTimeout bounds how long an agent may take to elect itself leader and
// register its node. The machine running the tests may be heavily shared.
const startTimeout = 60 * time.Second

// Start starts a Consul dev agent for the test, stops it in t.Cleanup, and
// returns its HTTP address "127.0.0.1:PORT", usable as the "consul"
// factory's serverAddress. It fails the test (never skips) when the binary
// cannot be found or built or the agent does not come up. It is safe for
// concurrent use; each call starts a separate agent.
func Start(t testing.TB) string {
	t.Helper()
	return StartAgent(t).Addr()
}

// StartAgent is Start returning the *Agent, for tests that restart or stop
// it. The agent is stopped in t.Cleanup.
func StartAgent(t testing.TB) *Agent {
	t.Helper()
	return StartAgentWithOptions(t, AgentOptions{})
}

// AgentOptions select the kind of agent NewAgentWithOptions starts.
type AgentOptions struct {
	// Persistent runs a single server (`consul agent -server
	// -bootstrap-expect=1`) that keeps its state in its data dir, instead
	// of `consul agent -dev`, which keeps it in memory. Its writes are
	// slower (they reach the disk) and it takes a second or two longer to
	// elect itself, but keys and sessions survive Kill/Start and Restart.
	Persistent bool

	// ACL enables Consul's ACL system with default_policy "deny": a request
	// without a token (or with a token lacking the rule) is refused with
	// "Permission denied". The agent gets a random management token
	// (Agent.ManagementToken) as its initial management and agent token;
	// Agent.ReadOnlyToken creates a token that may only read.
	ACL bool

	// TLS, when set, makes the agent serve its HTTP API over TLS too, on
	// a port of its own (Agent.HTTPSAddr), with the server certificate
	// and key in these PEM files, requiring client certificates signed by
	// the CA in CAFile (verify_incoming). The plain HTTP port (Addr)
	// stays open: the readiness check uses it.
	TLS *TLSFiles

	// MaxConnsPerClient is the agent's limits.http_max_conns_per_client:
	// past this many HTTP connections from one client address it refuses
	// every request of that address with 429. Zero means 4096, room for
	// the hundreds of waiting lockers of the fairness tests (Consul's own
	// default is 200); tests of the cap set a small one.
	MaxConnsPerClient int
}

// TLSFiles are the PEM files of a TLS agent (AgentOptions.TLS).
type TLSFiles struct {
	CAFile, CertFile, KeyFile string
}

// StartTLSAgent writes a CA and a server and a client certificate signed by
// it into dir (ca.pem, server.pem, client.pem and their -key.pem keys, see
// internal/testpki) and starts a dev agent that serves its HTTP API only
// over TLS with the server certificate, requiring client certificates
// signed by that CA; its plain HTTP port serves only the readiness check.
// It returns the agent's HTTPS address; the agent is stopped when t ends.
func StartTLSAgent(t testing.TB, dir string) string {
	t.Helper()
	ca, caKey := testpki.Write(t, dir, "ca", nil, nil)
	testpki.Write(t, dir, "server", ca, caKey)
	testpki.Write(t, dir, "client", ca, caKey)
	return StartAgentWithOptions(t, AgentOptions{TLS: &TLSFiles{
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "server.pem"),
		KeyFile:  filepath.Join(dir, "server-key.pem"),
	}}).HTTPSAddr()
}

// StartAgentWithOptions is StartAgent for an agent of the given kind.
func StartAgentWithOptions(t testing.TB, opts AgentOptions) *Agent {
	t.Helper()
	a, err := NewAgentWithOptions(opts)
	if err != nil {
		t.Fatalf("consultest: %v", err)
	}
	t.Cleanup(a.Stop)
	return a
}

// Binary returns the path of the Consul binary the helpers run, building it
// with tools/consul/build.sh when it is missing (this takes minutes). The
// path is $TOPOKIT_CONSUL when set, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/topokit/consul-v1.13.9/consul. It fails the
// test when the binary cannot be found or built.
func Binary(t testing.TB) string {
	t.Helper()
	bin, err := BinaryPath()
	if err != nil {
		t.Fatalf("consultest: %v", err)
	}
	return bin
}

// BinaryPath is Binary for callers without a testing.TB (TestMain): it
// returns the binary's path, or an error saying why it could not be built.
func BinaryPath() (string, error) {
	bin := defaultBinary()
	if isExecutable(bin) {
		return bin, nil
	}
	// build.sh serialises concurrent builds (across processes) with flock.
	script, err := findBuildScript()
	if err != nil {
		return "", fmt.Errorf("consul binary %s is missing and %v", bin, err)
	}
	cmd := exec.Command("bash", script)
	cmd.Env = append(os.Environ(), "TOPOKIT_CONSUL="+bin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building consul with %s: %v\n%s", script, err, stderr.String())
	}
	if !isExecutable(bin) {
		return "", fmt.Errorf("%s ran (%q) but %s is still missing", script, bytes.TrimSpace(out), bin)
	}
	return bin, nil
}

func defaultBinary() string {
	if p := os.Getenv("TOPOKIT_CONSUL"); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "topokit", "consul-"+Version, "consul")
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// findBuildScript locates tools/consul/build.sh: next to this source file
// when the tree is at hand, else in a parent of the working directory.
func findBuildScript() (string, error) {
	const rel = "tools/consul/build.sh"
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok {
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		p := filepath.Join(root, rel)
		if isExecutable(p) || fileExists(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			p := filepath.Join(dir, rel)
			if fileExists(p) {
				return p, nil
			}
			tried = append(tried, p)
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", fmt.Errorf("no %s found (tried %v); run it from a topokit checkout or set TOPOKIT_CONSUL to an MPL-2.0 consul %s binary", rel, tried, Version)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// SessionTTLMin is the session_ttl_min of every agent this package
// starts (Consul's default is 10 s): tests may use session TTLs down to
// it, with consultopo.Options.MinSessionTTL set to it, so that waits for a
// lapsed session take seconds rather than tens of seconds.
const SessionTTLMin = time.Second

// Agent is one running Consul dev agent. Its methods are safe for
// concurrent use.
type Agent struct {
	bin      string
	dir      string
	httpPort int
	// httpsPort is the HTTPS port of a TLS agent, 0 for none.
	httpsPort int
	args      []string
	mgmt      string // management token of an ACL agent, else ""

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	logPath string
	runs    int
	stopped bool
}

// NewAgent starts a Consul dev agent on free 127.0.0.1 ports (HTTP, serf
// LAN and WAN, server RPC; DNS and gRPC disabled) with its data and log in a
// new temporary directory, and returns once the agent has elected itself
// leader and registered its node (so sessions can be created). The caller
// must call Stop. It retries with new ports when a port was taken between
// choosing and binding it.
func NewAgent() (*Agent, error) {
	return NewAgentWithOptions(AgentOptions{})
}

// NewAgentWithOptions is NewAgent for an agent of the given kind.
func NewAgentWithOptions(opts AgentOptions) (*Agent, error) {
	bin, err := BinaryPath()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		a, err := newAgent(bin, opts)
		if err == nil {
			return a, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func newAgent(bin string, opts AgentOptions) (*Agent, error) {
	dir, err := os.MkdirTemp("", "consultest-")
	if err != nil {
		return nil, err
	}
	nports := 4
	if opts.TLS != nil {
		nports = 5 // and HTTPS
	}
	ports, err := freePorts(nports)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	maxConns := opts.MaxConnsPerClient
	if maxConns <= 0 {
		maxConns = 4096
	}
	a := &Agent{
		bin:      bin,
		dir:      dir,
		httpPort: ports[0],
		args: []string{
			"agent",
			"-bind", "127.0.0.1",
			"-client", "127.0.0.1",
			"-http-port", strconv.Itoa(ports[0]),
			"-serf-lan-port", strconv.Itoa(ports[1]),
			"-serf-wan-port", strconv.Itoa(ports[2]),
			"-server-port", strconv.Itoa(ports[3]),
			"-dns-port=-1",
			"-grpc-port=-1",
			"-data-dir", filepath.Join(dir, "data"),
			"-node", "consultest-" + strconv.Itoa(ports[0]),
			"-log-level", "warn",
			"-hcl", "disable_update_check = true",
			"-hcl", fmt.Sprintf("session_ttl_min = %q", SessionTTLMin.String()),
			// Hundreds of waiting lockers (each blocking query holds an
			// HTTP connection) run from one address in the fairness tests
			// and benchmarks; Consul's default allows 200 per client.
			"-hcl", fmt.Sprintf("limits { http_max_conns_per_client = %d }", maxConns),
		},
	}
	if opts.Persistent {
		a.args = append(a.args, "-server", "-bootstrap-expect=1", "-hcl", "performance { raft_multiplier = 1 }")
	} else {
		a.args = append(a.args, "-dev")
	}
	if f := opts.TLS; f != nil {
		a.httpsPort = ports[4]
		a.args = append(a.args, "-https-port", strconv.Itoa(ports[4]), "-hcl", fmt.Sprintf(`tls {
  defaults {
    ca_file = %q
    cert_file = %q
    key_file = %q
    verify_incoming = true
  }
}`, f.CAFile, f.CertFile, f.KeyFile))
	}
	if opts.ACL {
		a.mgmt, err = newUUID()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		a.args = append(a.args, "-hcl", fmt.Sprintf(`acl {
  enabled = true
  default_policy = "deny"
  down_policy = "deny"
  enable_token_persistence = false
  tokens {
    initial_management = %q
    agent = %q
  }
}`, a.mgmt, a.mgmt))
	}
	if err := a.start(); err != nil {
		a.Stop()
		return nil, err
	}
	return a, nil
}

// Addr returns the agent's HTTP address, "127.0.0.1:PORT". It stays the same
// across Restart.
func (a *Agent) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.httpPort))
}

// Pid returns the process id of the running agent, 0 while it is stopped.
// Benchmarks read the agent's CPU time from /proc/<pid>/stat with it. It
// is safe for concurrent use.
func (a *Agent) Pid() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd == nil || a.cmd.Process == nil {
		return 0
	}
	return a.cmd.Process.Pid
}

// CPUTime returns the CPU time (user and system, in steps of 10 ms, the
// kernel's USER_HZ clock tick) the running agent process has used so far,
// read from /proc/<pid>/stat, for benchmarks that count the agent's CPU
// beside their own. It returns an error while the agent is stopped or when
// /proc cannot be read (not Linux). It is safe for concurrent use.
func (a *Agent) CPUTime() (time.Duration, error) {
	pid := a.Pid()
	if pid == 0 {
		return 0, errors.New("consultest: the agent is not running")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields count from the
	// closing parenthesis (state is field 3, utime 14 and stime 15).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("consultest: unexpected /proc stat")
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, errors.New("consultest: unexpected /proc stat")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// HTTPSAddr returns the HTTPS address of an agent started with
// AgentOptions.TLS, "127.0.0.1:PORT", and "" for any other agent. It stays
// the same across Restart.
func (a *Agent) HTTPSAddr() string {
	if a.httpsPort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(a.httpsPort))
}

// Dir returns the agent's temporary directory (data dir and logs).
func (a *Agent) Dir() string { return a.dir }

// Restart kills the agent and starts it again on the same ports, returning
// once it leads again. A dev agent keeps nothing across a restart: keys and
// sessions are gone and indexes start over; a persistent one keeps both. It
// fails the test when the agent does not come back.
func (a *Agent) Restart(t testing.TB) {
	t.Helper()
	a.Kill()
	if err := a.Start(); err != nil {
		t.Fatalf("consultest: restarting the agent: %v", err)
	}
}

// Kill kills the agent's process (SIGKILL) and waits for it to exit; the
// agent's address then refuses connections until Start. Killing a stopped
// agent does nothing.
func (a *Agent) Kill() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.killLocked()
}

// Start starts a killed agent again on the same ports and waits until it
// leads. Starting a running agent does nothing; starting a stopped one is an
// error.
func (a *Agent) Start() error {
	a.mu.Lock()
	stopped, running := a.stopped, a.cmd != nil
	a.mu.Unlock()
	switch {
	case stopped:
		return errors.New("agent was stopped")
	case running:
		return nil
	}
	return a.start()
}

// Stop kills the agent and removes its temporary directory. It is
// idempotent.
func (a *Agent) Stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.killLocked()
	if !a.stopped {
		a.stopped = true
		os.RemoveAll(a.dir)
	}
}

func (a *Agent) killLocked() {
	if a.cmd == nil {
		return
	}
	_ = a.cmd.Process.Kill()
	<-a.exited
	a.cmd = nil
}

func (a *Agent) start() error {
	a.mu.Lock()
	a.runs++
	logPath := filepath.Join(a.dir, fmt.Sprintf("consul-%d.log", a.runs))
	logFile, err := os.Create(logPath)
	if err != nil {
		a.mu.Unlock()
		return err
	}
	cmd := exec.Command(a.bin, a.args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		a.mu.Unlock()
		return fmt.Errorf("starting %s: %w", a.bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	a.cmd, a.exited, a.logPath = cmd, exited, logPath
	a.mu.Unlock()

	if err := a.waitReady(exited); err != nil {
		a.Kill()
		logTail, _ := os.ReadFile(logPath)
		if len(logTail) > 4000 {
			logTail = logTail[len(logTail)-4000:]
		}
		return fmt.Errorf("consul agent on %s did not come up: %v\nlog %s:\n%s", a.Addr(), err, logPath, logTail)
	}
	return nil
}

// waitReady polls until the agent reports a leader and its node is in the
// catalog (a session needs its node registered).
func (a *Agent) waitReady(exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	base := "http://" + a.Addr()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var leader string
		var nodes []json.RawMessage
		if err := a.getJSON(ctx, client, base+"/v1/status/leader", &leader); err == nil && leader != "" {
			if err := a.getJSON(ctx, client, base+"/v1/catalog/nodes", &nodes); err == nil && len(nodes) > 0 {
				return nil
			}
		}
		select {
		case <-exited:
			return errors.New("the agent exited")
		case <-ctx.Done():
			return fmt.Errorf("no leader after %v", startTimeout)
		case <-tick.C:
		}
	}
}

func (a *Agent) getJSON(ctx context.Context, c *http.Client, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if a.mgmt != "" {
		req.Header.Set("X-Consul-Token", a.mgmt)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// freePorts returns n distinct ports that are free on 127.0.0.1 for both
// TCP and UDP (serf uses both) at the time of the call, outside the
// kernel's ephemeral range (see internal/freeport), so that an agent
// restarted on its ports does not find one taken by an outgoing
// connection.
func freePorts(n int) ([]int, error) {
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for tries := 0; len(ports) < n && tries < 100; tries++ {
		l, err := freeport.Listen()
		if err != nil {
			return nil, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			l.Close()
			continue
		}
		u.Close()
		held = append(held, l)
		ports = append(ports, port)
	}
	if len(ports) < n {
		return nil, errors.New("could not find free ports on 127.0.0.1")
	}
	return ports, nil
}

// newUUID returns a random version-4 UUID, the form of Consul ACL tokens.
func newUUID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:]), nil
}

// ManagementToken returns the management token of an agent started with
// AgentOptions.ACL (it may do anything), or "" for an agent without ACLs.
func (a *Agent) ManagementToken() string { return a.mgmt }

// ReadOnlyToken creates, through the ACL API with the management token, a
// policy that may read every key, session and node (and write nothing) and
// a token with that policy, and returns the token's secret. It fails the
// test on an agent without ACLs or when the API refuses.
func (a *Agent) ReadOnlyToken(t testing.TB) string {
	t.Helper()
	if a.mgmt == "" {
		t.Fatal("consultest: ReadOnlyToken needs an agent started with AgentOptions.ACL")
	}
	cfg := api.DefaultConfig()
	cfg.Address = a.Addr()
	cfg.Token = a.mgmt
	client, err := api.NewClient(cfg)
	if err != nil {
		t.Fatalf("consultest: %v", err)
	}
	name := "read-only-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	policy, _, err := client.ACL().PolicyCreate(&api.ACLPolicy{
		Name:  name,
		Rules: `key_prefix "" { policy = "read" }` + "\n" + `session_prefix "" { policy = "read" }` + "\n" + `node_prefix "" { policy = "read" }`,
	}, nil)
	if err != nil {
		t.Fatalf("consultest: creating the read-only policy: %v", err)
	}
	token, _, err := client.ACL().TokenCreate(&api.ACLToken{
		Description: name,
		Policies:    []*api.ACLTokenPolicyLink{{ID: policy.ID}},
	}, nil)
	if err != nil {
		t.Fatalf("consultest: creating the read-only token: %v", err)
	}
	return token.SecretID
}
