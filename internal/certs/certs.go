// Package certs makes a certificate authority and the certificates it
// signs for an etcd cluster run by "topoctl serve": server, client and
// peer certificates as PEM files, with the standard library only. It is
// the code behind "topoctl tls".
//
// Files are written with O_EXCL: an existing file is never overwritten.
// Keys are PKCS#8 PEM files of mode 0600; certificates are mode 0644.
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Default lifetimes: a CA lasts five years, a certificate it signs one.
const (
	DefaultCADays   = 5 * 365
	DefaultCertDays = 365
)

// Key algorithms.
const (
	ECDSAP256 = "ecdsa-p256"
	Ed25519   = "ed25519"
)

// Kind is what a signed certificate is for.
type Kind int

// The kinds of certificate: Server carries both server and client usages
// (a cluster node is a server to its clients and a client of the other
// members), Client only the client usage, Peer both (etcd's peers dial
// each other).
const (
	Server Kind = iota + 1
	Client
	Peer
)

func (k Kind) String() string {
	switch k {
	case Server:
		return "server"
	case Client:
		return "client"
	case Peer:
		return "peer"
	}
	return "unknown"
}

// ErrExists is wrapped by the errors of CreateCA and CreateCert when a file
// they would write exists; nothing is written then.
var ErrExists = errors.New("file exists")

// Options are the settings common to CreateCA and CreateCert.
type Options struct {
	// Algorithm is ECDSAP256 (the default when empty) or Ed25519.
	Algorithm string
	// Days is the lifetime in days from now (DefaultCADays or
	// DefaultCertDays when <= 0). The certificate is valid from one
	// minute ago, for clocks slightly behind.
	Days int
	// Now is the current time; zero means time.Now().
	Now time.Time
}

// Files are the paths CreateCA and CreateCert wrote.
type Files struct {
	Cert, Key string
	// Certificate is the certificate written.
	Certificate *x509.Certificate
}

// CAFiles returns the paths of the CA in dir: ca.pem and ca-key.pem.
func CAFiles(dir string) Files {
	return Files{Cert: filepath.Join(dir, "ca.pem"), Key: filepath.Join(dir, "ca-key.pem")}
}

// CertFiles returns the paths of certificate name in dir: NAME.pem and
// NAME-key.pem.
func CertFiles(dir, name string) Files {
	return Files{Cert: filepath.Join(dir, name+".pem"), Key: filepath.Join(dir, name+"-key.pem")}
}

// CreateCA writes a new self-signed CA to dir (ca.pem and ca-key.pem),
// creating dir (mode 0700) when missing. It returns an error wrapping
// ErrExists, writing nothing, when either file exists.
func CreateCA(dir, commonName string, o Options) (Files, error) {
	f := CAFiles(dir)
	if commonName == "" {
		commonName = "topokit etcd CA"
	}
	if err := checkFree(f); err != nil {
		return f, err
	}
	key, pub, err := newKey(o.Algorithm)
	if err != nil {
		return f, err
	}
	now, days := o.now(), o.Days
	if days <= 0 {
		days = DefaultCADays
	}
	tmpl, err := template(commonName, pub, now, days)
	if err != nil {
		return f, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	return write(dir, f, tmpl, tmpl, pub, key, key)
}

// CreateCert writes a certificate of kind k named name (its CommonName,
// also the user name etcd takes from a client certificate when auth is
// on), signed by the CA in caDir, to dir as NAME.pem and NAME-key.pem.
// Server and Peer certificates are valid for ips and dnsNames, plus
// 127.0.0.1 and localhost; a Client certificate carries no addresses
// unless given. It returns an error wrapping ErrExists, writing nothing,
// when either file exists, and an error naming the file when the CA
// cannot be read.
func CreateCert(dir, caDir, name string, k Kind, ips []net.IP, dnsNames []string, o Options) (Files, error) {
	f := CertFiles(dir, name)
	if name == "" {
		return f, errors.New("a certificate needs a name")
	}
	if err := checkFree(f); err != nil {
		return f, err
	}
	ca, caKey, err := LoadCA(caDir)
	if err != nil {
		return f, err
	}
	key, pub, err := newKey(o.Algorithm)
	if err != nil {
		return f, err
	}
	now, days := o.now(), o.Days
	if days <= 0 {
		days = DefaultCertDays
	}
	if end := now.AddDate(0, 0, days); end.After(ca.NotAfter) {
		return f, fmt.Errorf("the certificate would outlive its CA %s (valid until %s): give fewer --days", CAFiles(caDir).Cert, ca.NotAfter.Format(time.RFC3339))
	}
	tmpl, err := template(name, pub, now, days)
	if err != nil {
		return f, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if _, ok := pub.(*ecdsa.PublicKey); ok {
		tmpl.KeyUsage |= x509.KeyUsageKeyAgreement
	}
	switch k {
	case Server, Peer:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		ips = append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...)
		dnsNames = append([]string{"localhost"}, dnsNames...)
	case Client:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	default:
		return f, fmt.Errorf("unknown certificate kind %d", k)
	}
	tmpl.IPAddresses, tmpl.DNSNames = dedupIPs(ips), dedup(dnsNames)
	return write(dir, f, tmpl, ca, pub, key, caKey)
}

// LoadCA reads the CA certificate and key from caDir (ca.pem, ca-key.pem),
// with errors naming the file at fault.
func LoadCA(caDir string) (*x509.Certificate, crypto.Signer, error) {
	f := CAFiles(caDir)
	cert, err := ReadCert(f.Cert)
	if err != nil {
		return nil, nil, err
	}
	if !cert.IsCA {
		return nil, nil, fmt.Errorf("%s is not a CA certificate", f.Cert)
	}
	b, err := os.ReadFile(f.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the CA key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, nil, fmt.Errorf("%s: no PEM key in it", f.Key)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", f.Key, err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("%s: unsupported key type %T", f.Key, k)
	}
	if !publicKeysEqual(s.Public(), cert.PublicKey) {
		return nil, nil, fmt.Errorf("%s does not match the certificate %s", f.Key, f.Cert)
	}
	return cert, s, nil
}

// ReadCert reads the first certificate of a PEM file, with errors naming
// the file.
func ReadCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, fmt.Errorf("%s: no PEM certificate in it", path)
		}
		if blk.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return c, nil
		}
	}
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	type eq interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(eq)
	return ok && e.Equal(b)
}

