package consultopo

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/claims"
	"github.com/topokit/topokit/topo/test/mutation"
)

// TestMutants runs the claims engine's mutants of the mutation kit that
// the shared suite can see on this backend (testOptions puts
// mutation.EngineDefect into every Conn's engine): the whole suite must
// fail on each, on the real agent, and pass on the baseline. The kit's
// Conn-wrapping mutants do not depend on the backend and are shown on
// memorytopo and the template. The engine's two order mutants are
// TestOrderMutants'.
func TestMutants(t *testing.T) {
	newStore, opts := conformanceWiring()
	mutation.Run(t, newStore, opts, mutation.Config{Engine: true, Parallel: 3,
		Mutants: []string{string(claims.DefectLossKeepsClaims), string(claims.DefectTokenIsPosition)}})
}

// TestOrderMutants: on Consul the store key, which every holder acquires
// (Acquirer), excludes; the engine's queue only orders the acquires. So an
// engine that grants the second entry too, or every entry at once, gives
// no two holders, and the shared suite passes on it (TestMutants does not
// run them); what they break is the order, which the package's fairness
// tests check: each must fail on them (run in a child process with the
// defect in every engine).
func TestOrderMutants(t *testing.T) {
	if os.Getenv(mutation.EnvMutant) != "" {
		return // a child of another mutation run
	}
	for _, d := range []claims.Defect{claims.DefectGrantSecond, claims.DefectSkipWait} {
		t.Run(string(d), func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run", "^(TestFairLockOrder|TestFairElection)$", "-test.count=1")
			cmd.Env = append(os.Environ(), mutation.EnvMutant+"="+string(d))
			out, err := cmd.CombinedOutput()
			require.Error(t, err, "mutant %q SURVIVED the fairness tests:\n%s", d, out)
			require.Contains(t, string(out), "--- FAIL: TestFair", "mutant %q: the child failed without a failing fairness test:\n%s", d, out)
		})
	}
}
