package topoctl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// waitStderr waits until the process's stderr contains want.
func (p *proc) waitStderr(t *testing.T, want string) {
	t.Helper()
	require.Eventually(t, func() bool { return strings.Contains(p.errb.String(), want) }, time.Minute, 5*time.Millisecond,
		"waiting for %q on stderr: %s", want, p.errb.String())
}

// wait waits for the process to end and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute):
		require.FailNow(t, "topoctl did not end", "stderr: %s", p.errb.String())
	}
	return p.cmd.ProcessState.ExitCode()
}

// manyFiles writes n small files into a new local directory.
func manyFiles(t testing.TB, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("ks%d", i%10), "shards", fmt.Sprint(i), "Shard")
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(fmt.Sprintf("shard %d", i)), 0o600))
	}
	return dir
}

// interruptMidWrite runs topoctl args (a tree write through proxy px) as
// a process and interrupts it at the worst moment: with writes in flight
// that the store has not answered yet (the proxy holds them), SIGINT
// arrives; the held writes then reach the store. It returns the exit code
// and stderr.
func interruptMidWrite(t *testing.T, px *faultproxy.Proxy, dst target, env []string, args ...string) (int, string) {
	t.Helper()
	// The cut comes once a write landed in dst (read directly, not
	// through the proxy), so that there is something to revert; the proxy
	// slows the writes (2 ms per chunk) so that 3,000 of them take
	// seconds, far longer than it takes to see the first one land.
	px.SetDelay(2 * time.Millisecond)
	p := startProcess(t, env, append([]string{"--log-level", "info"}, args...)...)
	p.waitStderr(t, "msg=writing")
	require.Eventually(t, func() bool {
		r := dst.run(t, "", "get", "-R", "--keys-only", "/")
		return r.code == 0 && strings.TrimSpace(r.stdout) != ""
	}, time.Minute, 10*time.Millisecond, "no write landed; stderr: %s", p.errb.String())
	px.Blackhole()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	p.waitStderr(t, "interrupted: no new writes start")
	px.SetDelay(0)
	px.Heal()
	return p.wait(t), p.errb.String()
}

func connEnv(impl, addr, root string) []string {
	return []string{envImplementation + "=" + impl, envServerAddress + "=" + addr, envRoot + "=" + root, envCell + "=", envTimeout + "=30s"}
}

// requireNoFiles checks that tg holds no file at all.
func requireNoFiles(t *testing.T, tg target) {
	t.Helper()
	r := tg.run(t, "", "export", filepath.Join(t.TempDir(), "x"))
	require.Equal(t, 1, r.code, "files are left: %s", r.stdout)
	assert.Contains(t, r.stderr, "empty or absent")
}

// An interrupted import or copy reverts everything it wrote, the writes
// that were in flight at the signal included, and exits 130.
func TestInterruptedWritesRevert(t *testing.T) {
	t.Parallel()
	in := manyFiles(t, 3000)
	check := func(t *testing.T, code int, stderr string, tg target) {
		t.Helper()
		assert.Equal(t, ExitInterrupted, code, stderr)
		assert.Contains(t, stderr, "interrupted after")
		assert.Contains(t, stderr, "everything this run wrote was reverted, nothing of it is left")
		requireNoFiles(t, tg)
	}
	zk := zktest.Start(t)
	etcd := etcdtest.Start(t)
	consul := consultest.Start(t)
	for _, c := range []struct{ impl, addr string }{{"zk2", zk}, {"etcd2", etcd}, {"consul", consul}} {
		t.Run("import-"+c.impl, func(t *testing.T) {
			t.Parallel()
			px, err := faultproxy.New(c.addr)
			require.NoError(t, err)
			t.Cleanup(func() { _ = px.Close() })
			root := "/" + t.Name()
			if c.impl == "consul" {
				root = t.Name() // without a leading "/", as Vitess's Consul backend needs
			}
			dst := target{impl: c.impl, addr: c.addr, root: root}
			code, stderr := interruptMidWrite(t, px, dst, connEnv(c.impl, px.Addr(), root), "import", "--parallel", "4", in)
			check(t, code, stderr, dst)
		})
	}
	// One request per file (--batch 1), as for files too large to batch.
	t.Run("import-etcd2-one-by-one", func(t *testing.T) {
		t.Parallel()
		px, err := faultproxy.New(etcd)
		require.NoError(t, err)
		t.Cleanup(func() { _ = px.Close() })
		dst := target{impl: "etcd2", addr: etcd, root: "/" + t.Name()}
		code, stderr := interruptMidWrite(t, px, dst, connEnv("etcd2", px.Addr(), dst.root), "import", "--parallel", "4", "--batch", "1", in)
		check(t, code, stderr, dst)
	})
	t.Run("copy-etcd-to-consul", func(t *testing.T) {
		t.Parallel()
		src := target{impl: "etcd2", addr: etcd, root: "/" + t.Name()}
		src.ok(t, "import", in)
		px, err := faultproxy.New(consul)
		require.NoError(t, err)
		t.Cleanup(func() { _ = px.Close() })
		dst := target{impl: "consul", addr: consul, root: t.Name()}
		code, stderr := interruptMidWrite(t, px, dst, connEnv("etcd2", etcd, src.root),
			"copy", "--parallel", "4", "--to", "consul:"+px.Addr()+":"+dst.root)
		check(t, code, stderr, dst)
	})
	t.Run("copy-etcd-to-zk", func(t *testing.T) {
		t.Parallel()
		src := target{impl: "etcd2", addr: etcd, root: "/" + t.Name()}
		src.ok(t, "import", in)
		px, err := faultproxy.New(zk)
		require.NoError(t, err)
		t.Cleanup(func() { _ = px.Close() })
		dst := target{impl: "zk2", addr: zk, root: "/" + t.Name()}
		code, stderr := interruptMidWrite(t, px, dst, connEnv("etcd2", etcd, src.root),
			"copy", "--parallel", "4", "--to", "zk2:"+px.Addr()+":"+dst.root)
		check(t, code, stderr, dst)
	})
}

// --progress draws the bar on stderr when stdout is not a terminal,
// redrawn at a bounded rate (not once per file: 3,000 files once made
// 514 KB of output).
func TestProgress(t *testing.T) {
	t.Parallel()
	in := manyFiles(t, 3000)
	tg := memoryTarget(t)
	r := tg.run(t, "", "import", "--progress", in)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "imported 3000 files")
	assert.Contains(t, r.stderr, "importing")
	assert.Less(t, len(r.stderr), 64*1024, "progress output: %d bytes", len(r.stderr))
	r = tg.run(t, "", "import", "--overwrite", in)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stderr, "no bar without --progress when stdout is not a terminal")
}
