package zktest

import (
	"crypto/tls"
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

// waitTLSAnswers waits until the server at addr answers a TLS handshake:
// one that completes, or one it refuses with a TLS alert (a client without
// a certificate, when certificates are required). A port that only accepts
// TCP is not ready: the JVM sets up its TLS stack on the first handshake,
// which on a loaded machine can take longer than a client's dial timeout.
// The probe verifies nothing and sends no certificate.
func waitTLSAnswers(p *process, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := tlsAnswers(addr, deadline)
		if err == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("zktest: ZooKeeper exited before answering TLS on %s: %s", addr, p.logTail())
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("zktest: ZooKeeper did not answer a TLS handshake on %s within %v: %s", addr, timeout, p.logTail()), err)
		}
		select {
		case <-p.done:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tlsAnswers runs one handshake with addr, ending by deadline; nil when
// the server completed it or refused it with an alert.
func tlsAnswers(addr string, deadline time.Time) error {
	c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(deadline)
	err = tls.Client(c, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}).Handshake()
	// crypto/tls reports an alert the server sent as a *net.OpError
	// whose Op is "remote error".
	var refused *net.OpError
	if err == nil || errors.As(err, &refused) && refused.Op == "remote error" {
		return nil
	}
	return err
}
