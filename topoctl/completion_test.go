package topoctl

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

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

	complete := func(args ...string) (paths []string, directive string) {
		t.Helper()
		out := tg.ok(t, append([]string{"__complete"}, args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[:len(lines)-1], lines[len(lines)-1]
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
}
