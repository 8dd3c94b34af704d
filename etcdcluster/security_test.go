package etcdcluster

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.uber.org/zap"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/internal/testpki"
)

// A decider's peer TLS check passes only for a volunteer whose peer
// address answers with a certificate of the peer CA and accepts the
// decider's, and only with the scheme of the decider's peer TLS.
func TestPeerTLSCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, caKey := testpki.Write(t, dir, "ca", nil, nil)
	testpki.Write(t, dir, "decider", ca, caKey)
	testpki.Write(t, dir, "good", ca, caKey)
	other, otherKey := testpki.Write(t, dir, "other-ca", nil, nil)
	testpki.Write(t, dir, "bad", other, otherKey)
	f := func(n string) string { return filepath.Join(dir, n) }
	peerTLS := func(name string) transport.TLSInfo {
		return transport.TLSInfo{CertFile: f(name + ".pem"), KeyFile: f(name + "-key.pem"), TrustedCAFile: f("ca.pem"), ClientCertAuth: true}
	}
	addrs, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	volunteer := func(name, addr string) *Node {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		n := &Node{cfg: Config{PeerURL: "https://" + addr, PeerTLS: peerTLS(name), EtcdLogger: zap.NewNop()}, log: slog.Default(), ctx: ctx}
		n.startProbe()
		require.NotNil(t, n.probe, "probe listening")
		t.Cleanup(n.stopProbe)
		return n
	}
	volunteer("good", addrs[0])
	volunteer("bad", addrs[1])

	dc := Config{PeerTLS: peerTLS("decider")}
	d := &Node{cfg: dc}
	d.peerTLS, err = dc.peerDialTLS()
	require.NoError(t, err)
	ctx := t.Context()
	require.NoError(t, d.peerReachable(ctx, "https://"+addrs[0]))
	require.ErrorIs(t, d.peerReachable(ctx, "https://"+addrs[1]), errPeerUnreachable, "a peer certificate of another CA")
	require.ErrorIs(t, d.peerReachable(ctx, "http://"+addrs[0]), errPeerUnreachable, "plaintext in a TLS cluster")

	// A decider whose own peer certificate the volunteer does not trust.
	bd := &Node{cfg: Config{PeerTLS: transport.TLSInfo{CertFile: f("bad.pem"), KeyFile: f("bad-key.pem"), TrustedCAFile: f("ca.pem")}}}
	bd.peerTLS, err = bd.cfg.peerDialTLS()
	require.NoError(t, err)
	require.ErrorIs(t, bd.peerReachable(ctx, "https://"+addrs[0]), errPeerUnreachable, "the volunteer refuses the decider's certificate")

	// Without peer TLS only http volunteers pass.
	plain := &Node{}
	require.NoError(t, plain.peerReachable(ctx, "http://127.0.0.1:1"))
	require.ErrorIs(t, plain.peerReachable(ctx, "https://"+addrs[0]), errPeerUnreachable)
}

// A node whose certificate is not valid for its (advertised) URL's host
// is refused before anything listens: no node or client that verifies
// certificates could reach it there, yet a joining node with such a
// client certificate would become a voter (its own client uses the
// seeds) that counts in every quorum, and one with such a peer
// certificate a learner the members cannot reach. The test certificates
// hold 127.0.0.1 and localhost only; the nodes listen on 127.0.0.2.
func TestCertificateNotForTheAdvertisedHost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, caKey := testpki.Write(t, dir, "ca", nil, nil)
	testpki.Write(t, dir, "n", ca, caKey)
	f := func(n string) string { return filepath.Join(dir, n) }
	info := transport.TLSInfo{CertFile: f("n.pem"), KeyFile: f("n-key.pem"), TrustedCAFile: f("ca.pem"), ClientCertAuth: true}
	tlsConfig := func(name string) Config {
		cfg := localConfig(t, name)
		cfg.ClientURL = strings.Replace(cfg.ClientURL, "http://", "https://", 1)
		cfg.PeerURL = strings.Replace(cfg.PeerURL, "http://", "https://", 1)
		cfg.ClientTLS, cfg.PeerTLS = info, info
		return cfg
	}
	a := startCfg(t, tlsConfig("a"))
	for _, of := range []string{"client", "peer"} {
		t.Run(of, func(t *testing.T) {
			cfg := tlsConfig("b-" + of)
			cfg.Seeds = []string{a.cfg.ClientURL}
			if of == "client" {
				cfg.ClientURL = strings.Replace(cfg.ClientURL, "127.0.0.1", "127.0.0.2", 1)
			} else {
				cfg.PeerURL = strings.Replace(cfg.PeerURL, "127.0.0.1", "127.0.0.2", 1)
			}
			ctx, cancel := context.WithTimeout(t.Context(), bound)
			defer cancel()
			n, err := Start(ctx, cfg)
			if err == nil {
				n.Close()
			}
			require.ErrorIs(t, err, ErrInvalidConfig)
			require.ErrorContains(t, err, "not valid for 127.0.0.2")
		})
	}
}
