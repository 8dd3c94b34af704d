package topoctl

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/internal/testpki"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// testPKI is a CA made for one test, with the certificates it issued, all
// as PEM files in dir: NAME.pem and NAME-key.pem (PKCS#8).
type testPKI struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// newTestPKI makes a CA (ca.pem) and has it issue "server" and "client"
// certificates, valid for 127.0.0.1 and localhost, plus "other", issued by
// another CA (other-ca.pem) that the servers do not trust.
func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	p.cert, p.key = p.issue(t, "ca", nil, nil)
	p.issue(t, "server", p.cert, p.key)
	p.issue(t, "client", p.cert, p.key)
	oc, ok := p.issue(t, "other-ca", nil, nil)
	p.issue(t, "other", oc, ok)
	testpki.WriteValidity(t, p.dir, "expired", p.cert, p.key, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	testpki.WriteValidity(t, p.dir, "future", p.cert, p.key, time.Now().Add(24*time.Hour), time.Now().Add(48*time.Hour))
	return p
}

// issue writes name.pem and name-key.pem: a certificate signed by parent
// (self-signed, a CA, when parent is nil).
func (p *testPKI) issue(t *testing.T, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	return testpki.Write(t, p.dir, name, parent, parentKey)
}

func (p *testPKI) path(name string) string { return filepath.Join(p.dir, name) }

// tlsCase is one way of giving a backend's TLS settings.
type tlsCase struct {
	name string
	args []string          // flags
	env  map[string]string // environment
	conf string            // a --config file's lines
	want string            // a refused setting: what its message says
}

