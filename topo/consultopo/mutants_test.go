package consultopo

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/claims"
	"github.com/topokit/topokit/topo/test/mutation"
)

// TestMutants runs the claims engine's token mutant of the mutation kit
// (testOptions puts mutation.EngineDefect into every Conn's engine): it
// must fail the subtest that catches it, on the real agent, and the
// baseline must pass that subtest (Targeted: an engine defect wraps
// nothing, so the whole suite on the baseline would only repeat
// TestConformance). The kit's Conn-wrapping mutants do not depend on the
// backend and are shown on memorytopo and the template. The engine's
// other mutants are TestOrderMutants' and TestLossMutant's.
func TestMutants(t *testing.T) {
	newStore, opts := conformanceWiring()
	mutation.Run(t, newStore, opts, mutation.Config{Engine: true, Targeted: true, Parallel: 2,
		Mutants: []string{string(claims.DefectTokenIsPosition)}})
}

// TestOrderMutants: on Consul the store key, which every holder acquires
// (Acquirer), excludes; the engine's queue only orders the acquires. So an
// engine that grants the second entry too, or every entry at once, gives
// no two holders, and the shared suite passes on it (TestMutants does not
// run them); what they break is the order, which the package's fairness
// tests check: each must fail on them.
func TestOrderMutants(t *testing.T) {
	for _, d := range []claims.Defect{claims.DefectGrantSecond, claims.DefectSkipWait} {
		t.Run(string(d), func(t *testing.T) {
			requireCaught(t, d, "^(TestFairLockOrder|TestFairElection)$", "--- FAIL: TestFair")
		})
	}
}

// TestLossMutant: an engine that ends no claim when a session is declared
// lost. The kit's target for it (LeaderValues/ProclaimDeposed) misses it
// on Consul, where the Monitor of the held key ends the term anyway when
// the key goes with its session; a Conn's Close, which declares its
// sessions lost before destroying them, shows it: the lock's Done and the
// leader's context must end at once.
func TestLossMutant(t *testing.T) {
	requireCaught(t, claims.DefectLossKeepsClaims, "^TestConformance$/^Close$/^ReleasesLocksAndLeadership$", "--- FAIL: TestConformance/Close")
}

// requireCaught runs the tests that run matches in a child process with
// the engine defect d in every engine, and requires a test to fail there
// whose failure line starts with want.
func requireCaught(t *testing.T, d claims.Defect, run, want string) {
	t.Helper()
	if os.Getenv(mutation.EnvMutant) != "" {
		return // a child of another mutation run
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run", run, "-test.count=1")
	cmd.Env = append(os.Environ(), mutation.EnvMutant+"="+string(d))
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "mutant %q SURVIVED %s:\n%s", d, run, out)
	require.Contains(t, string(out), want, "mutant %q: the child failed without the expected failing test:\n%s", d, out)
}
