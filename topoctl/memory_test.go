package topoctl

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

func slicesSort(s []string) { slices.Sort(s) }

// memoryTarget is a fresh in-process memory store per test (the "memory"
// factory keeps one store per server address).
func memoryTarget(t *testing.T) target {
	return target{impl: "memory", addr: t.Name(), root: "/topo"}
}

func TestMemory(t *testing.T) {
	t.Parallel()
	runSuite(t, memoryTarget, capabilities{history: true})
}

func TestUnknownImplementation(t *testing.T) {
	t.Parallel()
	tg := target{impl: "nosuch", addr: "x", root: "/"}
	r := tg.fails(t, 1, []string{"NoImplementation", "nosuch", "registered implementations", "memory"}, "ls")
	assert.Empty(t, r.stdout)
	tg.fails(t, 1, []string{"NoImplementation", "nosuch"}, "copy", "--from", "memory:x:/", "--to", "nosuch:x:/")

	// Only the embedded etcd has a default address.
	zk := target{impl: "zk2", root: "/"}
	zk.fails(t, 2, []string{"--topo-global-server-address", "required"}, "ls")
	target{impl: "memory", addr: "x", root: "/"}.fails(t, 2, []string{"empty server address"}, "copy", "--to", "consul::/r")
}

func TestEnvironment(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.ok(t, "put", "f", "v")

	// Every connection setting from the environment alone.
	var out, errb syncBuffer
	env := map[string]string{envImplementation: "memory", envServerAddress: tg.addr, envRoot: tg.root, envTimeout: "5s"}
	code := runMain(t.Context(), []string{"get", "f"}, streams{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
	require.Equal(t, 0, code, errb.String())
	assert.Equal(t, "v", out.String())

	// A flag wins over its variable.
	env[envRoot] = "/elsewhere"
	out = syncBuffer{}
	code = runMain(t.Context(), []string{"get", "--topo-global-root", tg.root, "f"}, streams{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
	require.Equal(t, 0, code, errb.String())
	assert.Equal(t, "v", out.String())

	env[envTimeout] = "soon"
	errb = syncBuffer{}
	code = runMain(t.Context(), []string{"get", "f"}, streams{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errb.String(), envTimeout)
}

// A copy that fails part-way reports how far it got and reverts what it
// wrote, so that nothing is left partially written: one request per file
// (--batch 1), and in batches (one Txn) whose answer is lost.
func TestCopyFailureReverts(t *testing.T) {
	t.Parallel()
	f, err := topo.GetFactory("memory")
	require.NoError(t, err)
	mf := f.(*memorytopo.Factory)

	for _, c := range []struct {
		name    string
		batch   string
		fault   memorytopo.Fault
		stopped string
	}{
		{"one-by-one", "1", memorytopo.Fault{Op: memorytopo.OpCreate, Path: "copyfailure-one-by-one/c", Err: topo.Unavailable}, "stopped at /copyfailure-one-by-one/c (2 of 4 writes made)"},
		{"batched", "32", memorytopo.Fault{Op: memorytopo.OpTxn, Path: "copyfailure-batched/c", Err: topo.Unavailable}, "stopped at /a (0 of 4 writes made)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := memoryTarget(t)
			dst := src.withRoot("/dst")
			for _, p := range []string{"a", "b", "copyfailure-" + c.name + "/c", "d"} {
				src.ok(t, "put", p, "v-"+p)
			}
			dst.ok(t, "put", "d", "old-d")
			remove := mf.AddFault(c.fault)
			defer remove()

			r := src.run(t, "", "copy", "--parallel", "1", "--batch", c.batch, "--overwrite", "--to", dst.spec())
			require.Equal(t, 1, r.code, r.stderr)
			assert.Contains(t, r.stderr, c.stopped)
			assert.Contains(t, r.stderr, "everything this run wrote was reverted")
			assert.Contains(t, r.stderr, "Unavailable")
			assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one error line: %q", r.stderr)
			// Only the file that was there before remains, with its old value.
			assert.Equal(t, "/d\n", dst.ok(t, "ls", "-R"))
			assert.Equal(t, "old-d", dst.ok(t, "get", "d"))
		})
	}
}

// A batch the store refuses (here every Txn, as a backend without
// transactions would) is written one file at a time instead.
func TestCopyBatchRefused(t *testing.T) {
	t.Parallel()
	f, err := topo.GetFactory("memory")
	require.NoError(t, err)
	mf := f.(*memorytopo.Factory)
	src := memoryTarget(t)
	dst := src.withRoot("/dst")
	for _, p := range []string{"batchrefused/a", "batchrefused/b", "batchrefused/c"} {
		src.ok(t, "put", p, "v-"+p)
	}
	remove := mf.AddFault(memorytopo.Fault{Op: memorytopo.OpTxn, Prefix: "batchrefused/", Err: topo.NoImplementation})
	defer remove()
	assert.Contains(t, src.ok(t, "copy", "--to", dst.spec()), "copied 3 files")
	src.ok(t, "diff", "--to", dst.spec())

	// rm -R too.
	r := dst.run(t, "", "rm", "-R", "--force", "batchrefused")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "deleted 3 files under /batchrefused")
	assert.Empty(t, dst.ok(t, "ls", "/"))
}

// rm -R deletes in batches (one Txn each); a batch whose answer is lost
// fails the command, naming it, and no new batch starts.
func TestRmTreeBatchLost(t *testing.T) {
	t.Parallel()
	f, err := topo.GetFactory("memory")
	require.NoError(t, err)
	mf := f.(*memorytopo.Factory)
	tg := memoryTarget(t)
	for _, p := range []string{"rmbatchlost/a", "rmbatchlost/b"} {
		tg.ok(t, "put", p, "v")
	}
	remove := mf.AddFault(memorytopo.Fault{Op: memorytopo.OpTxn, Prefix: "rmbatchlost/", Err: topo.Unavailable})
	r := tg.run(t, "", "rm", "-R", "--force", "rmbatchlost")
	remove()
	require.Equal(t, 1, r.code, r.stderr)
	assert.Contains(t, r.stderr, "deleted 0 of 2 files under /rmbatchlost")
	assert.Contains(t, r.stderr, "topoctl: Unavailable: ")
	assert.Contains(t, r.stderr, "batch of 2 deletes starting at /rmbatchlost/a (its answer was lost")
	r = tg.run(t, "", "rm", "-R", "--force", "--batch", "1", "rmbatchlost")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "deleted 2 files under /rmbatchlost")
}

// TestMemoryStoreIsPerProcess: a memory store lives in its topoctl
// process only. Written by one topoctl command and read by the next, it
// is empty; ls, stat and export say why, not only "check the root and
// the address", which sent a user who had imported into it looking for
// a wrong root.
func TestMemoryStoreIsPerProcess(t *testing.T) {
	t.Parallel()
	env := []string{envImplementation + "=memory", envServerAddress + "=", envRoot + "=", envCell + "=", envTimeout + "="}
	run := func(args ...string) (int, string) {
		p := startProcess(t, env, args...)
		<-p.done
		return p.cmd.ProcessState.ExitCode(), p.errb.String()
	}
	code, stderr := run("put", "/hello", "world")
	require.Equal(t, 0, code, stderr)
	const why = "a memory store lives only as long as its topoctl process: each command starts with an empty one"
	code, stderr = run("ls", "/")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "note: the root is empty or absent")
	assert.Contains(t, stderr, why)
	code, stderr = run("stat", "/")
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, why)
	code, stderr = run("export", t.TempDir())
	assert.Equal(t, 1, code, stderr)
	assert.Contains(t, stderr, why)

	// Other stores' notes do not mention it.
	assert.Empty(t, memoryHint("etcd2:127.0.0.1:2379:/vitess/global"))
}