func (o Options) now() time.Time {
	if o.Now.IsZero() {
		return time.Now()
	}
	return o.Now
}

func newKey(alg string) (crypto.Signer, crypto.PublicKey, error) {
	switch alg {
	case "", ECDSAP256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		return k, &k.PublicKey, nil
	case Ed25519:
		pub, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		return k, pub, nil
	}
	return nil, nil, fmt.Errorf("unknown key algorithm %q (want %s or %s)", alg, ECDSAP256, Ed25519)
}

func template(cn string, pub crypto.PublicKey, now time.Time, days int) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	ski := sha256.Sum256(der)
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.AddDate(0, 0, days),
		SubjectKeyId: ski[:20],
	}, nil
}

func checkFree(f Files) error {
	for _, p := range []string{f.Cert, f.Key} {
		if _, err := os.Lstat(p); err == nil {
			return fmt.Errorf("%s: %w (it is never overwritten: remove it, or pick another --dir or name)", p, ErrExists)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// write signs tmpl with parent and parentKey and writes the certificate
// and key, the key first; on error it removes what it wrote.
func write(dir string, f Files, tmpl, parent *x509.Certificate, pub crypto.PublicKey, key, parentKey crypto.Signer) (Files, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		return f, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return f, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return f, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, err
	}
	if err := writeNew(f.Key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return f, err
	}
	if err := writeNew(f.Cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		_ = os.Remove(f.Key)
		return f, err
	}
	f.Certificate = cert
	return f, nil
}

func writeNew(path string, b []byte, mode os.FileMode) error {
	fl, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", path, ErrExists)
		}
		return err
	}
	if _, err := fl.Write(b); err != nil {
		_ = fl.Close()
		_ = os.Remove(path)
		return err
	}
	if err := fl.Close(); err != nil {
		_ = os.Remove(path)
		return err
	}
	return nil
}

func dedup(ss []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range ss {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func dedupIPs(ips []net.IP) []net.IP {
	var out []net.IP
	seen := map[string]bool{}
	for _, ip := range ips {
		if ip != nil && !seen[ip.String()] {
			seen[ip.String()] = true
			out = append(out, ip)
		}
	}
	return out
}

// CheckPair checks that certFile and keyFile are readable PEM files, that
// the key belongs to the certificate, and that the certificate is valid
// at now; the error names the file at fault. ca, when non-empty, is a CA
// file that must be readable and hold a certificate.
func CheckPair(certFile, keyFile, ca string, now time.Time) error {
	if certFile == "" || keyFile == "" {
		return errors.New("a certificate file needs its key file and the other way round")
	}
	cert, err := ReadCert(certFile)
	if err != nil {
		return err
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return err
	}
	if _, err := tlsKeyPair(certFile, keyFile, kb); err != nil {
		return err
	}
	if now.Before(cert.NotBefore) {
		return fmt.Errorf("%s: the certificate is not valid before %s", certFile, cert.NotBefore.Format(time.RFC3339))
	}
	if now.After(cert.NotAfter) {
		return fmt.Errorf("%s: the certificate expired at %s", certFile, cert.NotAfter.Format(time.RFC3339))
	}
	if ca != "" {
		c, err := ReadCert(ca)
		if err != nil {
			return err
		}
		if now.After(c.NotAfter) {
			return fmt.Errorf("%s: the CA certificate expired at %s", ca, c.NotAfter.Format(time.RFC3339))
		}
	}
	return nil
}
