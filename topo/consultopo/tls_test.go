package consultopo

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/freeport"
	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
)

// newTestCert writes dir/name.pem and dir/name-key.pem, a certificate for
// 127.0.0.1 signed by parent (self-signed, a CA, when parent is nil), and
// returns it with its key.
func newTestCert(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+"-key.pem"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	return cert, key
}

// startTLSAgent runs a Consul dev agent (consultest's binary) serving its
// HTTP API over TLS at the returned address and requiring client
// certificates signed by dir/ca.pem (it writes ca, server and client
// certificates into dir). Its plain HTTP port serves only the readiness
// check. The agent is killed when the test ends.
func startTLSAgent(t *testing.T, dir string) string {
	t.Helper()
	ca, caKey := newTestCert(t, dir, "ca", nil, nil)
	newTestCert(t, dir, "server", ca, caKey)
	newTestCert(t, dir, "client", ca, caKey)
	bin := consultest.Binary(t)
	addrs, err := freeport.Addrs(5)
	require.NoError(t, err)
	port := func(i int) string { _, p, _ := net.SplitHostPort(addrs[i]); return p }
	tlsHCL := fmt.Sprintf("tls {\n defaults {\n  ca_file = %q\n  cert_file = %q\n  key_file = %q\n  verify_incoming = true\n }\n}",
		filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"))
	cmd := exec.Command(bin, "agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-http-port", port(0), "-https-port", port(1),
		"-serf-lan-port", port(2), "-serf-wan-port", port(3), "-server-port", port(4),
		"-dns-port=-1", "-grpc-port=-1", "-data-dir", filepath.Join(dir, "data"), "-node", "tls-"+port(0),
		"-log-level", "warn", "-hcl", "disable_update_check = true",
		"-hcl", fmt.Sprintf("session_ttl_min = %q", consultest.SessionTTLMin.String()), "-hcl", tlsHCL)
	logPath := filepath.Join(dir, "consul.log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	client := &http.Client{Timeout: 2 * time.Second}
	ready := func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		resp, err := client.Get("http://" + addrs[0] + "/v1/status/leader")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b := make([]byte, 64)
		n, _ := resp.Body.Read(b)
		return resp.StatusCode == http.StatusOK && n > 2 // a quoted, non-empty leader address
	}
	require.Eventually(t, ready, 2*time.Minute, 50*time.Millisecond)
	select {
	case <-exited:
		log, _ := os.ReadFile(logPath)
		require.FailNow(t, "the consul agent exited", "%s", log)
	default:
	}
	return addrs[1]
}

// TestDialTLSAgent: on an agent serving its API only over TLS and
// requiring client certificates, a Server opened with the TLS factory
// opens (the first request goes over TLS), and so does a cell from its
// CellInfo; without TLS options, or without the client certificate, the
// open fails with Unavailable naming the address.
func TestDialTLSAgent(t *testing.T) {
	dir := t.TempDir()
	addr := startTLSAgent(t, dir)
	ctx := t.Context()
	tlsOpts := Options{
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "client.pem"),
		KeyFile:  filepath.Join(dir, "client-key.pem"),
	}
	root := testRoot(t)
	ts, err := topo.OpenServerContext(ctx, FactoryName, addr, root+"/global", topo.WithFactory(NewFactory(tlsOpts)))
	require.NoError(t, err)
	defer ts.Close()
	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: addr, Root: root + "/zone1"}))
	cell, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, err = cell.Create(ctx, "f", []byte("over TLS"))
	require.NoError(t, err)

	_, err = topo.OpenServerContext(ctx, FactoryName, addr, root+"/global")
	t.Log(err)
	requireCodeAt(t, err, topo.Unavailable, addr)
	noCert := tlsOpts
	noCert.CertFile, noCert.KeyFile = "", ""
	noCert.Address, noCert.DialTimeout = addr, time.Second
	_, err = NewConn(noCert, root)
	t.Log(err)
	requireCodeAt(t, err, topo.Unavailable, addr)
}
