package zk2topo

import (
	"testing"

	"github.com/topokit/topokit/topo/claims"
	"github.com/topokit/topokit/topo/test/mutation"
)

// TestMutants runs the mutation kit's claims engine mutants on zk2topo:
// the suite must fail on a Conn whose engine has each defect (wiring puts
// mutation.EngineDefect into every Conn's engine) and pass on the
// baseline. Targeted: each mutant against the subtest that catches it on
// ZooKeeper (an engine defect wraps nothing, so the whole suite on the
// baseline would only repeat TestConformance). Two are not the kit's
// targets: on ZooKeeper a dropped connection also ends leadership
// (stepDown), so LeaderValues/ProclaimDeposed misses
// engine-loss-keeps-claims and Semaphore/SessionLoss catches it; and
// LeaderValues/Campaign, not LeaderValues/Proclaim, catches
// engine-token-is-position (the only subtests that failed when each
// mutant ran against the whole suite). The mutants of the Conn wrapper
// are the backends' common kit's (topo/test's TestSuiteCatchesMutants).
func TestMutants(t *testing.T) {
	var names []string
	for _, m := range mutation.EngineMutants() {
		names = append(names, m.Name)
	}
	newStore, opts := wiring()
	mutation.Run(t, newStore, opts, mutation.Config{Engine: true, Mutants: names, Targeted: true, Parallel: 2,
		CaughtBy: map[string]string{
			string(claims.DefectLossKeepsClaims): "Semaphore/SessionLoss",
			string(claims.DefectTokenIsPosition): "LeaderValues/Campaign",
		}})
}
