package topoctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
