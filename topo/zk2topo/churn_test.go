//go:build churn

package zk2topo

import (
	"testing"

	"github.com/topokit/topokit/topo/test"
)

// TestExclusionUnderChurn runs test.RequireExclusionUnderChurn (make
// test-churn) with the conformance suite's wiring: its Partition puts
// each contender behind a fault proxy of its own.
func TestExclusionUnderChurn(t *testing.T) {
	newStore, opts := wiring()
	test.RequireExclusionUnderChurn(t, newStore, opts)
}
