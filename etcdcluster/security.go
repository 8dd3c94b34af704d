package etcdcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/internal/etcdembed"
)

// enableAuth turns etcd auth on in the cluster this node just
// bootstrapped, with the root user's password cfg.Password.
func (n *Node) enableAuth(ctx context.Context) error {
	opts := n.cfg.clientOptions()
	opts.Username, opts.Password = "", ""
	cc, err := opts.config([]string{n.cfg.AdvertiseClientURL}, 5*time.Second)
	if err != nil {
		return err
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return fmt.Errorf("etcdcluster: enabling auth: %w", err)
	}
	defer cli.Close()
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := etcdembed.EnableAuth(actx, cli, n.cfg.Password); err != nil {
		return fmt.Errorf("etcdcluster: %w", err)
	}
	n.log.Info("etcd authentication enabled (user root)")
	return nil
}

// startProbe listens on the peer address while the node is not a member
// and peer TLS is on, completing TLS handshakes with the member's peer
// settings (a peer certificate signed by the peer CA is required when
// PeerTLS.ClientCertAuth is set) and closing each connection: the
// decider's check that it can reach the volunteer over peer TLS.
func (n *Node) startProbe() {
	if !serverTLSOn(n.cfg.PeerTLS) {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.probe != nil || n.srv != nil || n.ctx.Err() != nil {
		return
	}
	u, err := url.Parse(n.cfg.PeerURL)
	if err != nil {
		return
	}
	info := n.cfg.PeerTLS
	info.Logger = n.cfg.EtcdLogger
	tc, err := info.ServerConfig()
	if err != nil {
		n.log.Warn("peer TLS settings", "err", err)
		return
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		n.log.Debug("peer address probe listener", "err", err)
		return
	}
	n.probe = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tlc := tls.Server(c, tc)
				_ = tlc.SetDeadline(time.Now().Add(5 * time.Second))
				if err := tlc.Handshake(); err != nil {
					n.log.Debug("peer TLS check refused", "remote", c.RemoteAddr().String(), "err", err)
				}
			}()
		}
	}()
}

// stopProbe closes the probe listener, if any, freeing the peer address.
func (n *Node) stopProbe() {
	n.mu.Lock()
	ln := n.probe
	n.probe = nil
	n.mu.Unlock()
	if ln != nil {
		_ = ln.Close()
	}
}

// errPeerUnreachable is wrapped by peerReachable's error.
var errPeerUnreachable = errors.New("etcdcluster: volunteer's peer address fails the peer TLS check")

// peerReachable checks that the decider could reach peerURL as etcd's
// peer transport would: with peer TLS, a TLS handshake with the
// decider's peer certificate that verifies the volunteer's certificate
// against the peer CA (and the volunteer verifies the decider's); the
// scheme must match the decider's peer TLS.
func (n *Node) peerReachable(ctx context.Context, peerURL string) error {
	u, err := url.Parse(peerURL)
	if err != nil {
		return fmt.Errorf("%w: %w", errPeerUnreachable, err)
	}
	if n.peerTLS == nil {
		if u.Scheme != "http" {
			return fmt.Errorf("%w: %s is not http, and this cluster's peers do not use TLS", errPeerUnreachable, peerURL)
		}
		return nil
	}
	if u.Scheme != "https" {
		return fmt.Errorf("%w: %s is not https, and this cluster's peers use TLS", errPeerUnreachable, peerURL)
	}
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	d := tls.Dialer{Config: n.peerTLS}
	c, err := d.DialContext(dctx, "tcp", u.Host)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", errPeerUnreachable, peerURL, err)
	}
	// A TLS 1.3 client learns that the server refused its certificate
	// only on its first read.
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	var b [1]byte
	_, rerr := c.Read(b[:])
	_ = c.Close()
	if rerr != nil && !isEOFOrTimeout(rerr) {
		return fmt.Errorf("%w: %s: %w", errPeerUnreachable, peerURL, rerr)
	}
	return nil
}

func isEOFOrTimeout(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, io.EOF)
}

// checkCertHosts refuses (ErrInvalidConfig) a client or peer certificate
// that is not valid for the host of the node's advertised client or peer
// URL: the other nodes and the clients verify it against that host, so
// such a member could be reached by none of them.
func checkCertHosts(cfg Config) error {
	for _, c := range []struct {
		info transport.TLSInfo
		url  string
		of   string
	}{{cfg.ClientTLS, cfg.AdvertiseClientURL, "client"}, {cfg.PeerTLS, cfg.AdvertisePeerURL, "peer"}} {
		if c.info.CertFile == "" {
			continue
		}
		pair, err := tls.LoadX509KeyPair(c.info.CertFile, c.info.KeyFile)
		if err != nil {
			return fmt.Errorf("%w: %s TLS: %w", ErrInvalidConfig, c.of, err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			return fmt.Errorf("%w: %s TLS: %s: %w", ErrInvalidConfig, c.of, c.info.CertFile, err)
		}
		u, err := url.Parse(c.url)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		if err := leaf.VerifyHostname(u.Hostname()); err != nil {
			return fmt.Errorf("%w: the %s certificate %s is not valid for %s, the host of the %s URL %s, so no node or client could verify this member there (%w): issue one for that host",
				ErrInvalidConfig, c.of, c.info.CertFile, u.Hostname(), c.of, c.url, err)
		}
	}
	return nil
}
