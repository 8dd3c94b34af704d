package topoctl

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// An error line names the stores opened unless the error already names
// the store that could not be reached, which its type says, whatever its
// words: a backend that rewords its message keeps its store unblamed.
func TestUnreachableNamedByType(t *testing.T) {
	p := newPrinter(streams{})
	p.named("etcd2:127.0.0.1:2379:/global")
	// Worded unlike any backend or topoctl message so far.
	unreachable := backendkit.Wrap(topo.Unavailable, "", fmt.Errorf("cell zone1: %w",
		&topo.UnreachableError{Addrs: []string{"10.0.0.9:2181"}, Err: errors.New("the servers at 10.0.0.9:2181 kept silent")}))
	line := p.errorLine(unreachable)
	assert.Equal(t, "Unavailable: unavailable: cell zone1: the servers at 10.0.0.9:2181 kept silent", line)
	assert.Equal(t, topo.Unavailable, topo.CodeOf(unreachable))
	assert.True(t, errors.Is(unreachable, topo.Unavailable))

	// A Timeout that names no unreachable store gets the stores opened,
	// whatever its words say ("no answer within" was one of the phrases).
	slow := backendkit.Wrap(topo.Timeout, "f", errors.New("the Consul agent at 10.0.0.9:8500 sent no answer within 1s"))
	assert.Equal(t, "Timeout: deadline exceeded: /f: the Consul agent at 10.0.0.9:8500 sent no answer within 1s (store etcd2:127.0.0.1:2379:/global)", p.errorLine(slow))
}
