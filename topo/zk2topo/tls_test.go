package zk2topo

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/testpki"
	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// newTestCA writes a self-signed CA certificate to dir/ca.pem.
func newTestCA(t *testing.T, dir string) *testCA {
	t.Helper()
	ca := &testCA{dir: dir}
	ca.cert, ca.key = ca.issue(t, "ca", true)
	return ca
}

// issue makes a certificate for 127.0.0.1 with subject CN=name, signed by
// the CA (self-signed when isCA), and writes name.pem (the certificate)
// and name-key.pem (its PKCS#8 key).
func (ca *testCA) issue(t *testing.T, name string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	parent, parentKey := ca.cert, ca.key
	if isCA {
		parent, parentKey = nil, nil
	}
	return testpki.Write(t, ca.dir, name, parent, parentKey)
}

// path returns the path of one of the CA's files.
func (ca *testCA) path(name string) string { return filepath.Join(ca.dir, name) }

// startTLSServer starts a ZooKeeper that serves TLS on its secure port and
// requires client certificates signed by a new CA; it returns the server
// and the CA, which has issued "client" and "other" client certificates.
func startTLSServer(t *testing.T) (*zktest.Server, *testCA) {
	t.Helper()
	ca := newTestCA(t, t.TempDir())
	ca.issue(t, "server", false)
	ca.issue(t, "client", false)
	ca.issue(t, "other", false)
	// A PEM key store: the key, then the certificate.
	ks := ca.path("server-keystore.pem")
	key, err := os.ReadFile(ca.path("server-key.pem"))
	require.NoError(t, err)
	crt, err := os.ReadFile(ca.path("server.pem"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(ks, append(key, crt...), 0o600))
	s := zktest.StartTLS(t, zktest.TLSFiles{KeyStore: ks, TrustStore: ca.path("ca.pem")})
	return s, ca
}

// tlsOptions are the TLS options of a client presenting the certificate
// name issued by ca.
func tlsOptions(ca *testCA, name string) Options {
	return Options{
		TLSCAFile:      ca.path("ca.pem"),
		TLSCertFile:    ca.path(name + ".pem"),
		TLSKeyFile:     ca.path(name + "-key.pem"),
		SessionTimeout: testSessionTimeout,
		DialTimeout:    30 * time.Second,
	}
}

// TestTLS: a Conn with a CA, a client certificate and its key talks to a
// ZooKeeper 3.8 secureClientPort (Netty, ssl.clientAuth=need, PEM key and
// trust stores), together with digest auth and ACLs: digest ACLs refuse a
// TLS client without the digest identity, an x509 ACL refuses a client
// whose certificate has another subject, and the server refuses clients
// without TLS or without a client certificate (Unavailable, fast).
func TestTLS(t *testing.T) {
	srv, ca := startTLSServer(t)
	addr := srv.SecureAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := freshRoot(t)
	openAt := func(t *testing.T, opts Options, root string) *Conn {
		t.Helper()
		opts.Servers = []string{addr}
		c, err := NewConnContext(ctx, opts, root)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	open := func(t *testing.T, opts Options) *Conn {
		t.Helper()
		return openAt(t, opts, root)
	}

	// Digest auth and a digest ACL over TLS.
	alice := tlsOptions(ca, "client")
	alice.Auth = "digest:alice:secret"
	alice.ACL = zk.DigestACL(zk.PermAll, "alice", "secret")
	a := open(t, alice)
	v, err := a.Create(ctx, "d/f", []byte("over TLS"))
	require.NoError(t, err)
	got, gv, err := a.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "over TLS", string(got))
	require.Equal(t, v, gv)
	ld, err := a.Lock(ctx, "d", "tls lock")
	require.NoError(t, err)
	require.NoError(t, ld.Check(ctx))
	require.NoError(t, ld.Unlock(ctx))

	// Another certificate without the digest identity is refused by the
	// ACL; with it, it is let in.
	stranger := open(t, tlsOptions(ca, "other"))
	_, _, err = stranger.Get(ctx, "d/f")
	require.ErrorIs(t, err, topo.PermissionDenied)
	_, err = stranger.Update(ctx, "d/f", []byte("x"), nil)
	require.ErrorIs(t, err, topo.PermissionDenied)
	friend := tlsOptions(ca, "other")
	friend.Auth = "digest:alice:secret"
	got, _, err = open(t, friend).Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "over TLS", string(got))

	// An x509 ACL (in a root of its own, as the digest ACL covers the
	// first root's znode): only the certificate's subject may touch the
	// nodes.
	x509Root := freshRoot(t)
	x509Opts := tlsOptions(ca, "client")
	x509Opts.ACL = []zk.ACL{{Perms: zk.PermAll, Scheme: "x509", ID: "CN=client"}}
	owner := openAt(t, x509Opts, x509Root)
	_, err = owner.Create(ctx, "x/f", []byte("cert only"))
	require.NoError(t, err)
	_, _, err = owner.Get(ctx, "x/f")
	require.NoError(t, err)
	_, _, err = openAt(t, tlsOptions(ca, "other"), x509Root).Get(ctx, "x/f")
	require.ErrorIs(t, err, topo.PermissionDenied, "an x509 ACL let another certificate read")

	// The server requires TLS and a client certificate there.
	plain := Options{Servers: []string{addr}, DialTimeout: time.Second}
	_, err = NewConnContext(ctx, plain, root)
	requireUnavailableAt(t, err, addr)
	noCert := Options{Servers: []string{addr}, TLSCAFile: ca.path("ca.pem"), DialTimeout: time.Second}
	_, err = NewConnContext(ctx, noCert, root)
	requireUnavailableAt(t, err, addr)

	// The server's certificate is checked against TLSServerName (by
	// default the address's host, 127.0.0.1, one of its IP addresses).
	named := tlsOptions(ca, "other")
	named.TLSServerName = "localhost"
	open(t, named)
	named.TLSServerName = "elsewhere.example"
	named.Servers = []string{addr}
	named.DialTimeout = time.Second
	_, err = NewConnContext(ctx, named, root)
	requireUnavailableAt(t, err, addr)
	require.Contains(t, err.Error(), "elsewhere.example", "the error tells why the handshake failed")

	// Bad TLS files are InvalidArgument, before any dial.
	bad := tlsOptions(ca, "client")
	bad.Servers = []string{addr}
	bad.TLSCAFile = ca.path("missing.pem")
	_, err = NewConn(bad, root)
	require.ErrorIs(t, err, topo.InvalidArgument)
	bad = tlsOptions(ca, "client")
	bad.Servers = []string{addr}
	bad.TLSKeyFile = ""
	_, err = NewConn(bad, root)
	require.ErrorIs(t, err, topo.InvalidArgument)
}

