package consultopo

import (
	"testing"

	"github.com/topokit/topokit/topo/claims"
	"github.com/topokit/topokit/topo/test/mutation"
)

// TestMutants runs the claims engine's mutants of the mutation kit on this
// backend (Engine: shortTTLOptions puts mutation.EngineDefect into every
// Conn's engine): the whole shared suite must fail on each, on the real
// agent, and pass on the baseline. The Conn-wrapping mutants of the kit do
// not depend on the backend and are shown on memorytopo and the template;
// running them all here against a real agent would take hours on the test
// machines.
func TestMutants(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole suite once per engine mutant")
	}
	var names []string
	for _, d := range claims.Defects() {
		names = append(names, string(d.Defect))
	}
	newStore, opts := conformanceWiring()
	mutation.Run(t, newStore, opts, mutation.Config{Engine: true, Mutants: names, Parallel: 2})
}
