package templatetopo_test

import (
	"testing"

	"github.com/topokit/topokit/topo/test/mutation"
)

// TestMutants runs the mutation kit on the template: the suite must fail
// on each mutant of the template (and pass on the unmutated baseline),
// the claims engine's mutants included (Engine: the wiring puts
// mutation.EngineDefect into the engines). It
// runs the whole suite per mutant (Targeted mode lets cas-returns-other
// survive now and then on this in-process store: its race window rarely
// opens), sixteen children at a time; the children mostly wait on the
// partition subtests' SessionTimeout.
func TestMutants(t *testing.T) {
	newStore, opts := wiring()
	mutation.Run(t, newStore, opts, mutation.Config{Parallel: 16, Engine: true})
}
