package certs

import (
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCreateAndCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := CreateCA(dir, "", Options{Algorithm: Ed25519})
	require.NoError(t, err)
	assert.True(t, ca.Certificate.IsCA)
	_, ok := ca.Certificate.PublicKey.(ed25519.PublicKey)
	assert.True(t, ok)
	srv, err := CreateCert(dir, dir, "n1", Server, []net.IP{net.ParseIP("10.0.0.1")}, []string{"n1.example"}, Options{})
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Certificate)
	_, err = srv.Certificate.Verify(x509.VerifyOptions{Roots: pool, DNSName: "n1.example", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.NoError(t, err)
	_, err = srv.Certificate.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err, "a server certificate is also a client certificate")
	cl, err := CreateCert(dir, dir, "app", Client, nil, nil, Options{})
	require.NoError(t, err)
	assert.Empty(t, cl.Certificate.IPAddresses)
	_, err = cl.Certificate.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	assert.Error(t, err, "a client certificate is not a server certificate")

	now := time.Now()
	require.NoError(t, CheckPair(srv.Cert, srv.Key, ca.Cert, now))
	err = CheckPair(srv.Cert, cl.Key, "", now)
	require.ErrorContains(t, err, cl.Key)
	require.ErrorContains(t, err, "does not match")
	assert.ErrorContains(t, CheckPair(srv.Cert, srv.Key, "", now.AddDate(2, 0, 0)), "expired")
	assert.ErrorContains(t, CheckPair(filepath.Join(dir, "nope.pem"), srv.Key, "", now), "nope.pem")
	assert.ErrorContains(t, CheckPair(srv.Cert, srv.Key, filepath.Join(dir, "nope-ca.pem"), now), "nope-ca.pem")

	// Never overwritten, nothing written.
	before, err := os.ReadFile(srv.Key)
	require.NoError(t, err)
	_, err = CreateCert(dir, dir, "n1", Peer, nil, nil, Options{})
	require.ErrorIs(t, err, ErrExists)
	after, err := os.ReadFile(srv.Key)
	require.NoError(t, err)
	assert.Equal(t, before, after)
	_, err = CreateCA(dir, "", Options{})
	require.ErrorIs(t, err, ErrExists)
	require.NoFileExists(t, filepath.Join(dir, "x.pem"))

	// A certificate may not outlive its CA; a bad algorithm is refused.
	_, err = CreateCert(dir, dir, "long", Peer, nil, nil, Options{Days: 100 * 365})
	require.ErrorContains(t, err, "outlive")
	_, err = CreateCert(dir, dir, "rsa", Peer, nil, nil, Options{Algorithm: "rsa"})
	require.ErrorContains(t, err, "unknown key algorithm")
	_, err = CreateCert(dir, t.TempDir(), "noca", Peer, nil, nil, Options{})
	require.Error(t, err)
	assert.True(t, errors.Is(err, os.ErrNotExist))
	assert.NoFileExists(t, filepath.Join(dir, "long.pem"))
	assert.NoFileExists(t, filepath.Join(dir, "long-key.pem"))
}
