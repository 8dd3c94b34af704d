package topoctl

import (
	"crypto/tls"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/test/faultproxy"
)

// TestTLSDiagnosisSaysNothingOfAMuteServer: a server that accepts the
// connection and never answers the handshake (a loaded one, slower than
// the probe's bound) is not reported as a failed TLS handshake: the
// diagnosis has nothing to say of TLS and leaves the caller's error alone.
func TestTLSDiagnosisSaysNothingOfAMuteServer(t *testing.T) {
	px, err := faultproxy.New("127.0.0.1:1") // never dialed while blackholed
	require.NoError(t, err)
	px.Blackhole()
	t.Cleanup(func() { _ = px.Close() })
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	assert.Empty(t, tlsDiagnosis(px.Addr(), cfg, "", clientTLSFlags, tlsProbeBound), "a handshake that got no answer")
	assert.Empty(t, tlsDiagnosis(px.Addr(), nil, "", clientTLSFlags, tlsProbeBound), "a plaintext client's probe that got no answer")
}
