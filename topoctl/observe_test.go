package topoctl

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// stopDuringObserve is a participation whose Observe ends the command's
// context while it sets up, as a Ctrl-C arriving at that moment does, and
// then fails as a backend's Observe does on an ended context.
type stopDuringObserve struct {
	topo.LeaderParticipation
	stop func()
}

func (p stopDuringObserve) Observe(ctx context.Context) (<-chan topo.Leader, error) {
	p.stop()
	<-ctx.Done()
	return nil, topo.NewError(topo.Interrupted, "e")
}

// TestObserveInterruptedWhileStarting: leader --observe interrupted while
// its Observe call sets up (first, or again after a reconnection) ends as
// any interrupted observation does, with no error: it used to report the
// Observe call's Interrupted and exit 1 (seen in CI, TestWatchPartition).
func TestObserveInterruptedWhileStarting(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	o := &watching{out: newPrinter(streams{Stdout: &out, Stderr: &errOut})}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	err := o.observeLeader(ctx, &store{}, stopDuringObserve{stop: cancel}, "e")
	require.NoError(t, err)
	require.Empty(t, out.String())
}
