package mutation

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRunPattern(t *testing.T) {
	require.Equal(t, "^TestX$", runPattern("TestX"))
	require.Equal(t, "^TestX$/^sub\\.1$", runPattern("TestX/sub.1", ""))
	require.Equal(t, "^TestX$/^(Fence|Txn)$/^(Tokens|Atomicity)$", runPattern("TestX", "Fence/Tokens", "Txn/Atomicity", "Fence/Tokens"))
}

func TestMutantsDocumented(t *testing.T) {
	seen := map[string]bool{Baseline: true}
	caught := regexp.MustCompile(`^[A-Z][A-Za-z]*/[A-Z][A-Za-z]*$`)
	for _, m := range Mutants() {
		require.Falsef(t, seen[m.Name], "mutant %q listed twice (or named like the baseline)", m.Name)
		seen[m.Name] = true
		require.NotEmpty(t, m.Defect, m.Name)
		require.Regexpf(t, caught, m.CaughtBy, "mutant %q: CaughtBy names a Group/Subtest", m.Name)
	}
}
