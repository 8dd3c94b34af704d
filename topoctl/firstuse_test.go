package topoctl

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// quickstart returns docs/quickstart.md.
func quickstart(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "quickstart.md"))
	require.NoError(t, err)
	return string(b)
}

// quickstartRow returns the line of the quickstart's command table whose
// first cell starts with "| `cmd".
func quickstartRow(t *testing.T, cmd string) string {
	t.Helper()
	for _, l := range strings.Split(quickstart(t), "\n") {
		if strings.HasPrefix(l, "| `"+cmd) {
			return l
		}
	}
	require.FailNow(t, "no quickstart table row for "+cmd)
	return ""
}

// lock --help and the quickstart's lock row say that --named combines
// with neither --try nor --ttl, as lock refuses it (exit 2).
func TestLockHelpNamedCombinations(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.fails(t, 2, []string{"does not combine with --try or --ttl"}, "lock", "--named", "--try", "d")
	tg.fails(t, 2, []string{"does not combine with --try or --ttl"}, "lock", "--named", "--ttl", "5s", "d")
	help := target{noFlags: true}.ok(t, "lock", "--help")
	assert.Regexp(t, `--named\s+.*not with --try or --ttl`, help, "the flag's description")
	assert.Contains(t, strings.Join(strings.Fields(help), " "), "--named does not combine with --try or --ttl", "the long help")
	assert.Contains(t, quickstartRow(t, "lock"), "`--named` does not combine with `--try` or `--ttl`")
}

// quickstartOutput returns the line of the quickstart that follows the
// line "$ " + command (the output the quickstart shows for it), as a
// regular expression: HOST, PID and LEASE stand for any host name,
// process id and lease number, and the quoted holder's command for any.
func quickstartOutput(t *testing.T, command string) *regexp.Regexp {
	t.Helper()
	lines := strings.Split(quickstart(t), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "$ "+command) && i+1 < len(lines) {
			re := regexp.QuoteMeta(lines[i+1])
			re = strings.ReplaceAll(re, "HOST", `\S+`)
			re = strings.ReplaceAll(re, "PID", `\d+`)
			re = strings.ReplaceAll(re, "LEASE", `\d+`)
			re = regexp.MustCompile(`(pid \\d\+: )[^"]*"`).ReplaceAllString(re, `$1[^"]*"`)
			return regexp.MustCompile("^" + re + "\n$")
		}
	}
	require.FailNow(t, "the quickstart shows no command "+command)
	return nil
}

// The quickstart's "lock --try" failure is what topoctl prints on etcd
// (the default store), placeholders aside.
func TestQuickstartLockTryMessage(t *testing.T) {
	t.Parallel()
	tg := target{impl: "etcd2", addr: etcdtest.Start(t), root: "/vitess/global"}
	tg.ok(t, "put", "/keyspaces/commerce/Keyspace", "k")
	hold := tg.start(t, "lock", "/keyspaces/commerce", "--", "sh", "-c", "echo held; exec sleep 600")
	hold.waitOutput(t, "held")
	r := tg.fails(t, 1, nil, "lock", "--try", "/keyspaces/commerce", "--", "echo", "never")
	assert.Regexp(t, quickstartOutput(t, "topoctl lock --try /keyspaces/commerce"), r.stderr)
}

// The dry-run summary says what each number counts: every file of the
// plan, by what would happen to it, then the files and bytes it would
// write, as the summary of the real run counts them.
func TestDryRunSummaryCounts(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	in := writeFiles(t, map[string]string{"a": "1", "b": "2", "c": "12345678"})
	tg.ok(t, "put", "a", "1")
	tg.ok(t, "put", "b", "2")
	tg.ok(t, "put", "c", "old")
	to := tg.spec()
	out := tg.ok(t, "import", "--dry-run", "--overwrite", in)
	assert.Contains(t, out, "\ndry run: 3 files (0 new, 1 overwritten, 2 identical, 0 deleted) from "+in+" to "+to+"; would write 1 file (8 bytes); nothing written\n")
	assert.Equal(t, "imported 1 file (8 bytes) from "+in+" to "+to+", 2 files already identical\n", tg.ok(t, "import", "--overwrite", in))
}

