package topoctl

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// defaultedTarget is a flag-less target whose default etcd2 address is
// addr: it is recorded in the data directory as "topoctl serve" does.
func defaultedTarget(t *testing.T, addr, root string) target {
	t.Helper()
	dataDir := t.TempDir()
	require.NoError(t, os.WriteFile(endpointFile(dataDir), []byte(addr+"\n"), 0o600))
	return target{noFlags: true, env: map[string]string{envDataDir: dataDir, envRoot: root}}
}

// TestUnknownImplementationNoAddress: an unknown implementation is reported as NoImplementation (exit 1),
// naming the registered ones, before any demand for an address.
func TestUnknownImplementationNoAddress(t *testing.T) {
	t.Parallel()
	// Every registered one, sorted: the bundled ones and those of this
	// test binary (custom_test.go, example_test.go, reserved_test.go,
	// txn_test.go).
	want := "registered implementations: " + strings.Join(topo.Factories(), ", ")
	for _, name := range []string{"consul", "etcd2", "memory", "zk2", customBackend} {
		require.Contains(t, want, name)
	}
	noFlags := target{noFlags: true, env: map[string]string{envDataDir: t.TempDir()}}
	for _, args := range [][]string{
		{"-i", "nosuch", "ls"},
		{"--topo-implementation", "nosuch", "get", "/a"},
	} {
		r := noFlags.fails(t, 1, []string{want}, args...)
		assert.Regexp(t, `^topoctl: NoImplementation: [a-z ]+: nosuch: `, r.stderr)
		assert.NotContains(t, r.stderr, "is required")
		assert.NotContains(t, r.stderr, "Run 'topoctl --help'")
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	}
	byEnv := target{noFlags: true, env: map[string]string{envImplementation: "nosuch", envDataDir: t.TempDir()}}
	byEnv.fails(t, 1, []string{"NoImplementation", "nosuch", want}, "ls")
	// In a store spec with no address, too.
	noFlags.fails(t, 1, []string{"NoImplementation", "nosuch", want}, "copy", "--from", "memory:x:/", "--to", "nosuch::/r")
	// A known implementation with no address is still a usage error.
	noFlags.fails(t, 2, []string{"is required with --topo-implementation zk2"}, "-i", "zk2", "ls")
}

// With the address defaulted and nothing listening there, commands fail at
// once (not after --timeout, left at its 30s default here) and suggest
// "topoctl serve"; an address that was given gets no such hint.
func TestDefaultAddressNotListening(t *testing.T) {
	t.Parallel()
	closed := freeClosedAddr(t)
	tg := defaultedTarget(t, closed, defaultRoot)
	for _, args := range [][]string{
		{"ls", "/"},
		{"put", "/a", "v"},
		{"lock", "/a", "--", "true"},
		{"copy", "--from", "etcd2::/vitess", "--to", "memory:x:/"},
	} {
		r := tg.fails(t, 1, []string{serveHint, closed}, args...)
		assert.Regexp(t, `^topoctl: Unavailable: `, r.stderr, args)
		assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	}

	given := target{impl: "etcd2", addr: closed, root: defaultRoot}
	r := given.fails(t, 1, []string{"Unavailable", "connection refused", closed}, "ls", "/")
	assert.NotContains(t, r.stderr, "topoctl serve")
}

// The hint is only for the defaulted etcd2 store being unreachable: not for
// a lock wait that times out on it, nor for another store that is down.
func TestServeHintOnlyForDefaultStore(t *testing.T) {
	t.Parallel()
	tg := defaultedTarget(t, etcdtest.Start(t), "/"+t.Name())
	tg.ok(t, "put", "/ks/a", "v")

	holder := tg.start(t, "lock", "/ks", "--", "sh", "-c", "echo held; exec sleep 600")
	holder.waitOutput(t, "held")
	r := tg.fails(t, 1, []string{"Timeout"}, "--timeout", "300ms", "lock", "/ks", "--", "true")
	assert.NotContains(t, r.stderr, "topoctl serve")

	zk := "zk2:" + freeClosedAddr(t) + ":/r"
	r = tg.run(t, "", "--timeout", "300ms", "copy", "--to", zk)
	require.Equal(t, 1, r.code, r.stderr)
	assert.Regexp(t, `^topoctl: (Timeout|Unavailable): `, r.stderr)
	assert.NotContains(t, r.stderr, "topoctl serve")
}

// put reads standard input when it is not a terminal, or when told to with
// "-"; on a terminal with no value it is a usage error instead of a wait.
func TestPutStdin(t *testing.T) {
	t.Parallel()
	tg := target{impl: "memory", addr: t.Name(), root: "/"}
	run := func(terminal bool, stdin string, args ...string) result {
		var out, errb syncBuffer
		code := runMain(t.Context(), tg.argv(args), streams{
			Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb,
			StdinIsTerminal: func() bool { return terminal },
		})
		return result{code, out.String(), errb.String()}
	}
	// memory stores live in one process: read back within the same run
	// through a file export.
	check := func(args []string, terminal bool, stdin, want string) {
		t.Helper()
		r := run(terminal, stdin, args...)
		require.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
		dir := t.TempDir()
		r = run(false, "", "export", dir)
		require.Equal(t, 0, r.code, r.stderr)
		b, err := os.ReadFile(filepath.Join(dir, "a"))
		require.NoError(t, err)
		assert.Equal(t, want, string(b), args)
	}
	check([]string{"put", "a"}, false, "from a pipe", "from a pipe")
	check([]string{"put", "a", "-"}, true, "typed", "typed")
	check([]string{"put", "a", "--file", "-"}, true, "typed again", "typed again")
	check([]string{"put", "a", "value"}, true, "ignored", "value")

	r := run(true, "never read", "put", "a")
	assert.Equal(t, ExitUsage, r.code)
	assert.Contains(t, r.stderr, "no value given")
	assert.Contains(t, r.stderr, "put a -")
}