// checkTLS runs put, get, ls and lock --try (naming the holder) over TLS
// with each working setting in good, and checks that each setting in bad
// is refused (exit 1, nothing written).
func checkTLS(t *testing.T, base target, good, bad []tlsCase) {
	for i, c := range good {
		t.Run(c.name, func(t *testing.T) {
			tg := c.target(t, base)
			tg.root = base.root + "/" + strings.ReplaceAll(c.name, " ", "-")
			tg.ok(t, append(c.args, "put", "/ks/f", "over TLS")...)
			assert.Equal(t, "over TLS", tg.ok(t, append(c.args, "get", "/ks/f")...))
			assert.Equal(t, "f\n", tg.ok(t, append(c.args, "ls", "/ks")...))
			// stat's metadata comes from a client of topoctl's own, with
			// the same TLS settings.
			assert.Contains(t, tg.ok(t, append(c.args, "stat", "/ks/f")...), " metadata:\n")
			if i == 0 {
				holder := tg.start(t, append(c.args, "lock", "/ks", "--", "sh", "-c", "echo held; exec sleep 600")...)
				holder.waitOutput(t, "held\n")
				tg.fails(t, 1, []string{"NodeExists", `held by someone else, by "topoctl lock on `, "echo held"},
					append(c.args, "lock", "--try", "/ks", "--", "true")...)
				assert.Equal(t, ExitInterrupted, holder.stop(t))
			}
		})
	}
	for _, c := range bad {
		t.Run("refused/"+c.name, func(t *testing.T) {
			tg := c.target(t, base)
			tg.root = base.root + "/refused"
			r := tg.run(t, "", append(append([]string{"--timeout", "3s"}, c.args...), "put", "/f", "x")...)
			assert.Equal(t, ExitFailure, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
			// consultopo's open reports a refused TLS handshake, and
			// plain HTTP on Consul's HTTPS port, as Unavailable.
			assert.Regexp(t, `^topoctl: (Unavailable|Timeout): `, r.stderr)
			// The message names the problem and what to do.
			assert.Contains(t, r.stderr, c.want)
		})
	}
	// Nothing was written by the refused runs.
	r := good[0].target(t, base).withRoot(base.root+"/refused").run(t, "", append(good[0].args, "get", "/f")...)
	assert.Equal(t, ExitFailure, r.code, r.stderr)
	assert.Contains(t, r.stderr, "NoNode")
}

func (c tlsCase) target(t *testing.T, base target) target {
	tg := base
	tg.env = c.env
	if c.conf != "" {
		f := filepath.Join(t.TempDir(), "topoctl.conf")
		require.NoError(t, os.WriteFile(f, []byte(c.conf), 0o600))
		tg.env = map[string]string{envConfig: f}
	}
	return tg
}

// TestTLSEtcd: every --etcd-* TLS flag, its variables (topoctl's and
// etcdctl's) and its --config setting, against an etcd that serves
// clients over TLS only and requires client certificates.
func TestTLSEtcd(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	addrs, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	m, err := etcdembed.Start(etcdembed.Config{
		Dir:       filepath.Join(t.TempDir(), "data"),
		ClientURL: "https://" + addrs[0],
		PeerURL:   "http://" + addrs[1],
		TickMs:    10, ElectionMs: 100, NoFsync: true,
		ClientTLS: transport.TLSInfo{
			CertFile:       pki.path("server.pem"),
			KeyFile:        pki.path("server-key.pem"),
			TrustedCAFile:  pki.path("ca.pem"),
			ClientCertAuth: true,
		},
	})
	require.NoError(t, err)
	t.Cleanup(m.Close)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, m.WaitReady(ctx))

	ca, crt, key := pki.path("ca.pem"), pki.path("client.pem"), pki.path("client-key.pem")
	flags := []string{"--etcd-ca-file", ca, "--etcd-cert-file", crt, "--etcd-key-file", key}
	checkTLS(t, target{impl: "etcd2", addr: m.ClientAddr(), root: "/tls"}, []tlsCase{
		{name: "flags", args: flags},
		{name: "server name", args: append(flags, "--etcd-server-name", "localhost")},
		{name: "topoctl env", env: map[string]string{"TOPOCTL_ETCD_CA_FILE": ca, "TOPOCTL_ETCD_CERT_FILE": crt, "TOPOCTL_ETCD_KEY_FILE": key, "TOPOCTL_ETCD_SERVER_NAME": "localhost"}},
		{name: "etcdctl env", env: map[string]string{"ETCDCTL_CACERT": ca, "ETCDCTL_CERT": crt, "ETCDCTL_KEY": key}},
		{name: "config", conf: "etcd-ca-file = " + ca + "\netcd-cert-file = " + crt + "\netcd-key-file = " + key + "\netcd-server-name = localhost\n"},
	}, []tlsCase{
		{name: "no TLS", want: "speaks TLS and this client plaintext: give --etcd-ca-file"},
		{name: "no client certificate", args: []string{"--etcd-ca-file", ca}, want: "requires a client certificate: give --etcd-cert-file and --etcd-key-file"},
		{name: "untrusted client certificate", args: []string{"--etcd-ca-file", ca, "--etcd-cert-file", pki.path("other.pem"), "--etcd-key-file", pki.path("other-key.pem")}, want: "refused this client's certificate (--etcd-cert-file): it is not signed by a CA the server trusts"},
		{name: "expired client certificate", args: []string{"--etcd-ca-file", ca, "--etcd-cert-file", pki.path("expired.pem"), "--etcd-key-file", pki.path("expired-key.pem")}, want: "this client's certificate (--etcd-cert-file) expired at "},
		{name: "future client certificate", args: []string{"--etcd-ca-file", ca, "--etcd-cert-file", pki.path("future.pem"), "--etcd-key-file", pki.path("future-key.pem")}, want: "this client's certificate (--etcd-cert-file) is not valid before "},
		{name: "server not trusted", args: []string{"--etcd-ca-file", pki.path("other-ca.pem"), "--etcd-cert-file", crt, "--etcd-key-file", key}, want: "is not signed by the CA of --etcd-ca-file"},
		{name: "wrong server name", args: append(flags, "--etcd-server-name", "not-the-server.example"), want: "is not valid for that address"},
	})
	// The cluster commands take the same flags and say the same of a
	// refused handshake (their client reports only a deadline passed).
	for _, c := range []struct {
		name, want string
		args       []string
	}{
		{"no TLS", "speaks TLS and this client plaintext: give --etcd-ca-file", nil},
		{"no client certificate", "requires a client certificate: give --etcd-cert-file and --etcd-key-file", []string{"--etcd-ca-file", ca}},
		{"server not trusted", "is not signed by the CA of --etcd-ca-file", []string{"--etcd-ca-file", pki.path("other-ca.pem"), "--etcd-cert-file", crt, "--etcd-key-file", key}},
	} {
		t.Run("cluster status refused/"+c.name, func(t *testing.T) {
			tg := target{impl: "etcd2", addr: m.ClientAddr(), root: "/tls"}
			tg.fails(t, ExitFailure, []string{c.want}, append(c.args, "--timeout", "3s", "cluster", "status")...)
		})
	}
	// A cluster node given an http:// seed where clients are served over
	// TLS says so and exits, instead of waiting for a member there.
	t.Run("serve --seeds http:// refused", func(t *testing.T) {
		own, err := etcdembed.FreeAddrs(2)
		require.NoError(t, err)
		tg := target{impl: "etcd2", addr: m.ClientAddr(), root: "/tls"}
		bg := tg.start(t, "serve", "--seeds", "http://"+m.ClientAddr(), "--name", "n", "--data-dir", t.TempDir(),
			"--listen-client-address", own[0], "--listen-peer-address", own[1])
		assert.Equal(t, ExitFailure, bg.wait(t), bg.stderr.String())
		assert.Contains(t, bg.stderr.String(), "speaks TLS and this client plaintext: give --trusted-ca-file")
	})
}

