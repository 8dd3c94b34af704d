package topoctl

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// runMainEnv makes the test binary behave as the topoctl binary (Run), so
// that tests can run topoctl as a real process and send it signals.
const runMainEnv = "TOPOCTL_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Exit(Run())
	}
	os.Exit(m.Run())
}

// proc is topoctl running as a process.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
	errb  *syncBuffer
	done  chan struct{}
}

// startProcess runs topoctl args as a child process with env added.
func startProcess(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), runMainEnv+"=1"), env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &proc{cmd: cmd, lines: make(chan string, 100), errb: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.errb
	require.NoError(t, cmd.Start())
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p
}

// waitLine waits for a stdout line containing want.
func (p *proc) waitLine(t *testing.T, want string) string {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				require.FailNow(t, "topoctl ended before printing "+want, "stderr: %s", p.errb.String())
			}
			if strings.Contains(l, want) {
				return l
			}
		case <-timeout:
			require.FailNow(t, "timed out waiting for "+want, "stderr: %s", p.errb.String())
		}
	}
}

// signalAndWait sends sig and returns the exit code.
func (p *proc) signalAndWait(t *testing.T, sig os.Signal) int {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		require.FailNow(t, "topoctl did not exit after "+sig.String(), "stderr: %s", p.errb.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// The binary's signal handling: serve stops cleanly on SIGTERM and SIGINT,
// watch and lock without a command end with status 0 on SIGINT, and lock
// passes SIGTERM on to its command, releases the lock and exits with the
// command's status.
func TestProcessSignals(t *testing.T) {
	t.Parallel()
	addrs, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	env := []string{envDataDir + "=" + t.TempDir(), envImplementation + "=", envServerAddress + "=", envRoot + "=", envCell + "="}
	serveArgs := []string{"serve", "--listen-client-address", addrs[0], "--listen-peer-address", addrs[1]}

	srv := startProcess(t, env, serveArgs...)
	srv.waitLine(t, "Stop it with Ctrl-C")
	tg := target{impl: "etcd2", addr: addrs[0], root: defaultRoot}
	tg.ok(t, "put", "ks/Keyspace", "k")

	w := startProcess(t, env, "watch", "ks/Keyspace")
	w.waitLine(t, `/ks/Keyspace`)
	assert.Equal(t, 0, w.signalAndWait(t, syscall.SIGINT), w.errb.String())

	l := startProcess(t, env, "lock", "ks", "--", "sh", "-c", "echo held; exec sleep 600")
	l.waitLine(t, "held")
	tg.fails(t, 1, []string{"NodeExists"}, "lock", "--try", "ks", "--", "true")
	assert.Equal(t, ExitInterrupted, l.signalAndWait(t, syscall.SIGTERM), l.errb.String())
	assert.Equal(t, "free\n", tg.ok(t, "lock", "--try", "ks", "--", "echo", "free"))

	// lock without a command holds the lock until Ctrl-C, its normal way
	// to stop: status 0, the lock released.
	l = startProcess(t, env, "lock", "ks")
	l.waitLine(t, "holding the lock on /ks")
	assert.Equal(t, 0, l.signalAndWait(t, syscall.SIGINT), l.errb.String())
	assert.Equal(t, "free\n", tg.ok(t, "lock", "--try", "ks", "--", "echo", "free"))

	assert.Equal(t, 0, srv.signalAndWait(t, syscall.SIGTERM), srv.errb.String())
	srv.waitLine(t, "embedded etcd stopped")

	// Restarted and stopped with SIGINT; the data survived.
	srv = startProcess(t, env, serveArgs...)
	srv.waitLine(t, "Stop it with Ctrl-C")
	assert.Equal(t, "k", tg.ok(t, "get", "ks/Keyspace"))
	assert.Equal(t, 0, srv.signalAndWait(t, syscall.SIGINT), srv.errb.String())
}

// alive reports whether process pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// readPid waits for file to hold a pid and returns it.
func readPid(t *testing.T, file string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(file)
		if err != nil || !bytes.HasSuffix(b, []byte("\n")) {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, time.Minute, 10*time.Millisecond)
	return pid
}

// lock's command runs in its own process group: on SIGINT/SIGTERM, and
// when the command exits leaving processes behind, the whole group is
// stopped before the lock is released; nothing outlives the lock.
func TestLockStopsProcessGroup(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	root := "/" + t.Name()
	tg := target{impl: "etcd2", addr: addr, root: root}
	tg.ok(t, "put", "ks/Keyspace", "k")
	env := connEnv("etcd2", addr, root)

	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		pidFile := filepath.Join(t.TempDir(), "pid")
		// The grandchild ignores nothing; sh waits for it.
		l := startProcess(t, env, "lock", "ks", "--", "sh", "-c", "sleep 600 & echo $! > "+pidFile+"; echo held; wait")
		l.waitLine(t, "held")
		pid := readPid(t, pidFile)
		require.True(t, alive(pid))
		assert.Equal(t, ExitInterrupted, l.signalAndWait(t, sig), l.errb.String())
		assert.False(t, alive(pid), "the grandchild outlived the lock (%s)", sig)
		assert.Contains(t, l.errb.String(), "waiting up to 10s before SIGKILL")
		assert.Equal(t, "free\n", tg.ok(t, "lock", "--try", "ks", "--", "echo", "free"))
	}

	// The store ends the lock's lease (LockLost): the whole group is
	// stopped, the grandchild included, and topoctl exits ExitLockLost.
	pidFile := filepath.Join(t.TempDir(), "pid")
	l := startProcess(t, env, "lock", "--check-interval", "20ms", "ks", "--", "sh", "-c", "sleep 600 & echo $! > "+pidFile+"; echo held; wait")
	l.waitLine(t, "held")
	pid := readPid(t, pidFile)
	require.True(t, alive(pid))
	revokeAllLeases(t, addr)
	assert.Equal(t, ExitLockLost, l.wait(t), l.errb.String())
	assert.False(t, alive(pid), "the grandchild outlived the lost lock")
	assert.Contains(t, l.errb.String(), "the lock was lost: sending SIGTERM")
	assert.Equal(t, "free\n", tg.ok(t, "lock", "--try", "ks", "--", "echo", "free"))

	// A command that exits at once, leaving a process in its group: the
	// process is stopped before the lock is released.
	pidFile = filepath.Join(t.TempDir(), "pid")
	r := tg.run(t, "", "lock", "ks", "--", "sh", "-c", "sleep 600 & echo $! > "+pidFile)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "left processes in its group")
	assert.False(t, alive(readPid(t, pidFile)))
}