// A directory as standard input is a usage error (exit 2) for put and
// txn, as a directory given to --file is; nothing is written.
func TestStdinDirectoryIsUsageError(t *testing.T) {
	t.Parallel()
	tg := target{impl: "memory", addr: t.Name(), root: "/"}
	for _, args := range [][]string{{"put", "a"}, {"put", "a", "-"}, {"txn"}, {"txn", "-"}} {
		dir, err := os.Open(t.TempDir())
		require.NoError(t, err)
		var out, errb syncBuffer
		code := runMain(t.Context(), tg.argv(args), streams{Stdin: dir, Stdout: &out, Stderr: &errb})
		require.NoError(t, dir.Close())
		assert.Equal(t, ExitUsage, code, "%v: %s", args, errb.String())
		assert.Contains(t, errb.String(), "is a directory", args)
	}
	r := tg.run(t, "", "ls", "/")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Empty(t, r.stdout)
}

// put --file and txn FILE read no more of a file than they can take, so an
// endless one (/dev/zero) fails at once: put with InvalidArgument, txn
// with a usage error. Both used to read it until memory ran out.
func TestEndlessFileRefused(t *testing.T) {
	t.Parallel()
	tg := target{impl: "memory", addr: t.Name(), root: "/"}
	tg.fails(t, 1, []string{"InvalidArgument", "/a: /dev/zero holds more than the 524288 bytes (512 KiB) a file may hold; nothing was written"}, "put", "a", "--file", "/dev/zero")
	tg.fails(t, ExitUsage, []string{"the transaction is larger than"}, "txn", "/dev/zero")
}

// rm -R of an empty DIR (an unset shell variable: rm -R --force "$DIR")
// is a usage error that deletes nothing; it used to delete every file
// under the root. "/" still means the root.
func TestRmTreeEmptyDirRefused(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.ok(t, "put", "keep/a", "1")
	tg.fails(t, ExitUsage, []string{"empty DIR", "rm -R --force /"}, "rm", "-R", "--force", "")
	assert.Equal(t, "1", tg.ok(t, "get", "keep/a"), "a refused rm -R deleted the file")
	tg.ok(t, "rm", "-R", "--force", "/")
	tg.fails(t, 1, []string{"NoNode"}, "get", "keep/a")
}

// --decode json of a file of no known type says that Vitess's records are
// built in and --protoset adds types.
func TestDecodeJSONNeedsProtoset(t *testing.T) {
	t.Parallel()
	tg := target{impl: "memory", addr: t.Name(), root: "/"}
	r := tg.fails(t, 2, []string{"no message type is known for /hello", "Vitess's layout is built in", "--protoset FILE"}, "get", "--decode", "json", "/hello")
	assert.NotContains(t, r.stderr, "no message named")
}

func TestPlural(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "0 files", plural(0, "file"))
	assert.Equal(t, "1 file", plural(1, "file"))
	assert.Equal(t, "2 files", plural(2, "file"))
}

// On a terminal, get shows a value that is not text (a protobuf record,
// control bytes) quoted with escapes, its first 200 bytes only, saying how
// to see it all; text is printed as it is; --full, --hex and a pipe print
// the bytes.
func TestGetOnTerminal(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	run := func(terminal bool, args ...string) result {
		t.Helper()
		var out, errb syncBuffer
		code := runMain(t.Context(), tg.argv(args), streams{
			Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
			StdoutIsTerminal: func() bool { return terminal },
		})
		require.Equal(t, 0, code, "%v: %s", args, errb.String())
		return result{code, out.String(), errb.String()}
	}
	bin := "\x12\x02\x08\x01\x1b[2J"
	long := strings.Repeat("\x00\x01", 150)
	text := "line one\n\tline two\n"
	tg.ok(t, "put", "bin", bin)
	tg.ok(t, "put", "long", long)
	tg.ok(t, "put", "text", text)

	r := run(true, "get", "bin")
	assert.Equal(t, strconv.Quote(bin)+"\n", r.stdout)
	assert.NotContains(t, r.stdout, "\x1b")
	assert.Contains(t, r.stderr, "not text")
	assert.Contains(t, r.stderr, "--full")
	r = run(true, "get", "long")
	assert.Equal(t, strconv.Quote(long[:200])+" ... (300 bytes)\n", r.stdout)
	assert.Equal(t, text, run(true, "get", "text").stdout)
	assert.Empty(t, run(true, "get", "text").stderr)

	assert.Equal(t, bin, run(true, "get", "--full", "bin").stdout)
	assert.Equal(t, long, run(false, "get", "long").stdout)
	assert.Equal(t, "120208011b5b324a\n", run(true, "get", "--hex", "bin").stdout)

	// get -R (here --prefix) quotes such values already; on a terminal it also cuts long
	// ones, unless --full.
	r = run(true, "get", "--prefix", "lo")
	assert.Equal(t, "/long\n"+strconv.Quote(long[:200])+" ... (300 bytes)\n", r.stdout)
	assert.Equal(t, "/long\n"+strconv.Quote(long)+"\n", run(true, "get", "--prefix", "--full", "lo").stdout)
	assert.Equal(t, "/long\n"+strconv.Quote(long)+"\n", run(false, "get", "--prefix", "lo").stdout)
}
