package topoctl

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// Ctrl-C while topoctl connects or lists exits 130 and says it was
// interrupted; before, it exited 1 saying "nothing accepts connections".
func TestInterruptWhileConnectingOrListing(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	root := "/" + t.Name()

	// Interrupted before the dial is answered.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb syncBuffer
	tg := target{impl: "etcd2", addr: addr, root: root}
	code := runMain(ctx, tg.argv([]string{"ls", "/"}), streams{Stdout: &out, Stderr: &errb})
	assert.Equal(t, ExitInterrupted, code, errb.String())
	assert.Contains(t, errb.String(), "topoctl: interrupted: ")
	assert.NotContains(t, errb.String(), "nothing accepts connections")

	// Interrupted while the listing waits for a store that stopped
	// answering.
	tg.ok(t, "put", "a", "1")
	px, err := faultproxy.New(addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	px.Blackhole()
	bg := target{impl: "etcd2", addr: px.Addr(), root: root}.start(t, "ls", "-R", "/")
	code = bg.stop(t)
	assert.Equal(t, ExitInterrupted, code, bg.stderr.String())
	assert.True(t, strings.HasPrefix(bg.stderr.String(), "topoctl: interrupted: "), bg.stderr.String())
}

// A host name that does not resolve is reported as such, not as "nothing
// accepts connections".
func TestDNSFailureMessage(t *testing.T) {
	t.Parallel()
	tg := target{impl: "etcd2", addr: "no-such-host.invalid:2379", root: "/x"}
	r := tg.fails(t, ExitFailure, []string{"Unavailable", "cannot resolve the host name", "no-such-host.invalid"}, "ls", "/")
	assert.NotContains(t, r.stderr, "nothing accepts connections")
}
