package topoctl

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// completions runs topoctl's completion of args against tg: the
// candidates, and the last line (the directive, ":N").
func completions(t *testing.T, tg target, args ...string) (candidates []string, directive string) {
	t.Helper()
	out := tg.ok(t, append([]string{"__complete"}, args...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

// Paths complete from the store, one directory level per Tab, as typed
// (with or without the leading "/"); directories end with "/" and get no
// space after them; reserved entries (lock and election entries) are not
// offered.
func TestCompletePaths(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.ok(t, "put", "keyspaces/commerce/Keyspace", "k")
	tg.ok(t, "put", "keyspaces/customer/Keyspace", "k")
	tg.ok(t, "put", "RoutingRules", "r")
	holder := tg.start(t, "lock", "keyspaces/commerce")
	holder.waitOutput(t, "holding the lock")

	complete := func(args ...string) ([]string, string) {
		t.Helper()
		return completions(t, tg, args...)
	}
	paths, directive := complete("ls", "/")
	assert.Equal(t, []string{"/RoutingRules", "/keyspaces/"}, paths)
	assert.Equal(t, ":6", directive, "no file names, no space after a directory")
	paths, _ = complete("get", "/keyspaces/c")
	assert.Equal(t, []string{"/keyspaces/commerce/", "/keyspaces/customer/"}, paths)
	paths, _ = complete("get", "keyspaces/com")
	assert.Equal(t, []string{"keyspaces/commerce/"}, paths)
	paths, _ = complete("stat", "keyspaces/commerce/")
	assert.Equal(t, []string{"keyspaces/commerce/Keyspace"}, paths, "the lock's entry is not offered")
	paths, _ = complete("rm", "/nothing/")
	assert.Empty(t, paths)
	paths, _ = complete("get", "/keyspaces/", "")
	assert.Empty(t, paths, "only the first argument is a path")
	paths, _ = complete("watch", "/RoutingRules", "/keyspaces/c")
	assert.Equal(t, []string{"/keyspaces/commerce/", "/keyspaces/customer/"}, paths, "watch takes several FILEs")
}

// A directory argument offers directories only (lock, copy, diff, import
// and export PATH), copy's and diff's PATH from the --from store when it
// is given, import's and export's local DIR as the shell's directories;
// cell get, set and rm and --cell complete cell names.
func TestCompleteCellsAndDirectories(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.ok(t, "put", "keyspaces/commerce/Keyspace", "k")
	tg.ok(t, "put", "RoutingRules", "r")
	putCellInfo(t, tg, "zone1", "/vitess/zone1")
	putCellInfo(t, tg, "zone2", "/vitess/zone2")
	other := "memory:" + t.Name() + "-other:/r"
	tg.ok(t, "copy", "--to", other)
	tg.ok(t, "--topo-global-server-address", t.Name()+"-other", "--topo-global-root", "/r", "put", "only/there", "x")

	complete := func(args ...string) ([]string, string) {
		t.Helper()
		return completions(t, tg, args...)
	}
	paths, _ := complete("lock", "/keyspaces/commerce/")
	assert.Empty(t, paths, "lock takes a directory: no file is offered")
	paths, _ = complete("lock", "/")
	assert.Equal(t, []string{"/cells/", "/keyspaces/"}, paths)
	for _, verb := range []string{"copy", "diff"} {
		paths, _ = complete(verb, "--to", "memory:x:/", "/")
		assert.Equal(t, []string{"/cells/", "/keyspaces/"}, paths, verb)
		paths, _ = complete(verb, "--from", other, "--to", "memory:x:/", "/")
		assert.Equal(t, []string{"/cells/", "/keyspaces/", "/only/"}, paths, "%s: the --from store's", verb)
	}
	for _, verb := range []string{"import", "export"} {
		paths, directive := complete(verb, "")
		assert.Empty(t, paths, verb)
		assert.Equal(t, ":16", directive, "%s DIR: the shell's directories", verb)
		paths, _ = complete(verb, t.TempDir(), "/k")
		assert.Equal(t, []string{"/keyspaces/"}, paths, "%s PATH: the store's", verb)
	}
	for _, verb := range []string{"get", "set", "rm"} {
		paths, directive := complete("cell", verb, "z")
		assert.Equal(t, []string{"zone1", "zone2"}, paths, "cell %s", verb)
		assert.Equal(t, ":4", directive)
	}
	paths, _ = complete("ls", "--cell", "zone")
	assert.Equal(t, []string{"zone1", "zone2"}, paths, "--cell")
	paths, _ = complete("cell", "get", "zone1", "")
	assert.Empty(t, paths)
}

// Cells aliases complete for cell alias get, update and delete, and
// elections' names for elect and leader, from the store.
func TestCompleteAliasesAndElections(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.ok(t, "cell", "alias", "create", "region1", "--cells", "zone1")
	tg.ok(t, "cell", "alias", "create", "region2", "--cells", "zone2")
	tg.ok(t, "cell", "alias", "create", "other", "--cells", "zone3")
	el := tg.start(t, "elect", "--id", "p1", "vtctld")
	el.waitOutput(t, "elected p1")
	defer func() { assert.Equal(t, 0, el.stop(t)) }()

	for _, verb := range []string{"get", "update", "delete"} {
		names, directive := completions(t, tg, "cell", "alias", verb, "reg")
		assert.Equal(t, []string{"region1", "region2"}, names, "cell alias %s", verb)
		assert.Equal(t, ":4", directive)
	}
	for _, verb := range []string{"elect", "leader"} {
		names, _ := completions(t, tg, verb, "vt")
		assert.Equal(t, []string{"vtctld"}, names, verb)
	}
}
