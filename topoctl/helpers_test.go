package topoctl

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for a writer and a concurrent reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// target names the store a test runs commands against.
type target struct {
	impl, addr, root string
	env              map[string]string
	// noFlags passes no connection flags: the environment and the
	// defaults decide.
	noFlags bool
}

// spec is the IMPL:ADDR:ROOT form of the target.
func (tg target) spec() string { return tg.impl + ":" + tg.addr + ":" + tg.root }

// withRoot returns the target with another root on the same server.
func (tg target) withRoot(root string) target {
	tg.root = root
	return tg
}

func (tg target) getenv(k string) string { return tg.env[k] }

func (tg target) argv(args []string) []string {
	if tg.noFlags {
		return args
	}
	out := []string{"--topo-implementation", tg.impl, "--topo-global-server-address", tg.addr, "--topo-global-root", tg.root}
	return append(out, args...)
}

// result is what one in-process topoctl run produced.
type result struct {
	code           int
	stdout, stderr string
}

// run runs topoctl in-process against tg with args and stdin, and returns
// its exit code and output.
func (tg target) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errb syncBuffer
	code := runMain(t.Context(), tg.argv(args), streams{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb, Getenv: tg.getenv})
	return result{code, out.String(), errb.String()}
}

// ok runs topoctl and requires exit code 0; it returns stdout.
func (tg target) ok(t *testing.T, args ...string) string {
	t.Helper()
	r := tg.run(t, "", args...)
	require.Equal(t, 0, r.code, "topoctl %v\nstdout: %s\nstderr: %s", args, r.stdout, r.stderr)
	return r.stdout
}

// clusterStatus runs "cluster status -o json" (after args, such as
// credentials) against tg and returns the status it printed. Without a
// quorum of answering voters with a leader the command prints the status
// all the same and exits 1: that is a status too (Quorum false), which a
// poll for a formed cluster waits past; it comes and goes while a cluster
// grows (a new voter's election) and under load (a member that does not
// answer its status request within a second counts as not answering).
// Under load the command can also time out before it has a status at
// all ("context deadline exceeded", "request timed out"): then it runs
// again, for up to a minute. Any other failure fails t.
func clusterStatus(t *testing.T, tg target, args ...string) clusterStatusJSON {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r := tg.run(t, "", append(append([]string{}, args...), "-o", "json", "cluster", "status")...)
		var st clusterStatusJSON
		if json.Unmarshal([]byte(r.stdout), &st) == nil {
			if r.code != 0 {
				require.Equal(t, 1, r.code, "topoctl cluster status\nstderr: %s", r.stderr)
				require.False(t, st.Quorum, "topoctl cluster status failed with a quorum\nstderr: %s", r.stderr)
				require.Contains(t, r.stderr, "no quorum", "topoctl cluster status")
				t.Logf("cluster status without a quorum: %s", strings.TrimSpace(r.stderr))
			}
			return st
		}
		timedOut := strings.Contains(r.stderr, "context deadline exceeded") || strings.Contains(r.stderr, "request timed out")
		require.True(t, timedOut && time.Now().Before(deadline), "topoctl cluster status: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		t.Logf("cluster status timed out; again: %s", strings.TrimSpace(r.stderr))
		time.Sleep(200 * time.Millisecond)
	}
}

// fails runs topoctl and requires exit code code and stderr containing
// every string in want; it returns the result.
func (tg target) fails(t *testing.T, code int, want []string, args ...string) result {
	t.Helper()
	r := tg.run(t, "", args...)
	require.Equal(t, code, r.code, "topoctl %v\nstdout: %s\nstderr: %s", args, r.stdout, r.stderr)
	for _, w := range want {
		require.Contains(t, r.stderr, w, "topoctl %v", args)
	}
	return r
}

// background is a topoctl run in a goroutine (watch, elect, lock, serve).
type background struct {
	stdout, stderr *syncBuffer
	cancel         context.CancelFunc
	done           chan int
}

// start runs topoctl in the background; stop (or the test's end) cancels
// its context as SIGINT would.
func (tg target) start(t *testing.T, args ...string) *background {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	bg := &background{stdout: &syncBuffer{}, stderr: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	argv := tg.argv(args)
	go func() {
		bg.done <- runMain(ctx, argv, streams{Stdin: strings.NewReader(""), Stdout: bg.stdout, Stderr: bg.stderr, Getenv: tg.getenv})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-bg.done:
		case <-time.After(time.Minute):
			t.Errorf("topoctl %v did not stop", args)
		}
	})
	return bg
}

// waitOutput waits until the background run's stdout contains want.
func (bg *background) waitOutput(t *testing.T, want string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(bg.stdout.String(), want) }, 30*time.Second, 10*time.Millisecond,
		"waiting for %q; stdout so far:\n%s\nstderr:\n%s", want, bg.stdout.String(), bg.stderr.String())
}

// stop interrupts the run and returns its exit code.
func (bg *background) stop(t *testing.T) int {
	t.Helper()
	bg.cancel()
	return bg.wait(t)
}

// wait waits for the run to end by itself and returns its exit code.
func (bg *background) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-bg.done:
		bg.done <- code
		return code
	case <-time.After(time.Minute):
		require.FailNow(t, "topoctl did not end", "stdout:\n%s\nstderr:\n%s", bg.stdout.String(), bg.stderr.String())
		return -1
	}
}