// TestTLSZooKeeper: every --zk-* TLS flag, its variable and its --config
// setting, against a ZooKeeper 3.8 secureClientPort that requires client
// certificates (zktest.StartTLS).
func TestTLSZooKeeper(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	keyStore := pki.path("server-keystore.pem")
	k, err := os.ReadFile(pki.path("server-key.pem"))
	require.NoError(t, err)
	c, err := os.ReadFile(pki.path("server.pem"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyStore, append(k, c...), 0o600))
	srv := zktest.StartTLS(t, zktest.TLSFiles{KeyStore: keyStore, TrustStore: pki.path("ca.pem")})

	ca, crt, key := pki.path("ca.pem"), pki.path("client.pem"), pki.path("client-key.pem")
	flags := []string{"--zk-ca-file", ca, "--zk-cert-file", crt, "--zk-key-file", key}
	checkTLS(t, target{impl: "zk2", addr: srv.SecureAddr(), root: "/tls"}, []tlsCase{
		{name: "flags", args: flags},
		{name: "server name", args: append(flags, "--zk-server-name", "localhost")},
		{name: "env", env: map[string]string{"TOPOCTL_ZK_CA_FILE": ca, "TOPOCTL_ZK_CERT_FILE": crt, "TOPOCTL_ZK_KEY_FILE": key, "TOPOCTL_ZK_SERVER_NAME": "localhost"}},
		{name: "config", conf: "zk-ca-file = " + ca + "\nzk-cert-file = " + crt + "\nzk-key-file = " + key + "\nzk-server-name = localhost\n"},
	}, []tlsCase{
		{name: "no TLS", want: "speaks TLS and this client plaintext: give --zk-ca-file"},
		{name: "no client certificate", args: []string{"--zk-ca-file", ca}, want: "requires a client certificate: give --zk-cert-file and --zk-key-file"},
		{name: "untrusted client certificate", args: []string{"--zk-ca-file", ca, "--zk-cert-file", pki.path("other.pem"), "--zk-key-file", pki.path("other-key.pem")}, want: "refused this client's certificate (--zk-cert-file): it is not signed by a CA the server trusts"},
		{name: "expired client certificate", args: []string{"--zk-ca-file", ca, "--zk-cert-file", pki.path("expired.pem"), "--zk-key-file", pki.path("expired-key.pem")}, want: "this client's certificate (--zk-cert-file) expired at "},
		{name: "future client certificate", args: []string{"--zk-ca-file", ca, "--zk-cert-file", pki.path("future.pem"), "--zk-key-file", pki.path("future-key.pem")}, want: "this client's certificate (--zk-cert-file) is not valid before "},
		{name: "server not trusted", args: []string{"--zk-ca-file", pki.path("other-ca.pem"), "--zk-cert-file", crt, "--zk-key-file", key}, want: "is not signed by the CA of --zk-ca-file"},
		{name: "wrong server name", args: append(flags, "--zk-server-name", "not-the-server.example"), want: "is not valid for that address"},
	})
}

// startConsulTLS runs a Consul dev agent (consultest's binary) that serves
// its HTTP API over TLS on the returned address, requiring client
// certificates signed by pki's CA (tls.defaults.verify_incoming), with
// pki's server certificate. Its plain HTTP port stays open for the
// readiness check only. The agent is killed when the test ends.
func startConsulTLS(t *testing.T, pki *testPKI) string {
	t.Helper()
	return consultest.StartAgentWithOptions(t, consultest.AgentOptions{TLS: &consultest.TLSFiles{
		CAFile:   pki.path("ca.pem"),
		CertFile: pki.path("server.pem"),
		KeyFile:  pki.path("server-key.pem"),
	}}).HTTPSAddr()
}

