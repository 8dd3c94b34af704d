package test

import (
	"testing"

	"github.com/topokit/topokit/topo"
)

// run is filled in by the suite's files.
func run(t *testing.T, newStore func(t *testing.T) (open func() topo.Conn), opts Options) {
	t.Fatal("conformance suite not written yet")
}
