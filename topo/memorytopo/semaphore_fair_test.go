package memorytopo_test

import (
	"testing"

	"github.com/topokit/topokit/topo/test"
)

// TestSemaphoreFIFO: waiters on a full semaphore are admitted in the order
// they queued, each release admitting the next one only.
func TestSemaphoreFIFO(t *testing.T) {
	conns, queued := fairConns(t, 3)
	test.RequireSemaphoreFIFO(t, conns, 2, 10, queued)
}
