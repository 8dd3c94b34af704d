package topo_test

import (
	"context"
	"testing"

	"github.com/topokit/topokit/topo"
)

func TestLinearizableReadMarker(t *testing.T) {
	ctx := context.Background()
	if topo.LinearizableRead(ctx) {
		t.Fatal("a plain context asks for linearizable reads")
	}
	marked := topo.WithLinearizableRead(ctx)
	derived, cancel := context.WithCancel(marked)
	defer cancel()
	if !topo.LinearizableRead(marked) || !topo.LinearizableRead(derived) {
		t.Fatal("the marker is lost")
	}
	if topo.LinearizableRead(ctx) {
		t.Fatal("marking a derived context changed its parent")
	}
}