// TestTLSConsul: every --consul-* TLS flag, its variables (topoctl's and
// consul's own) and its --config setting, against a Consul agent serving
// HTTPS that requires client certificates.
func TestTLSConsul(t *testing.T) {
	t.Parallel()
	pki := newTestPKI(t)
	addr := startConsulTLS(t, pki)
	ca, crt, key := pki.path("ca.pem"), pki.path("client.pem"), pki.path("client-key.pem")
	flags := []string{"--consul-ca-file", ca, "--consul-cert-file", crt, "--consul-key-file", key}
	checkTLS(t, target{impl: "consul", addr: addr, root: "tls"}, []tlsCase{
		{name: "flags", args: flags},
		{name: "topoctl env", env: map[string]string{"TOPOCTL_CONSUL_CA_FILE": ca, "TOPOCTL_CONSUL_CERT_FILE": crt, "TOPOCTL_CONSUL_KEY_FILE": key}},
		{name: "consul env", env: map[string]string{"CONSUL_CACERT": ca, "CONSUL_CLIENT_CERT": crt, "CONSUL_CLIENT_KEY": key}},
		{name: "config", conf: "consul-ca-file = " + ca + "\nconsul-cert-file = " + crt + "\nconsul-key-file = " + key + "\n"},
		{name: "server name", args: append(flags, "--consul-server-name", "localhost")},
		{name: "server name env", args: flags, env: map[string]string{"CONSUL_TLS_SERVER_NAME": "localhost"}},
	}, []tlsCase{
		{name: "no TLS", want: "speaks TLS and this client plaintext: give --consul-ca-file"},
		{name: "wrong server name", args: append(flags, "--consul-server-name", "not-the-server.example"), want: "is not valid for that address"},
		{name: "no client certificate", args: []string{"--consul-ca-file", ca}, want: "requires a client certificate: give --consul-cert-file and --consul-key-file"},
		{name: "untrusted client certificate", args: []string{"--consul-ca-file", ca, "--consul-cert-file", pki.path("other.pem"), "--consul-key-file", pki.path("other-key.pem")}, want: "refused this client's certificate (--consul-cert-file): it is not signed by a CA the server trusts"},
		{name: "expired client certificate", args: []string{"--consul-ca-file", ca, "--consul-cert-file", pki.path("expired.pem"), "--consul-key-file", pki.path("expired-key.pem")}, want: "this client's certificate (--consul-cert-file) expired at "},
		{name: "future client certificate", args: []string{"--consul-ca-file", ca, "--consul-cert-file", pki.path("future.pem"), "--consul-key-file", pki.path("future-key.pem")}, want: "this client's certificate (--consul-cert-file) is not valid before "},
		{name: "server not trusted", args: []string{"--consul-ca-file", pki.path("other-ca.pem"), "--consul-cert-file", crt, "--consul-key-file", key}, want: "is not signed by the CA of --consul-ca-file"},
	})
}

// TestUITLSFlagsChecked: ui's TLS certificate and key are checked before
// anything is opened or printed: one without the other, a missing file
// and a key of another certificate are usage errors naming the flags,
// not a URL printed and then "open : no such file or directory".
func TestUITLSFlagsChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, caKey := testpki.Write(t, dir, "ca", nil, nil)
	testpki.Write(t, dir, "server", ca, caKey)
	testpki.Write(t, dir, "other", ca, caKey)
	cert, key, otherKey := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"), filepath.Join(dir, "other-key.pem")
	tg := target{impl: "memory", addr: "ui-tlsflags", root: defaultRoot}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--tls-cert-file", cert}, []string{"--tls-cert-file and --tls-key-file"}},
		{[]string{"--tls-key-file", key}, []string{"--tls-cert-file and --tls-key-file"}},
		{[]string{"--tls-cert-file", filepath.Join(dir, "absent.pem"), "--tls-key-file", key}, []string{"--tls-cert-file", "absent.pem"}},
		{[]string{"--tls-cert-file", cert, "--tls-key-file", otherKey}, []string{"--tls-cert-file", "--tls-key-file", "does not match"}},
	} {
		r := tg.fails(t, 2, c.want, append([]string{"ui", "--listen", "127.0.0.1:0"}, c.args...)...)
		assert.Empty(t, r.stdout, "%v: nothing is served, so no URL is printed", c.args)
	}
}
