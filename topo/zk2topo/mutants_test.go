package zk2topo

import (
	"testing"

	"github.com/topokit/topokit/topo/test/mutation"
)

// TestMutants runs the mutation kit's claims engine mutants on zk2topo:
// the suite must fail on a Conn whose engine has each defect (wiring puts
// mutation.EngineDefect into every Conn's engine) and pass on the
// baseline. Each mutant runs against the whole suite: on ZooKeeper a
// dropped connection also ends leadership (stepDown), so the subtest that
// catches engine-loss-keeps-claims first on the template
// (LeaderValues/ProclaimDeposed) does not here; Semaphore/SessionLoss
// does. The mutants of the Conn wrapper are the backends' common kit's
// (topo/test's TestSuiteCatchesMutants).
func TestMutants(t *testing.T) {
	var names []string
	for _, m := range mutation.EngineMutants() {
		names = append(names, m.Name)
	}
	newStore, opts := wiring()
	mutation.Run(t, newStore, opts, mutation.Config{Engine: true, Mutants: names, Parallel: 2})
}
