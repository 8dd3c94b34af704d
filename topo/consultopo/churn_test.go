//go:build churn

package consultopo

import (
	"testing"

	"github.com/topokit/topokit/topo/test"
)

// TestExclusionUnderChurn runs test.RequireExclusionUnderChurn (make
// test-churn) with the conformance suite's wiring: its Partition puts
// each contender behind a fault proxy of its own.
func TestExclusionUnderChurn(t *testing.T) {
	newStore, opts := conformanceWiring()
	test.RequireExclusionUnderChurn(t, newStore, opts)
}
