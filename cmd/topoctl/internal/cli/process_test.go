package cli

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/etcdembed"
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
// watch ends with status 0 on SIGINT, and lock passes SIGTERM on to its
// command, releases the lock and exits with the command's status.
func TestProcessSignals(t *testing.T) {
	t.Parallel()
	addrs, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	env := []string{EnvDataDir + "=" + t.TempDir(), EnvImplementation + "=", EnvServerAddress + "=", EnvRoot + "=", EnvCell + "="}
	serveArgs := []string{"serve", "--listen-client-address", addrs[0], "--listen-peer-address", addrs[1]}

	srv := startProcess(t, env, serveArgs...)
	srv.waitLine(t, "Stop it with Ctrl-C")
	tg := target{impl: "etcd2", addr: addrs[0], root: DefaultRoot}
	tg.ok(t, "put", "ks/Keyspace", "k")

	w := startProcess(t, env, "watch", "ks/Keyspace")
	w.waitLine(t, `/ks/Keyspace`)
	assert.Equal(t, 0, w.signalAndWait(t, syscall.SIGINT), w.errb.String())

	l := startProcess(t, env, "lock", "ks", "--", "sh", "-c", "echo held; exec sleep 600")
	l.waitLine(t, "held")
	tg.fails(t, 1, []string{"NodeExists"}, "lock", "--try", "ks", "--", "true")
	assert.Equal(t, 143, l.signalAndWait(t, syscall.SIGTERM), l.errb.String())
	assert.Equal(t, "free\n", tg.ok(t, "lock", "--try", "ks", "--", "echo", "free"))

	assert.Equal(t, 0, srv.signalAndWait(t, syscall.SIGTERM), srv.errb.String())
	srv.waitLine(t, "embedded etcd stopped")

	// Restarted and stopped with SIGINT; the data survived.
	srv = startProcess(t, env, serveArgs...)
	srv.waitLine(t, "Stop it with Ctrl-C")
	assert.Equal(t, "k", tg.ok(t, "get", "ks/Keyspace"))
	assert.Equal(t, 0, srv.signalAndWait(t, syscall.SIGINT), srv.errb.String())
}
