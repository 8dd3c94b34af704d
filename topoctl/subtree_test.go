package topoctl

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// -R means a directory's subtree in watch as in every command: a sibling
// that only shares the name's prefix is not watched; --prefix watches the
// plain string prefix.
func TestWatchRecursiveIsSubtree(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.ok(t, "put", "ks/a", "1")
	sub := tg.start(t, "watch", "-R", "ks")
	pre := tg.start(t, "watch", "--prefix", "ks")
	sub.waitOutput(t, "/ks/a ")
	pre.waitOutput(t, "/ks/a ")

	tg.ok(t, "put", "ksx", "sibling")
	tg.ok(t, "put", "ks/b", "2")
	sub.waitOutput(t, "/ks/b ")
	pre.waitOutput(t, "/ks/b ")
	assert.NotContains(t, sub.stdout.String(), "/ksx", "-R ks is the subtree ks/...")
	assert.True(t, strings.Contains(pre.stdout.String(), "/ksx "), "--prefix ks matches ksx: %s", pre.stdout.String())
	assert.Equal(t, 0, sub.stop(t))
	assert.Equal(t, 0, pre.stop(t))

	tg.fails(t, 2, []string{"give one"}, "watch", "-R", "--prefix", "ks")
}
