// Package zktest starts real ZooKeeper 3.8 servers for tests: a standalone
// server (Start, Launch) and a multi-node ensemble (StartEnsemble). The
// servers run the JVM from the Debian package "zookeeper", listen on free
// 127.0.0.1 ports, keep their data in temporary directories, and are killed
// (with their whole process group) when the test that started them ends.
//
// When the package is missing, the helpers install it with
// "apt-get install -y zookeeper" if the process runs as root, and otherwise
// fail with a message naming the package to install. They never skip.
//
// The servers are tuned for tests: the heap is HeapMax and jute.maxbuffer
// JuteMaxBuffer, tickTime is TickTime (so the shortest
// session timeout the server grants is 2*TickTime), fsync is off, the admin
// HTTP server is off, every four-letter command is allowed, and TTL nodes
// (zookeeper.extendedTypesEnabled) are enabled.
package zktest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/topokit/topokit/internal/freeport"
)

// TickTime is the tickTime of every server started here. ZooKeeper grants
// session timeouts between 2*TickTime and MaxSessionTimeout.
const TickTime = 200 * time.Millisecond

// MaxSessionTimeout is the longest session timeout the servers grant.
const MaxSessionTimeout = 60 * time.Second

// StartTimeout bounds how long a server may take to answer "srvr" with a
// Mode line after its JVM was started (JVM start-up is slow on a loaded
// machine).
const StartTimeout = 90 * time.Second

// HeapMax is the servers' maximum JVM heap (-Xmx). ZooKeeper keeps its
// whole data tree in memory: 1 GiB holds a working set of several hundred
// values of the maximum size (topo.MaxValueSize, 512 KiB) with room for
// the request pipeline and snapshots.
const HeapMax = "1g"

// JuteMaxBuffer is the servers' jute.maxbuffer (the largest request or
// response, in bytes): 4 MiB, well above a maximum-size value plus its
// request overhead.
const JuteMaxBuffer = 4 << 20

// Jar is where the Debian package installs the ZooKeeper server jar; its
// manifest names the libraries it needs.
const Jar = "/usr/share/java/zookeeper.jar"

// nettyCodec is the Debian package's Netty codec library.
const nettyCodec = "/usr/share/java/netty-codec.jar"

// slf4jNop silences the server's logging (the package's log4j setup is for
// the system service).
const slf4jNop = "/usr/share/java/slf4j-nop.jar"

// EnsureInstalled makes sure the ZooKeeper server jar and java are present.
// When they are missing and the process runs as root it runs
// "apt-get install -y zookeeper" (after "apt-get update" if the first attempt
// fails); otherwise it returns an error telling what to install. It is safe
// for concurrent use (apt's own lock serialises concurrent installs; a failed
// attempt is retried).
func EnsureInstalled() error {
	if installed() {
		return nil
	}
	if os.Geteuid() != 0 {
		return errors.New("zktest: ZooKeeper is not installed: install the Debian package \"zookeeper\" (apt-get install -y zookeeper), or run the tests as root so they install it")
	}
	var out []byte
	var err error
	for attempt := 0; attempt < 5 && !installed(); attempt++ {
		if attempt > 0 {
			upd := exec.Command("apt-get", "update")
			upd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			_, _ = upd.CombinedOutput()
		}
		cmd := exec.Command("apt-get", "install", "-y", "zookeeper")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err = cmd.CombinedOutput()
		if err != nil {
			time.Sleep(time.Duration(attempt+1) * time.Second) // apt lock held by a concurrent install
		}
	}
	if !installed() {
		return fmt.Errorf("zktest: installing the Debian package \"zookeeper\" failed (%v): %s", err, lastLines(out, 10))
	}
	return nil
}

func installed() bool {
	if _, err := os.Stat(Jar); err != nil {
		return false
	}
	if _, err := exec.LookPath("java"); err != nil {
		return false
	}
	return true
}

func classpath() string {
	cp := Jar
	// The Netty connection factory of the TLS servers (StartTLS) needs
	// netty-codec, which the package's jar manifest does not list.
	if _, err := os.Stat(nettyCodec); err == nil {
		cp += ":" + nettyCodec
	}
	if _, err := os.Stat(slf4jNop); err == nil {
		cp += ":" + slf4jNop
	}
	return cp
}

// Server is one running standalone ZooKeeper server started by Launch. Its
// methods are safe for concurrent use.
type Server struct {
	addr  string
	sAddr string // the secureClientPort's address; "" without TLS
	dir   string
	rmDir bool
	proc  *process
}

