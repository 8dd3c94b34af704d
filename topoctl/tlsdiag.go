package topoctl

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/topokit/topokit/topo"
)

// explainEtcdDial adds to err, an etcd2 connection failure, why the TLS
// handshake with the first member at addr failed when that is the cause
// (gRPC reports only that no member answered): plaintext against TLS and
// the other way round, a missing or refused client certificate, a server
// certificate of another CA. Other errors are returned unchanged. The
// probe takes at most its share of --timeout (see dialBounds).
func (o *connector) explainEtcdDial(addr string, err error) error {
	s := o.sec
	_, bound := dialBounds(o.timeout)
	return explainDial(addr, transport.TLSInfo{CertFile: s.etcdCert, KeyFile: s.etcdKey, TrustedCAFile: s.etcdCA, ServerName: s.etcdServerName}, clientTLSFlags, bound, err)
}

// explainOtherDial is explainEtcdDial for zk2 and consul connections
// (their clients report a refused handshake no better: a session that
// never came, "broken pipe", "client conn could not be established"),
// with their TLS flags; errors of other implementations are returned
// unchanged.
func (o *connector) explainOtherDial(impl, addr string, err error) error {
	s := o.sec
	_, bound := dialBounds(o.timeout)
	switch impl {
	case "zk2":
		return explainDial(addr, transport.TLSInfo{CertFile: s.zkCert, KeyFile: s.zkKey, TrustedCAFile: s.zkCA, ServerName: s.zkServerName}, zkTLSFlags, bound, err)
	case "consul":
		if s.consulServerName != "" && s.consulCA == "" && s.consulCert == "" && s.consulKey == "" {
			addr = "https://" + strings.TrimPrefix(addr, "https://")
		}
		return explainDial(addr, transport.TLSInfo{CertFile: s.consulCert, KeyFile: s.consulKey, TrustedCAFile: s.consulCA, ServerName: s.consulServerName}, consulTLSFlags, bound, err)
	}
	return err
}

// tlsFlagNames are the flags a TLS diagnosis tells the user to give
// (serverName "" when there is none).
type tlsFlagNames struct{ ca, cert, key, serverName string }

var (
	// clientTLSFlags are the client TLS flags of topoctl's commands.
	clientTLSFlags = tlsFlagNames{"--etcd-ca-file", "--etcd-cert-file", "--etcd-key-file", "--etcd-server-name"}
	// zkTLSFlags and consulTLSFlags are those of the other stores.
	zkTLSFlags     = tlsFlagNames{"--zk-ca-file", "--zk-cert-file", "--zk-key-file", "--zk-server-name"}
	consulTLSFlags = tlsFlagNames{"--consul-ca-file", "--consul-cert-file", "--consul-key-file", "--consul-server-name"}
	// serveTLSFlags are serve's, which a cluster node also uses as a
	// client.
	serveTLSFlags = tlsFlagNames{"--trusted-ca-file", "--cert-file", "--key-file", ""}
)

// explainDial is explainEtcdDial with the client TLS settings info (TLS
// is on when info names a file or addr an https URL), its probe bounded
// by bound (see tlsDiagnosis).
func explainDial(addr string, info transport.TLSInfo, flags tlsFlagNames, bound time.Duration, err error) error {
	var te *topo.Error
	if !errors.As(err, &te) || te.Code != topo.Unavailable {
		return err
	}
	hint := dialHint(addr, info, flags, bound)
	if hint == "" {
		return err
	}
	out := *te
	out.Err = fmt.Errorf("%w; %s", te.Err, hint)
	return &out
}

// dialHint is what tlsDiagnosis says of the first address of addr with
// the client TLS settings info (TLS is on when info names a file or addr
// an https URL), its probe bounded by bound; "" when it says nothing or
// info cannot be loaded.
func dialHint(addr string, info transport.TLSInfo, flags tlsFlagNames, bound time.Duration) string {
	ep, _, _ := strings.Cut(addr, ",")
	ep = strings.TrimSpace(ep)
	secure := strings.HasPrefix(ep, "https://") || info.CertFile != "" || info.KeyFile != "" || info.TrustedCAFile != ""
	ep = strings.TrimPrefix(strings.TrimPrefix(ep, "https://"), "http://")
	var cfg *tls.Config
	if secure {
		c, cerr := info.ClientConfig()
		if cerr != nil {
			return ""
		}
		cfg = c
	}
	return tlsDiagnosis(ep, cfg, info.CertFile, flags, bound)
}

