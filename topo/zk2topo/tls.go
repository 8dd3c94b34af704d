package zk2topo

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// tlsConfig builds the client TLS configuration of opts' TLS files.
func tlsConfig(opts Options) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: opts.TLSServerName}
	if opts.TLSCAFile != "" {
		pem, err := os.ReadFile(opts.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("zk2topo: TLS CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("zk2topo: TLS CA file %s holds no PEM certificate", opts.TLSCAFile)
		}
		cfg.RootCAs = pool
	}
	if (opts.TLSCertFile == "") != (opts.TLSKeyFile == "") {
		return nil, errors.New("zk2topo: TLSCertFile and TLSKeyFile go together")
	}
	if opts.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(opts.TLSCertFile, opts.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("zk2topo: TLS client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// tlsDialer returns a dialer that connects with base within the client
// library's timeout (1 s), then runs a TLS handshake with cfg over the
// connection, the whole within the larger of that timeout and handshake.
// The library gives a plain connection's session handshake far longer
// than 1 s to be answered; a TLS handshake is the first part of it and,
// against a loaded or distant server, may take longer than a TCP connect.
func tlsDialer(cfg *tls.Config, handshake time.Duration, base func(network, address string, timeout time.Duration) (net.Conn, error)) func(network, address string, timeout time.Duration) (net.Conn, error) {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		deadline := time.Now().Add(max(timeout, handshake))
		raw, err := base(network, address, timeout)
		if err != nil {
			return nil, err
		}
		c := cfg
		if c.ServerName == "" {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				host = address
			}
			c = cfg.Clone()
			c.ServerName = host
		}
		tc := tls.Client(raw, c)
		_ = tc.SetDeadline(deadline)
		if err := tc.Handshake(); err != nil {
			_ = raw.Close()
			return nil, fmt.Errorf("zk2topo: TLS handshake with %s: %w", address, err)
		}
		_ = tc.SetDeadline(time.Time{})
		return tc, nil
	}
}