// A --parallel or --batch below 1 and a negative lock --grace are usage
// errors that read and write nothing: they used to be taken as 1 and as
// "kill at once" without a word.
func TestBadCountsRefused(t *testing.T) {
	t.Parallel()
	src := memoryTarget(t)
	dst := src.withRoot("/dst")
	src.ok(t, "put", "ks/a", "v")
	tmp := t.TempDir()
	for _, c := range [][]string{
		{"--parallel 0", "copy", "--parallel", "0", "--to", dst.spec()},
		{"--batch -1", "copy", "--batch", "-1", "--to", dst.spec()},
		{"--batch 0", "rm", "-R", "--force", "--batch", "0", "/ks"},
		{"--parallel -2", "rm", "-R", "--force", "--parallel", "-2", "/ks"},
		{"--parallel 0", "export", "--parallel", "0", "/", tmp + "/out"},
		{"--grace -1s", "lock", "--grace", "-1s", "/ks", "--", "touch", tmp + "/ran"},
	} {
		src.fails(t, 2, []string{c[0] + ": want"}, c[1:]...)
	}
	assert.Equal(t, "v", src.ok(t, "get", "ks/a"), "a refused rm removed the file")
	dst.fails(t, 1, []string{"NoNode"}, "get", "ks/a")
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, entries, "a refused export or lock wrote or ran something")
}

// copy and export of a PATH with no files under it name that PATH as what
// is empty or absent, not the root, which holds files.
func TestEmptyPathNamed(t *testing.T) {
	t.Parallel()
	src := memoryTarget(t)
	src.ok(t, "put", "ks/a", "v")
	for _, args := range [][]string{
		{"copy", "--to", src.withRoot("/dst").spec(), "/nosuch"},
		{"export", t.TempDir() + "/out", "/nosuch"},
		{"diff", "--to", src.withRoot("/dst").spec(), "/nosuch"},
	} {
		r := src.fails(t, 1, []string{"NoNode", "/nosuch is empty or absent"}, args...)
		assert.NotContains(t, r.stderr, "the root is empty", "%v", args)
	}
}

// get -R quotes a value line exactly when it starts with a double quote:
// a value that itself starts with one is quoted too, so that it cannot
// read as the quoted form of another value (here: `"a\nb"`, six bytes,
// against a, newline, b).
func TestGetRecursiveQuotesLeadingQuote(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.ok(t, "put", "/n", "a\nb")
	tg.ok(t, "put", "/q", `"a\nb"`)
	tg.ok(t, "put", "/p", `a"b`)
	assert.Equal(t, "/n\n\"a\\nb\"\n/p\na\"b\n/q\n\"\\\"a\\\\nb\\\"\"\n", tg.ok(t, "get", "-R", "/"))
}
