package zktest

import (
	"crypto/tls"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/testpki"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// A secure port that accepts TCP but has not answered a handshake is not
// ready: CI once had a client's first handshake with a just-started
// ZooKeeper time out, the port having been called ready on accept alone.
func TestTLSReadinessNeedsAnAnswer(t *testing.T) {
	px, err := faultproxy.New("127.0.0.1:1") // never dialed while blackholed
	require.NoError(t, err)
	px.Blackhole()
	t.Cleanup(func() { _ = px.Close() })
	err = waitTLSAnswers(&process{done: make(chan struct{})}, px.Addr(), 300*time.Millisecond)
	require.ErrorContains(t, err, "did not answer a TLS handshake on "+px.Addr())
}

// A server that completes the handshake, or refuses a client without a
// certificate with an alert (TLS 1.2 does so within the handshake), is
// ready.
func TestTLSReadinessAcceptsARefusal(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := testpki.Write(t, dir, "ca", nil, nil)
	testpki.Write(t, dir, "server", ca, caKey)
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"))
	require.NoError(t, err)
	for name, cfg := range map[string]*tls.Config{
		"no client certificate asked":   {Certificates: []tls.Certificate{cert}},
		"TLS 1.2, certificate required": {Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert, MaxVersion: tls.VersionTLS12},
		"TLS 1.3, certificate required": {Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert},
	} {
		t.Run(name, func(t *testing.T) {
			ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = ln.Close() })
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						_ = c.(*tls.Conn).Handshake()
						_ = c.Close()
					}()
				}
			}()
			require.NoError(t, waitTLSAnswers(&process{done: make(chan struct{})}, ln.Addr().String(), 10*time.Second))
		})
	}
}