// serve refuses a data directory in use at once, naming the process; it
// stops promptly with a client attached (saying so), a new serve binds the
// same addresses right after, and an attached watch says it is
// reconnecting while the server is down and resumes once it is back.
func TestServeBusyStopRestartWatch(t *testing.T) {
	t.Parallel()
	addrs, err := etcdembed.FreeAddrs(4)
	require.NoError(t, err)
	dataDir := t.TempDir()
	env := []string{envDataDir + "=" + dataDir, envImplementation + "=", envServerAddress + "=", envRoot + "=", envCell + "="}
	serveArgs := []string{"--log-level", "info", "serve", "--listen-client-address", addrs[0], "--listen-peer-address", addrs[1]}

	a := startProcess(t, env, serveArgs...)
	a.waitLine(t, "Stop it with Ctrl-C")

	// A second serve on the same data directory (other ports) refuses at
	// once, naming the first one's PID.
	b := startProcess(t, env, "serve", "--listen-client-address", addrs[2], "--listen-peer-address", addrs[3])
	assert.Equal(t, 1, b.wait(t), b.errb.String())
	assert.Contains(t, b.errb.String(), "is in use by process "+strconv.Itoa(a.cmd.Process.Pid))

	tg := target{impl: "etcd2", addr: addrs[0], root: defaultRoot}
	// A plain serve is no self-managing cluster, and cluster status says so.
	st := tg.run(t, "", "cluster", "status")
	assert.Contains(t, st.stderr, "not a self-managing cluster")
	// ... and a size nothing manages is not a shortfall: the etcd is
	// healthy (it said "healthy: false" and "start 3 more nodes").
	assert.Contains(t, st.stdout, "healthy: true", st.stdout)
	assert.NotContains(t, st.stdout, "below ideal size", st.stdout)
	// Nor does cluster size pretend that a size set there does anything.
	sz := tg.run(t, "", "cluster", "size", "3")
	assert.Equal(t, 0, sz.code, sz.stderr)
	assert.Contains(t, sz.stderr, "not a self-managing cluster (started without serve --cluster or --seeds): nothing acts on this size")
	v1 := strings.TrimSpace(tg.ok(t, "put", "w", "one"))
	w := startProcess(t, env, "watch", "w")
	w.waitLine(t, "/w "+v1+` "one"`)

	assert.Equal(t, 0, a.signalAndWait(t, syscall.SIGTERM), a.errb.String())
	a.waitLine(t, "stopping the embedded etcd (at most 1s")
	a.waitLine(t, "embedded etcd stopped")
	w.waitStderr(t, "reconnecting")

	// Restarted at once on the same addresses and data directory.
	a = startProcess(t, env, serveArgs...)
	a.waitLine(t, "Stop it with Ctrl-C")
	v2 := strings.TrimSpace(tg.ok(t, "put", "w", "two"))
	w.waitLine(t, "/w "+v2+` "two"`)
	assert.Equal(t, 0, w.signalAndWait(t, syscall.SIGINT), w.errb.String())
	assert.Equal(t, 0, a.signalAndWait(t, syscall.SIGINT), a.errb.String())
}

