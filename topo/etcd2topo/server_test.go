package etcd2topo

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// TestRoots: the root is a plain key prefix; "/" and "" work too, and
// locks, lists and listings stay inside the root.
func TestRoots(t *testing.T) {
	addr := etcdtest.Start(t) // an empty server: the "" root sees every key
	cli := rawClient(t, addr)
	ctx := context.Background()
	for _, tc := range []struct{ root, key string }{
		{"/a/b/", "/a/b/x/f"},
		{"/", "/x/f"},
		{"", "x/f"},
	} {
		t.Run("root="+tc.root, func(t *testing.T) {
			c := openConn(t, addr, tc.root)
			_, err := c.Create(ctx, "x/f", []byte("v"))
			require.NoError(t, err)
			resp, err := cli.Get(ctx, tc.key)
			require.NoError(t, err)
			require.Len(t, resp.Kvs, 1, "file key")

			ld, err := c.Lock(ctx, "", "root lock")
			require.NoError(t, err)
			ld2, err := c.Lock(ctx, "x", "dir lock")
			require.NoError(t, err)
			kvs, err := c.List(ctx, "")
			require.NoError(t, err)
			require.Len(t, kvs, 1)
			require.Equal(t, "x/f", kvs[0].Path)
			entries, err := c.ListDir(ctx, "", true)
			require.NoError(t, err)
			require.Equal(t, []topo.DirEntry{
				{Name: "locks", Type: topo.TypeDirectory, Ephemeral: true},
				{Name: "x", Type: topo.TypeDirectory},
			}, entries)
			require.NoError(t, ld.Unlock(ctx))
			require.NoError(t, ld2.Unlock(ctx))

			require.NoError(t, c.Delete(ctx, "x/f", nil))
			_, err = c.Lock(ctx, "", "empty root")
			require.ErrorIs(t, err, topo.NoNode)
			all, err := cli.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
			require.NoError(t, err)
			require.Zero(t, all.Count, "nothing left behind")
		})
	}
}

// TestAuth: with etcd's auth enabled, a Conn with the right username and
// password works and one without fails.
func TestAuth(t *testing.T) {
	addr := etcdtest.Start(t)
	cli := rawClient(t, addr)
	ctx := context.Background()
	_, err := cli.RoleAdd(ctx, "root")
	require.NoError(t, err)
	_, err = cli.UserAdd(ctx, "root", "secret")
	require.NoError(t, err)
	_, err = cli.UserGrantRole(ctx, "root", "root")
	require.NoError(t, err)
	_, err = cli.AuthEnable(ctx)
	require.NoError(t, err)

	good, err := NewConn(Options{Endpoints: []string{addr}, Username: "root", Password: "secret"}, "/auth")
	require.NoError(t, err)
	defer good.Close()
	_, err = good.Create(ctx, "f", []byte("v"))
	require.NoError(t, err)

	_, err = NewConn(Options{Endpoints: []string{addr}, Username: "root", Password: "wrong"}, "/auth")
	require.Error(t, err, "a wrong password fails at NewConn")
	require.NotEqual(t, topo.InvalidArgument, topo.CodeOf(err))

	anon := openConn(t, addr, "/auth")
	_, _, err = anon.Get(ctx, "f")
	require.Error(t, err)
	require.Equal(t, topo.Unavailable, topo.CodeOf(err))
}

// TestTLS: a Conn given a CA, a client certificate and its key talks to a
// member that serves TLS and requires client certificates.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCert(t, dir, "ca", nil, nil)
	newCert(t, dir, "server", ca, caKey)
	newCert(t, dir, "client", ca, caKey)

	addrs, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	m, err := etcdembed.Start(etcdembed.Config{
		Dir:       filepath.Join(dir, "data"),
		ClientURL: "https://" + addrs[0],
		PeerURL:   "http://" + addrs[1],
		TickMs:    10, ElectionMs: 100, NoFsync: true,
		ClientTLS: transport.TLSInfo{
			CertFile:       filepath.Join(dir, "server.pem"),
			KeyFile:        filepath.Join(dir, "server-key.pem"),
			TrustedCAFile:  filepath.Join(dir, "ca.pem"),
			ClientCertAuth: true,
		},
	})
	require.NoError(t, err)
	t.Cleanup(m.Close)
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, m.WaitReady(rctx))

	c, err := NewConn(Options{
		Endpoints:   []string{m.ClientAddr()},
		TLSCAFile:   filepath.Join(dir, "ca.pem"),
		TLSCertFile: filepath.Join(dir, "client.pem"),
		TLSKeyFile:  filepath.Join(dir, "client-key.pem"),
	}, "/tls")
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := c.Create(ctx, "f", []byte("v"))
	require.NoError(t, err)
	_, got, err := c.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, v, got)

	_, err = NewConn(Options{Endpoints: []string{m.ClientAddr()}, TLSCAFile: filepath.Join(dir, "missing.pem")}, "/tls")
	require.ErrorIs(t, err, topo.InvalidArgument)
}

// newCert writes <name>.pem and <name>-key.pem in dir: a self-signed CA
// when parent is nil, else a certificate for 127.0.0.1 signed by parent.
func newCert(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	if parent == nil {
		tmpl.IsCA = true
		tmpl.BasicConstraintsValid = true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+".pem"),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name+"-key.pem"),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return cert, key
}