// The refusal to overwrite agrees in number: "1 of the 3 files already
// exists", "2 of the 3 files already exist".
func TestAlreadyExistsGrammar(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	in := writeFiles(t, map[string]string{"a": "1", "b": "2", "c": "3"})
	tg.ok(t, "put", "a", "other")
	r := tg.fails(t, 1, []string{"NodeExists", ": 1 of the 3 files already exists in the destination with other contents; nothing was written (use --overwrite)\n"}, "import", in)
	assert.NotContains(t, r.stderr, "already exist in")
	tg.ok(t, "put", "b", "other")
	tg.fails(t, 1, []string{"NodeExists", ": 2 of the 3 files already exist in the destination with other contents; nothing was written (use --overwrite)\n"}, "import", in)
}

// A path without a leading "/" is the same path with it: the root help and
// the quickstart say so, and get hello reads /hello.
func TestRelativePathsSaid(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.ok(t, "put", "/hello", "world")
	assert.Equal(t, "world", tg.ok(t, "get", "hello"))
	const said = `A path without a leading "/" is taken from the root as if it had one: "hello" is "/hello".`
	help := strings.Join(strings.Fields(target{noFlags: true}.ok(t, "--help")), " ")
	assert.Contains(t, help, said)
	assert.Contains(t, strings.Join(strings.Fields(quickstart(t)), " "), "A path without a leading `/` is taken from the root as if it had one: `topoctl get hello` reads `/hello`.")
}

// version prints "topoctl VERSION" with one space (just "topoctl" when the
// build recorded no version), and the commit, its time and whether the
// tree was modified when the build recorded them (go build in a git
// checkout; the test binary records none, so a recorded one is made up).
func TestVersionBuildInfo(t *testing.T) {
	t.Parallel()
	out := target{noFlags: true}.ok(t, "version")
	first, _, _ := strings.Cut(out, "\n")
	assert.Regexp(t, `^topoctl( \S+)?$`, first)
	assert.NotContains(t, out, "topoctl  ")

	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/topokit/topokit", Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "38e58efaacd48e158ba5b27e06028e5ef77af4ce"},
			{Key: "vcs.time", Value: "2026-12-02T01:49:59Z"},
			{Key: "vcs.modified", Value: "true"},
		}}
	assert.Equal(t, "topoctl (devel)\n"+
		"commit      38e58efaacd48e158ba5b27e06028e5ef77af4ce (modified)\n"+
		"commit time 2026-12-02T01:49:59Z\n"+
		"backends    etcd2, memory\n"+
		"go          go1.26.8\n", buildVersionOf(bi).text([]string{"etcd2", "memory"}))
	bi.Settings[3].Value = "false"
	assert.Contains(t, buildVersionOf(bi).text(nil), "commit      38e58efaacd48e158ba5b27e06028e5ef77af4ce\n")
	bi.Main.Version, bi.Settings = "", nil
	assert.Equal(t, "topoctl\nbackends    etcd2\ngo          go1.26.8\n", buildVersionOf(bi).text([]string{"etcd2"}))
	assert.Equal(t, "(unknown)", buildVersionOf(nil).version)
}

// writeFiles writes files (name to contents) into a new temporary
// directory and returns the directory, an import source.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600))
	}
	return dir
}

// help of a command that does not exist is a usage error (exit 2), as
// the command itself is; help of one that exists prints it.
func TestHelpOfUnknownTopic(t *testing.T) {
	t.Parallel()
	tg := target{noFlags: true}
	r := tg.fails(t, 2, []string{`unknown help topic "bogus"`, "topoctl --help"}, "help", "bogus")
	assert.NotContains(t, r.stderr, "help --help")
	tg.fails(t, 2, []string{`unknown help topic "cell bogus"`}, "help", "cell", "bogus")
	assert.Contains(t, tg.ok(t, "help", "get"), "Print the value stored at FILE")
	assert.Contains(t, tg.ok(t, "help", "cell", "ls"), "Usage:")
	assert.Contains(t, tg.ok(t, "help"), "Available Commands:")
}