// tlsDiagnosis probes the TLS handshake with ep (host:port), with cfg or,
// when cfg is nil (a plaintext client), with any TLS, and says what is
// wrong; "" when it finds nothing, cannot connect at all or gets no
// answer within bound, which covers the whole probe (a loaded server is
// not misreported as a failed handshake; no probe at all when bound is
// not positive). certFile is the client certificate's file ("" when none
// is given).
func tlsDiagnosis(ep string, cfg *tls.Config, certFile string, f tlsFlagNames, bound time.Duration) string {
	if bound <= 0 {
		return ""
	}
	deadline := time.Now().Add(bound)
	d := &net.Dialer{Deadline: deadline}
	if cfg == nil {
		c, err := tls.DialWithDialer(d, "tcp", ep, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only detects whether the server speaks TLS
		if err == nil {
			_ = c.Close()
			return fmt.Sprintf("the server at %s speaks TLS and this client plaintext: give %s (and %s and %s when it requires client certificates)", ep, f.ca, f.cert, f.key)
		}
		if strings.Contains(err.Error(), "remote error") {
			return fmt.Sprintf("the server at %s speaks TLS and this client plaintext: give %s, %s and %s", ep, f.ca, f.cert, f.key)
		}
		return ""
	}
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		host, _, _ := net.SplitHostPort(ep)
		cfg.ServerName = host
	}
	cfg.NextProtos = []string{"h2"}
	c, err := tls.DialWithDialer(d, "tcp", ep, cfg)
	if err == nil {
		// With TLS 1.3 a refused client certificate shows on the first
		// read.
		rd := time.Now().Add(500 * time.Millisecond)
		if rd.After(deadline) {
			rd = deadline
		}
		_ = c.SetReadDeadline(rd)
		var b [1]byte
		_, err = c.Read(b[:])
		_ = c.Close()
		var ne net.Error
		if err == nil || errors.Is(err, io.EOF) || (errors.As(err, &ne) && ne.Timeout()) {
			return ""
		}
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return "" // nothing listens: the caller's error says so
	}
	var te net.Error
	if errors.As(err, &te) && te.Timeout() {
		return "" // no answer within the bound: nothing to say of TLS
	}
	// A server refuses an expired or not yet valid client certificate
	// with an alert that does not say which (Go's says "expired" for
	// both, Java's "unknown certificate"): look at it here.
	if certFile != "" {
		if leaf, ok := certValidity(certFile); ok {
			now := time.Now()
			if now.After(leaf.NotAfter) {
				return fmt.Sprintf("this client's certificate (%s) expired at %s: issue a new one (the TLS handshake with %s failed: %s)", f.cert, leaf.NotAfter.UTC().Format(time.RFC3339), ep, err)
			}
			if now.Before(leaf.NotBefore) {
				return fmt.Sprintf("this client's certificate (%s) is not valid before %s: check this machine's clock or issue a new one (the TLS handshake with %s failed: %s)", f.cert, leaf.NotBefore.UTC().Format(time.RFC3339), ep, err)
			}
		}
	}
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ce x509.CertificateInvalidError
	msg := err.Error()
	switch {
	case errors.As(err, &ua):
		return fmt.Sprintf("the certificate of the server at %s is not signed by the CA of %s (%s)", ep, f.ca, err)
	case errors.As(err, &he):
		hint := "reach it at a name or IP its certificate holds"
		if f.serverName != "" {
			hint += ", or give " + f.serverName
		}
		return fmt.Sprintf("the certificate of the server at %s is not valid for that address (%s): %s", ep, err, hint)
	case errors.As(err, &ce):
		return fmt.Sprintf("the certificate of the server at %s is not valid (%s)", ep, err)
	case strings.Contains(msg, "certificate required"):
		return fmt.Sprintf("the server at %s requires a client certificate: give %s and %s with a certificate of its CA", ep, f.cert, f.key)
	case certFile == "" && (strings.Contains(msg, "bad certificate") || strings.Contains(msg, "unknown certificate")):
		// ZooKeeper (Java) refuses a missing certificate so.
		return fmt.Sprintf("the server at %s requires a client certificate: give %s and %s with a certificate of its CA (%s)", ep, f.cert, f.key, msg)
	case strings.Contains(msg, "bad certificate") || strings.Contains(msg, "unknown certificate") || strings.Contains(msg, "certificate unknown"):
		return fmt.Sprintf("the server at %s refused this client's certificate (%s): it is not signed by a CA the server trusts (%s)", ep, f.cert, msg)
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return fmt.Sprintf("the server at %s speaks plaintext, not TLS: drop %s, %s and %s", ep, f.ca, f.cert, f.key)
	}
	return fmt.Sprintf("the TLS handshake with %s failed: %s", ep, msg)
}

// certValidity reads the first certificate of the PEM file (false when it
// has none or cannot be read).
func certValidity(file string) (*x509.Certificate, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, false
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, false
		}
		if blk.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(blk.Bytes)
			return c, err == nil
		}
	}
}
