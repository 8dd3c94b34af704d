package zktest

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
)

// TLSFiles are the PEM files of a server that serves clients over TLS on a
// secureClientPort (StartTLS).
type TLSFiles struct {
	// KeyStore is a PEM file holding the server's private key (PKCS#8,
	// "PRIVATE KEY") followed by its certificate chain
	// (ssl.keyStore.type=PEM).
	KeyStore string
	// TrustStore is a PEM file of the CA certificates that sign the
	// client certificates the server accepts (ssl.trustStore.type=PEM).
	TrustStore string
	// ClientAuth is ssl.clientAuth: "need" (the default when empty: a
	// client without a certificate signed by TrustStore is refused),
	// "want" or "none".
	ClientAuth string
}

// config returns the zoo.cfg lines of a secureClientPort on port with the
// Netty connection factory (the one that speaks TLS) and the x509
// authentication provider, which gives each TLS session the identity
// "x509:<subject DN of the client certificate>" for ACLs.
func (f *TLSFiles) config(port int) string {
	auth := f.ClientAuth
	if auth == "" {
		auth = "need"
	}
	return fmt.Sprintf(`secureClientPort=%d
secureClientPortAddress=127.0.0.1
serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory
authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider
ssl.keyStore.location=%s
ssl.keyStore.type=PEM
ssl.trustStore.location=%s
ssl.trustStore.type=PEM
ssl.clientAuth=%s
ssl.hostnameVerification=false
`, port, f.KeyStore, f.TrustStore, auth)
}

// StartTLS is Start for a server that also serves clients over TLS with
// files on a secureClientPort (client certificates required unless
// files.ClientAuth says otherwise); SecureAddr returns its address. The
// plain client port (Addr) stays open for the four-letter commands. The
// server is killed in t.Cleanup; it fails the test (never skips) when
// ZooKeeper cannot be installed or started.
func StartTLS(t testing.TB, files TLSFiles) *Server {
	t.Helper()
	if err := EnsureInstalled(); err != nil {
		t.Fatal(err)
	}
	if files.KeyStore == "" || files.TrustStore == "" {
		t.Fatal("zktest: StartTLS needs a KeyStore and a TrustStore")
	}
	s, err := launch(t.TempDir(), false, &files, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// SecureAddr returns the "127.0.0.1:PORT" address of the server's
// secureClientPort (TLS), or "" for a server started without TLS.
func (s *Server) SecureAddr() string { return s.sAddr }

// waitListening waits until something accepts TCP connections at addr
// (the secure port opens after the plain one answers srvr).
func waitListening(p *process, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			return c.Close()
		}
		if p.exited() {
			return fmt.Errorf("zktest: ZooKeeper exited before listening on %s: %s", addr, p.logTail())
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("zktest: ZooKeeper did not listen on %s within %v: %s", addr, timeout, p.logTail()), err)
		}
		select {
		case <-p.done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}