// TestServerOverTLS: topo.OpenServer with WithFactory(NewFactory(tlsOpts))
// opens the global cell on a TLS-only ZooKeeper port that requires client
// certificates, and a cell from its CellInfo record, with digest auth and
// ACLs, and no hand-written factory.
func TestServerOverTLS(t *testing.T) {
	srv, ca := startTLSServer(t)
	addr := srv.SecureAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root := freshRoot(t)
	opts := tlsOptions(ca, "client")
	opts.Auth = "digest:alice:secret"
	opts.ACL = zk.DigestACL(zk.PermAll, "alice", "secret")
	ts, err := topo.OpenServerContext(ctx, FactoryName, addr, root+"/global", topo.WithFactory(NewFactory(opts)))
	require.NoError(t, err)
	defer ts.Close()
	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: addr, Root: root + "/zone1"}))
	cell, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, err = cell.Create(ctx, "f", []byte("cell over TLS"))
	require.NoError(t, err)
	ld, err := cell.Lock(ctx, "", "cell lock")
	require.NoError(t, err)
	require.NoError(t, ld.Unlock(ctx))

	// The cell's znodes carry the factory's ACL: a TLS client without the
	// digest identity cannot read them.
	other := tlsOptions(ca, "other")
	other.Servers = []string{addr}
	stranger, err := NewConn(other, root)
	require.NoError(t, err)
	defer stranger.Close()
	_, _, err = stranger.Get(ctx, "zone1/f")
	require.ErrorIs(t, err, topo.PermissionDenied)
	friend := other
	friend.Auth = opts.Auth
	fc, err := NewConn(friend, root)
	require.NoError(t, err)
	defer fc.Close()
	got, _, err := fc.Get(ctx, "zone1/f")
	require.NoError(t, err)
	require.Equal(t, "cell over TLS", string(got))
}

// TestTLSOverASlowLink: a TLS handshake that takes longer than the client
// library's 1 s connect timeout (here each packet delayed 700 ms: about
// 1.4 s before the server's answer arrives) still gives a session, as a
// plain connection's session handshake would. Before, every dial gave up
// at 1 s and no session was ever made.
func TestTLSOverASlowLink(t *testing.T) {
	srv, ca := startTLSServer(t)
	proxy, err := faultproxy.New(srv.SecureAddr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	proxy.SetDelay(700 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := tlsOptions(ca, "client")
	opts.Servers = []string{proxy.Addr()}
	opts.SessionTimeout = 10 * time.Second
	c, err := NewConnContext(ctx, opts, freshRoot(t))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	proxy.SetDelay(0) // the session is what was at stake
	v, err := c.Create(ctx, "slow/f", []byte("through a slow link"))
	require.NoError(t, err)
	got, gv, err := c.Get(ctx, "slow/f")
	require.NoError(t, err)
	require.Equal(t, "through a slow link", string(got))
	require.Equal(t, v, gv)
}

// TestTLSMuteServer: a server that accepts TCP and never answers the
// handshake fails NewConn with Unavailable once DialTimeout has passed,
// although a handshake may now wait longer than that.
func TestTLSMuteServer(t *testing.T) {
	mute := muteServer(t)
	ca := newTestCA(t, t.TempDir())
	ca.issue(t, "client", false)
	opts := tlsOptions(ca, "client")
	opts.Servers = []string{mute}
	opts.DialTimeout = time.Second
	_, err := NewConnContext(context.Background(), opts, "/mute")
	requireUnavailableAt(t, err, mute)
}

// muteServer returns the address of a server that accepts connections and
// never answers: a blackholed faultproxy, closed when the test ends.
func muteServer(t *testing.T) string {
	t.Helper()
	px, err := faultproxy.New("127.0.0.1:1") // never dialed while blackholed
	require.NoError(t, err)
	px.Blackhole()
	t.Cleanup(func() { _ = px.Close() })
	return px.Addr()
}