// A topoctl killed with SIGKILL cannot stop lock's command: on Linux the
// command's process group, what it started in the background included,
// is killed with it (a guard with a parent-death signal), so it is gone
// before the lock lapses and a second holder runs. Before, the command
// kept running in its own process group while a second lock ran its
// command: two holders.
func TestLockCommandDiesWithKilledTopoctl(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("only Linux has a parent-death signal; elsewhere lock's help documents the gap")
	}
	addr := etcdtest.Start(t)
	root := "/" + t.Name()
	tg := target{impl: "etcd2", addr: addr, root: root}
	tg.ok(t, "put", "ks/Keyspace", "k")
	env := connEnv("etcd2", addr, root)

	for _, script := range []string{
		"echo $$ > PIDFILE; exec sleep 600",       // the command itself
		"sleep 600 & echo $! > PIDFILE; wait",     // a process it started
		"sh -c 'echo $$ > PIDFILE; sleep 600'; :", // a child that is not exec'd
	} {
		// The outputs are files, so that a command that outlived
		// topoctl holds no pipe that Wait would wait for.
		dir := t.TempDir()
		pidFile, outFile := filepath.Join(dir, "pid"), filepath.Join(dir, "out")
		out, err := os.Create(outFile)
		require.NoError(t, err)
		defer out.Close()
		cmd := exec.Command(os.Args[0], "lock", "--ttl", "3s", "ks", "--", "sh", "-c", strings.ReplaceAll(script, "PIDFILE", pidFile))
		cmd.Env = append(append(os.Environ(), runMainEnv+"=1"), env...)
		cmd.Stdout, cmd.Stderr = out, out
		require.NoError(t, cmd.Start())
		pid := readPid(t, pidFile)
		if pgid, err := syscall.Getpgid(pid); err == nil {
			// What a failing run leaves behind.
			t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
		}
		require.True(t, alive(pid))
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()

		// The second holder looks at the first one's process once it
		// holds the lock (the first lease lapses after its 3s).
		r := tg.run(t, "", "--timeout", "60s", "lock", "ks", "--", "sh", "-c",
			"cat /proc/"+strconv.Itoa(pid)+"/stat 2>/dev/null || echo gone")
		require.Equal(t, 0, r.code, r.stderr)
		state := "gone"
		if o := strings.TrimSpace(r.stdout); o != "gone" {
			f := strings.Fields(o[strings.LastIndexByte(o, ')')+1:])
			require.NotEmpty(t, f, o)
			state = f[0]
		}
		assert.Contains(t, []string{"gone", "Z", "X"}, state, "%s: the first holder's process still ran when the second holder got the lock", script)
	}
}

// lock --ttl says how long the lock really lasts where the backend does
// not honour the TTL as given (etcd: whole seconds; ZooKeeper: the
// session timeout; Consul: at least 10s, invalidated up to twice that
// late). Before, --ttl 5s lapsed after 29 s on ZooKeeper and 19 s on
// Consul without a word.
func TestLockTTLNote(t *testing.T) {
	t.Parallel()
	zk, etcd, consul := zktest.Start(t), etcdtest.Start(t), consultest.Start(t)
	for _, c := range []struct{ impl, addr, root, ttl, want string }{
		{"etcd2", etcd, "/" + t.Name(), "5s", ""},
		{"etcd2", etcd, "/" + t.Name(), "2500ms", "the lock lapses 3s after topoctl stops renewing it, not --ttl 2.5s"},
		{"zk2", zk, "/" + t.Name(), "5s", "ZooKeeper ties a lock to the client's session, not to --ttl 5s: the lock lapses one session timeout (30s asked"},
		{"consul", consul, t.Name(), "5s", "the lock lapses 10s to 20s after topoctl stops renewing it, not --ttl 5s"},
	} {
		tg := target{impl: c.impl, addr: c.addr, root: c.root}
		tg.ok(t, "put", "ks/Keyspace", "k")
		r := tg.run(t, "", "lock", "--ttl", c.ttl, "ks", "--", "echo", "held")
		require.Equal(t, 0, r.code, r.stderr)
		assert.Equal(t, "held\n", r.stdout)
		if c.want == "" {
			assert.NotContains(t, r.stderr, "note:", c.impl)
		} else {
			assert.Contains(t, r.stderr, "topoctl: note: ", c.impl)
			assert.Contains(t, r.stderr, c.want, c.impl)
		}
	}
}
