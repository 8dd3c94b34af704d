package topoctl

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTLSDiagnosisSaysNothingOfAMuteServer: a server that accepts the
// connection and never answers the handshake (a loaded one, slower than
// the probe's bound) is not reported as a failed TLS handshake: the
// diagnosis has nothing to say of TLS and leaves the caller's error alone.
func TestTLSDiagnosisSaysNothingOfAMuteServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c // held open, never read nor written
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		for c := range accepted {
			_ = c.Close()
		}
	})
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	assert.Empty(t, tlsDiagnosis(ln.Addr().String(), cfg, "", clientTLSFlags), "a handshake that got no answer")
	assert.Empty(t, tlsDiagnosis(ln.Addr().String(), nil, "", clientTLSFlags), "a plaintext client's probe that got no answer")
}