// Start starts a standalone ZooKeeper server on a free 127.0.0.1 port with
// its data in t.TempDir(), waits until it answers "srvr" with a Mode line,
// and returns its client address "127.0.0.1:PORT". The server is killed in
// t.Cleanup. It fails the test (never skips) when ZooKeeper cannot be
// installed or started.
func Start(t testing.TB) string {
	t.Helper()
	if err := EnsureInstalled(); err != nil {
		t.Fatal(err)
	}
	s, err := launch(t.TempDir(), false, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s.Addr()
}

// StartWithMaxSessionTimeout is Start with a server that grants session
// timeouts of at most max (whole milliseconds, at least 2*TickTime), as a
// production server does (ZooKeeper's default maximum is 20 ticks): a
// client asking for more gets max.
func StartWithMaxSessionTimeout(t testing.TB, max time.Duration) string {
	t.Helper()
	if err := EnsureInstalled(); err != nil {
		t.Fatal(err)
	}
	s, err := launch(t.TempDir(), false, nil, fmt.Sprintf("maxSessionTimeout=%d\n", max.Milliseconds()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s.Addr()
}

// Launch is Start for TestMain, where there is no testing.TB: it starts a
// standalone server with its data in a new temporary directory, which Stop
// removes. The caller must call Stop (typically after m.Run) to kill it.
func Launch() (*Server, error) {
	if err := EnsureInstalled(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "zktest-")
	if err != nil {
		return nil, err
	}
	s, err := launch(dir, true, nil, "")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// Addr returns the server's client address "127.0.0.1:PORT".
func (s *Server) Addr() string { return s.addr }

// Stop kills the server's JVM (its whole process group) and waits for it to
// exit; a Server from Launch also has its data directory removed. It is
// idempotent.
func (s *Server) Stop() {
	s.proc.kill()
	if s.rmDir {
		_ = os.RemoveAll(s.dir)
	}
}

// Pause freezes the server's JVM (SIGSTOP to its process group): it keeps
// its connections but answers nothing, like a hung server, until Resume.
// It returns once every thread of the JVM is stopped: the kernel spreads
// a stop to a process's threads only when one of them handles the signal,
// so on a loaded machine the others may go on answering for a while after
// the signal was sent.
func (s *Server) Pause() error {
	if err := s.proc.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return s.proc.waitStopped(StartTimeout)
}

// Resume lets a paused server run again (SIGCONT).
func (s *Server) Resume() error { return s.proc.signal(syscall.SIGCONT) }

// launch starts a standalone server; extra is appended to its
// configuration (a later line of a key replaces an earlier one).
func launch(dir string, rmDir bool, secure *TLSFiles, extra string) (*Server, error) {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port may be taken between probe and bind
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		data := filepath.Join(dir, fmt.Sprintf("data-%d", attempt))
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, err
		}
		cfg := filepath.Join(dir, fmt.Sprintf("zoo-%d.cfg", attempt))
		conf := baseConfig(data) + fmt.Sprintf("clientPort=%d\nclientPortAddress=127.0.0.1\n", port) + extra
		sAddr := ""
		if secure != nil {
			sPort, err := freePort()
			if err != nil {
				return nil, err
			}
			conf += secure.config(sPort)
			sAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(sPort))
		}
		if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		p, err := startJVM("org.apache.zookeeper.server.ZooKeeperServerMain", cfg, filepath.Join(dir, fmt.Sprintf("zookeeper-%d.log", attempt)))
		if err != nil {
			return nil, err
		}
		if err := p.waitReady(addr, StartTimeout); err != nil {
			p.kill()
			lastErr = err
			continue
		}
		if sAddr != "" {
			if err := waitTLSAnswers(p, sAddr, StartTimeout); err != nil {
				p.kill()
				lastErr = err
				continue
			}
		}
		return &Server{addr: addr, sAddr: sAddr, dir: dir, rmDir: rmDir, proc: p}, nil
	}
	return nil, lastErr
}

func baseConfig(dataDir string) string {
	return fmt.Sprintf(`tickTime=%d
minSessionTimeout=%d
maxSessionTimeout=%d
dataDir=%s
forceSync=no
admin.enableServer=false
4lw.commands.whitelist=*
maxClientCnxns=0
autopurge.purgeInterval=0
`, TickTime.Milliseconds(), 2*TickTime.Milliseconds(), MaxSessionTimeout.Milliseconds(), dataDir)
}

// process is one JVM running in its own process group.
type process struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the JVM exited
	once    sync.Once
}

func startJVM(mainClass, cfg, logPath string) (*process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("java",
		"-Xms32m", "-Xmx"+HeapMax, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Djute.maxbuffer="+strconv.Itoa(JuteMaxBuffer),
		"-Dzookeeper.4lw.commands.whitelist=*",
		"-Dzookeeper.admin.enableServer=false",
		"-Dzookeeper.extendedTypesEnabled=true",
		"-Dznode.container.checkIntervalMs=100",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-cp", classpath(),
		mainClass, cfg)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Dir = filepath.Dir(cfg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("zktest: starting java: %w", err)
	}
	p := &process{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) signal(sig syscall.Signal) error {
	if p.exited() {
		return errors.New("zktest: the server is not running")
	}
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// waitStopped polls until every thread of the JVM is in the stopped state
// (or exiting), for at most timeout.
func (p *process) waitStopped(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		stopped, err := p.allThreadsStopped()
		if err != nil || stopped {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zktest: the server's threads did not all stop within %v", timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// allThreadsStopped reads the state of each of the JVM's threads from
// /proc/<pid>/task/<tid>/stat.
func (p *process) allThreadsStopped() (bool, error) {
	if p.exited() {
		return false, errors.New("zktest: the server is not running")
	}
	dir := fmt.Sprintf("/proc/%d/task", p.cmd.Process.Pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("zktest: reading the server's threads: %w", err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			continue // the thread ended
		}
		// "tid (comm) S ...": the state follows the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Errorf("zktest: unexpected %s/%s/stat: %q", dir, task.Name(), b)
		}
		switch b[i+2] {
		case 'T', 't', 'Z', 'X':
		default:
			return false, nil
		}
	}
	return true, nil
}

// kill sends SIGKILL to the JVM's process group and waits for it to exit.
func (p *process) kill() {
	p.once.Do(func() {
		// Not once it exited: its process group id may be another's by now.
		if p.cmd.Process != nil && !p.exited() {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT) // in case it was paused
		}
		<-p.done
	})
}

// stop sends SIGTERM (a clean shutdown) and falls back to SIGKILL.
func (p *process) stop() {
	p.once.Do(func() {
		if p.cmd.Process != nil && !p.exited() {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
}

func (p *process) waitReady(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if mode, err := Mode(addr); err == nil && mode != "" {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("zktest: ZooKeeper on %s exited during start-up: %s", addr, p.logTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zktest: ZooKeeper on %s did not answer srvr with a Mode within %v: %s", addr, timeout, p.logTail())
		}
		select {
		case <-p.done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (p *process) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	return lastLines(b, 20)
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FourLetter sends a four-letter command (such as "srvr" or "ruok") to the
// server at addr and returns its whole answer. It gives up after 2 s.
func FourLetter(addr, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	if _, err := io.WriteString(c, cmd); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil && len(b) == 0 {
		return "", err
	}
	return string(b), nil
}

// Mode returns the "Mode:" value ("standalone", "leader" or "follower") that
// the server at addr reports to "srvr", or an error when it does not answer
// with one (not running, or not serving: e.g. no quorum).
func Mode(addr string) (string, error) {
	out, err := FourLetter(addr, "srvr")
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader([]byte(out)))
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode:"); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("zktest: %s answered srvr without a Mode: %q", addr, strings.TrimSpace(out))
}

// freePort returns a free port outside the kernel's ephemeral range (see
// internal/freeport), where a restarted server's port cannot have been
// taken by an outgoing connection meanwhile.
func freePort() (int, error) {
	ports, err := freeport.Ports(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// CPUTime returns the CPU time (user and system; in steps of 10 ms, the
// kernel's USER_HZ clock tick) the server's JVM has used so far, read from
// /proc/<pid>/stat, for benchmarks that count the server's CPU beside
// their own. It returns an error when the JVM has exited or /proc cannot
// be read (not Linux). Safe for concurrent use.
func (s *Server) CPUTime() (time.Duration, error) {
	if s.proc.exited() {
		return 0, errors.New("zktest: the server is not running")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.proc.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name (which may hold spaces, in
	// parentheses): state is field 3, utime 14 and stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("zktest: unexpected /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("zktest: unexpected /proc stat")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}
