package topoctl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/topokit/topokit/internal/certs"
	"github.com/topokit/topokit/internal/etcdembed"
)

// serveEnv clears the connection variables for serve processes.
var serveEnv = []string{envImplementation + "=", envServerAddress + "=", envRoot + "=", envCell + "=", envDataDir + "=", envRootPassword + "="}

// tlsTool runs "topoctl tls" in-process and requires success.
func tlsTool(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb syncBuffer
	code := runMain(t.Context(), append([]string{"tls"}, args...), streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	require.Equal(t, 0, code, "topoctl tls %v: %s", args, errb.String())
	return out.String()
}

// tlsToolFails runs "topoctl tls" and requires exit code code and stderr
// containing want.
func tlsToolFails(t *testing.T, code int, want string, args ...string) {
	t.Helper()
	var out, errb syncBuffer
	got := runMain(t.Context(), append([]string{"tls"}, args...), streams{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb})
	require.Equal(t, code, got, "topoctl tls %v: %s", args, errb.String())
	require.Contains(t, errb.String(), want)
}

// "topoctl tls" writes a CA and server, client and peer certificates with
// the right usages, 0600 keys, ECDSA P-256 or Ed25519, and never
// overwrites a file.
func TestTLSCreate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tlsToolFails(t, 1, filepath.Join(dir, "ca.pem"), "cert", "create", "--server", "n1", "--dir", dir)
	tlsToolFails(t, 1, `no CA in `+dir+`: make one first with "topoctl tls ca create --dir `+dir+`"`, "cert", "create", "--server", "n1", "--dir", dir)
	tlsTool(t, "ca", "create", "--dir", dir)
	out := tlsTool(t, "cert", "create", "--server", "n1", "--ip", "10.1.2.3", "--dns", "n1.example.com", "--dir", dir)
	assert.Contains(t, out, "10.1.2.3")
	tlsTool(t, "cert", "create", "--client", "app", "--dir", dir, "--key-type", certs.Ed25519)
	tlsTool(t, "cert", "create", "--peer", "n1-peer", "--dir", dir)

	for _, k := range []string{"ca-key.pem", "n1-key.pem", "app-key.pem", "n1-peer-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, k))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), k)
	}
	ca, err := certs.ReadCert(filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	assert.True(t, ca.IsCA)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	usages := map[string][]x509.ExtKeyUsage{
		"n1":      {x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		"n1-peer": {x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		"app":     {x509.ExtKeyUsageClientAuth},
	}
	for name, want := range usages {
		c, err := certs.ReadCert(filepath.Join(dir, name+".pem"))
		require.NoError(t, err)
		assert.Equal(t, want, c.ExtKeyUsage, name)
		assert.Equal(t, name, c.Subject.CommonName)
		_, err = c.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: want})
		assert.NoError(t, err, name)
		_, err = tls.LoadX509KeyPair(filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem"))
		assert.NoError(t, err, name)
		assert.True(t, c.NotAfter.Before(time.Now().AddDate(1, 0, 2)), "%s lasts about a year", name)
	}
	n1, err := certs.ReadCert(filepath.Join(dir, "n1.pem"))
	require.NoError(t, err)
	assert.NoError(t, n1.VerifyHostname("10.1.2.3"))
	assert.NoError(t, n1.VerifyHostname("n1.example.com"))
	assert.NoError(t, n1.VerifyHostname("127.0.0.1"))

	before, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	require.NoError(t, err)
	tlsToolFails(t, 2, "never overwritten", "ca", "create", "--dir", dir)
	tlsToolFails(t, 2, "n1.pem", "cert", "create", "--client", "n1", "--dir", dir)
	after, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	require.NoError(t, err)
	assert.Equal(t, before, after)
	tlsToolFails(t, 2, "exactly one", "cert", "create", "--server", "a", "--client", "b", "--dir", dir)

	// The current directory is the default.
	wd := t.TempDir()
	cmd := exec.Command(os.Args[0], "tls", "ca", "create")
	cmd.Dir = wd
	cmd.Env = append(append(os.Environ(), runMainEnv+"=1"), serveEnv...)
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, string(b))
	_, err = os.Stat(filepath.Join(wd, "ca.pem"))
	assert.NoError(t, err)
}

// A --days of 0 or less is a usage error that writes nothing: it used to
// give the default lifetime (5 years for a CA, one for a certificate)
// without a word.
func TestTLSCreateRefusesBadDays(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, days := range []string{"0", "-1"} {
		tlsToolFails(t, 2, "--days "+days+": want at least 1", "ca", "create", "--dir", dir, "--days", days)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "a refused ca create wrote files")
	tlsTool(t, "ca", "create", "--dir", dir)
	for _, days := range []string{"0", "-5"} {
		tlsToolFails(t, 2, "--days "+days+": want at least 1", "cert", "create", "--server", "n1", "--dir", dir, "--days", days)
	}
	_, err = os.Stat(filepath.Join(dir, "n1.pem"))
	require.ErrorIs(t, err, fs.ErrNotExist, "a refused cert create wrote n1.pem")
}

// pki is a CA made by "topoctl tls", and a second one the cluster does
// not trust.
type pki struct{ dir, other string }

func newPKI(t *testing.T) pki {
	t.Helper()
	p := pki{dir: t.TempDir(), other: t.TempDir()}
	tlsTool(t, "ca", "create", "--dir", p.dir)
	tlsTool(t, "ca", "create", "--dir", p.other)
	return p
}

func (p pki) f(name string) string { return filepath.Join(p.dir, name) }

// nodeFlags are the serve flags of a node named name with client and peer
// TLS and certificate auth, its certificates issued by the CA in dir.
func nodeFlags(t *testing.T, dir, caDir, name string) []string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, name+".pem")); err != nil {
		tlsTool(t, "cert", "create", "--server", name, "--dir", dir, "--ca-dir", caDir)
		tlsTool(t, "cert", "create", "--peer", name+"-peer", "--dir", dir, "--ca-dir", caDir)
	}
	return []string{
		"--cert-file", filepath.Join(dir, name+".pem"), "--key-file", filepath.Join(dir, name+"-key.pem"),
		"--trusted-ca-file", filepath.Join(caDir, "ca.pem"), "--client-cert-auth",
		"--peer-cert-file", filepath.Join(dir, name+"-peer.pem"), "--peer-key-file", filepath.Join(dir, name+"-peer-key.pem"),
		"--peer-trusted-ca-file", filepath.Join(caDir, "ca.pem"), "--peer-client-cert-auth",
	}
}

// serve refuses a non-loopback listen address without TLS and
// certificate auth, and an unspecified one without an advertised URL,
// before it creates or listens on anything.
func TestServeRefusesPlaintextOffLoopback(t *testing.T) {
	t.Parallel()
	tg := target{impl: "etcd2", addr: "127.0.0.1:1", root: defaultRoot}
	p := newPKI(t)
	tlsTool(t, "cert", "create", "--server", "n1", "--dir", p.dir)
	dataDir := filepath.Join(t.TempDir(), "d")
	tg.fails(t, 2, []string{"refusing to listen off the loopback", "0.0.0.0:2379", "read and write every key", "topoctl tls", "--insecure"},
		"serve", "--data-dir", dataDir, "--listen-client-address", "0.0.0.0:2379")
	tg.fails(t, 2, []string{"refusing", "peer address 192.0.2.1:2380", "raft peer"},
		"serve", "--cluster", "--name", "n", "--data-dir", dataDir, "--listen-client-address", "127.0.0.1:2379", "--listen-peer-address", "192.0.2.1:2380")
	// TLS without client-certificate auth still lets anyone in.
	tg.fails(t, 2, []string{"refusing", "--client-cert-auth"},
		"serve", "--data-dir", dataDir, "--listen-client-address", "192.0.2.1:2379", "--cert-file", p.f("n1.pem"), "--key-file", p.f("n1-key.pem"))
	// Every interface: an advertised URL is required, even with --insecure.
	tg.fails(t, 2, []string{"--advertise-client-url http://HOST:2379"},
		"serve", "--insecure", "--data-dir", dataDir, "--listen-client-address", "0.0.0.0:2379")
	tg.fails(t, 2, []string{"--advertise-client-url https://HOST:2379"},
		"serve", "--data-dir", dataDir, "--listen-client-address", "0.0.0.0:2379",
		"--cert-file", p.f("n1.pem"), "--key-file", p.f("n1-key.pem"), "--trusted-ca-file", p.f("ca.pem"), "--client-cert-auth")
	tg.fails(t, 2, []string{"--advertise-peer-url https://HOST:2380"},
		"serve", "--cluster", "--name", "n", "--data-dir", dataDir, "--listen-peer-address", "0.0.0.0:2380",
		"--peer-cert-file", p.f("n1.pem"), "--peer-key-file", p.f("n1-key.pem"), "--peer-trusted-ca-file", p.f("ca.pem"), "--peer-client-cert-auth")
	tg.fails(t, 2, []string{"is no address others can dial"},
		"serve", "--insecure", "--data-dir", dataDir, "--listen-client-address", "0.0.0.0:2379", "--advertise-client-url", "http://0.0.0.0:2379")
	_, err := os.Stat(dataDir)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing was created")
}

// Bad TLS and auth input: missing or unreadable files, a key that does
// not match its certificate, an expired certificate, a wrong root
// password: a clear error naming the file, and the node does not start.
func TestServeTLSBadInput(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	tlsTool(t, "cert", "create", "--server", "n1", "--dir", p.dir)
	tlsTool(t, "cert", "create", "--server", "n2", "--dir", p.dir)
	// An expired certificate, from a CA made two years ago.
	old := t.TempDir()
	_, err := certs.CreateCA(old, "", certs.Options{Now: time.Now().AddDate(-2, 0, 0)})
	require.NoError(t, err)
	_, err = certs.CreateCert(old, old, "expired", certs.Server, nil, nil, certs.Options{Now: time.Now().AddDate(-2, 0, 0), Days: 30})
	require.NoError(t, err)
	unreadable := filepath.Join(t.TempDir(), "unreadable.pem")
	require.NoError(t, os.WriteFile(unreadable, []byte("not PEM"), 0o600))
	addrs, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	tg := target{impl: "etcd2", addr: addrs[0], root: defaultRoot}
	base := func(d string) []string {
		return []string{"serve", "--data-dir", d, "--listen-client-address", addrs[0], "--listen-peer-address", addrs[1]}
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"missing cert", []string{"--cert-file", p.f("nope.pem"), "--key-file", p.f("n1-key.pem")}, []string{p.f("nope.pem"), "no such file"}},
		{"missing key", []string{"--cert-file", p.f("n1.pem"), "--key-file", p.f("nope-key.pem")}, []string{p.f("nope-key.pem")}},
		{"not PEM", []string{"--cert-file", unreadable, "--key-file", p.f("n1-key.pem")}, []string{unreadable, "no PEM certificate"}},
		{"mismatched key", []string{"--cert-file", p.f("n1.pem"), "--key-file", p.f("n2-key.pem")}, []string{p.f("n2-key.pem"), p.f("n1.pem"), "does not match"}},
		{"expired", []string{"--cert-file", filepath.Join(old, "expired.pem"), "--key-file", filepath.Join(old, "expired-key.pem")}, []string{filepath.Join(old, "expired.pem"), "expired"}},
		{"missing CA", []string{"--cert-file", p.f("n1.pem"), "--key-file", p.f("n1-key.pem"), "--trusted-ca-file", p.f("nope-ca.pem")}, []string{p.f("nope-ca.pem")}},
		{"missing peer key", []string{"--peer-cert-file", p.f("n1.pem"), "--peer-key-file", p.f("nope-key.pem")}, []string{"--peer-cert-file", p.f("nope-key.pem")}},
		{"missing password file", []string{"--auth", "--root-password-file", pwFile}, []string{pwFile}},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "d")
			r := tg.run(t, "", append(base(d), c.args...)...)
			require.NotEqual(t, 0, r.code, r.stdout)
			for _, w := range c.want {
				assert.Contains(t, r.stderr, w)
			}
			assert.NotContains(t, r.stdout, "ready")
			_, err := os.Stat(filepath.Join(d, "member"))
			assert.ErrorIs(t, err, os.ErrNotExist, "the node did not start")
		})
	}
	tg.fails(t, 2, []string{"--cert-file and --key-file go together"}, append(base(t.TempDir()), "--cert-file", p.f("n1.pem"))...)
	tg.fails(t, 2, []string{"--client-cert-auth needs --trusted-ca-file"}, append(base(t.TempDir()), "--cert-file", p.f("n1.pem"), "--key-file", p.f("n1-key.pem"), "--client-cert-auth")...)
}

// clientTLS is a TLS client configuration with the CA and, when name is
// set, the client certificate name of dir.
func clientTLS(t *testing.T, caDir, dir, name string) *tls.Config {
	t.Helper()
	info := transport.TLSInfo{TrustedCAFile: filepath.Join(caDir, "ca.pem")}
	if name != "" {
		info.CertFile, info.KeyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	}
	c, err := info.ClientConfig()
	require.NoError(t, err)
	return c
}

// A three-node cluster with client and peer certificate auth, its
// certificates made by "topoctl tls", forms and grows; clients without a
// certificate, with one of another CA, or in plaintext are refused with a
// clear error and write nothing; a node without the cluster's client
// credentials cannot volunteer, one without its peer credentials is never
// nominated; a node's certificate rotated on disk is served without a
// restart.
func TestServeTLSCluster(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	certDir := t.TempDir()
	tlsTool(t, "cert", "create", "--client", "admin", "--dir", certDir, "--ca-dir", p.dir)
	tlsTool(t, "cert", "create", "--client", "stranger", "--dir", certDir, "--ca-dir", p.other)
	addrs, err := etcdembed.FreeAddrs(12)
	require.NoError(t, err)
	start := func(name string, i int, extra ...string) *proc {
		args := append([]string{"--log-level", "info", "serve", "--name", name, "--data-dir", t.TempDir(),
			"--listen-client-address", addrs[2*i], "--listen-peer-address", addrs[2*i+1]}, extra...)
		return startProcess(t, serveEnv, args...)
	}
	n1 := start("n1", 0, append([]string{"--cluster"}, nodeFlags(t, certDir, p.dir, "n1")...)...)
	l := n1.waitLine(t, "client URL:")
	assert.Contains(t, l, "https://"+addrs[0])
	n1.waitLine(t, "cluster status")

	admin := []string{"--etcd-ca-file", p.f("ca.pem"), "--etcd-cert-file", filepath.Join(certDir, "admin.pem"), "--etcd-key-file", filepath.Join(certDir, "admin-key.pem")}
	tg := target{impl: "etcd2", addr: addrs[0], root: defaultRoot}
	status := func() clusterStatusJSON { return clusterStatus(t, tg, admin...) }
	seeds := "https://" + addrs[0]
	n2 := start("n2", 1, append([]string{"--seeds", seeds}, nodeFlags(t, certDir, p.dir, "n2")...)...)
	n3 := start("n3", 2, append([]string{"--seeds", seeds}, nodeFlags(t, certDir, p.dir, "n3")...)...)
	require.Eventually(t, func() bool { st := status(); return voters(st) == 3 && st.Quorum }, 3*time.Minute, 200*time.Millisecond,
		"n1: %s\nn2: %s\nn3: %s", n1.errb.String(), n2.errb.String(), n3.errb.String())

	// Clients without the cluster's credentials.
	_ = tg.ok(t, append(admin, "put", "/ok", "v")...)
	tg.fails(t, 1, []string{"requires a client certificate"}, "--timeout", "5s", "--etcd-ca-file", p.f("ca.pem"), "put", "/nocert", "v")
	tg.fails(t, 1, []string{"refused this client's certificate"}, "--timeout", "5s", "--etcd-ca-file", p.f("ca.pem"),
		"--etcd-cert-file", filepath.Join(certDir, "stranger.pem"), "--etcd-key-file", filepath.Join(certDir, "stranger-key.pem"), "put", "/stranger", "v")
	tg.fails(t, 1, []string{"speaks TLS and this client plaintext"}, "--timeout", "5s", "put", "/plain", "v")
	tg.fails(t, 1, []string{"NoNode"}, append(admin, "get", "/nocert")...)
	tg.fails(t, 1, []string{"NoNode"}, append(admin, "get", "/stranger")...)
	tg.fails(t, 1, []string{"NoNode"}, append(admin, "get", "/plain")...)

	// Grow to four; two nodes without the cluster's credentials try to
	// join first. "a-outsider" has no certificate of the cluster's CA at
	// all; "a-badpeer" has a client certificate of the cluster (so it can
	// volunteer) but a peer certificate of another CA: it sorts first, so
	// a decider that nominated by name alone would pick it.
	_ = tg.ok(t, append(admin, "cluster", "size", "4")...)
	outsider := start("a-outsider", 3, append([]string{"--seeds", seeds}, nodeFlags(t, filepath.Join(t.TempDir()), p.other, "a-outsider")...)...)
	badDir := t.TempDir()
	tlsTool(t, "cert", "create", "--server", "a-badpeer", "--dir", badDir, "--ca-dir", p.dir)
	tlsTool(t, "cert", "create", "--peer", "a-badpeer-peer", "--dir", badDir, "--ca-dir", p.other)
	bad := start("a-badpeer", 4, "--seeds", seeds,
		"--cert-file", filepath.Join(badDir, "a-badpeer.pem"), "--key-file", filepath.Join(badDir, "a-badpeer-key.pem"),
		"--trusted-ca-file", p.f("ca.pem"), "--client-cert-auth",
		"--peer-cert-file", filepath.Join(badDir, "a-badpeer-peer.pem"), "--peer-key-file", filepath.Join(badDir, "a-badpeer-peer-key.pem"),
		"--peer-trusted-ca-file", p.f("ca.pem"), "--peer-client-cert-auth")
	require.Eventually(t, func() bool { return slices.Contains(status().Volunteers, "a-badpeer") }, time.Minute, 200*time.Millisecond, "a-badpeer: %s", bad.errb.String())
	n4Flags := nodeFlags(t, certDir, p.dir, "n4")
	n4 := start("n4", 5, append([]string{"--seeds", seeds}, n4Flags...)...)
	require.Eventually(t, func() bool {
		st := status()
		for _, m := range st.Members {
			require.NotContains(t, []string{"a-outsider", "a-badpeer"}, m.Name, "an outsider became a member")
			require.NotContains(t, m.PeerURLs, "https://"+addrs[9], "a-badpeer was added as a learner")
		}
		return voters(st) == 4 && st.Quorum
	}, 3*time.Minute, 200*time.Millisecond, "n4: %s", n4.errb.String())
	st := status()
	assert.NotContains(t, st.Volunteers, "a-outsider", "a node without a client certificate of the cluster cannot volunteer")
	assert.Contains(t, st.Volunteers, "a-badpeer")
	for _, m := range st.Members {
		assert.NotContains(t, m.PeerURLs, "https://"+addrs[7])
		assert.NotContains(t, m.PeerURLs, "https://"+addrs[9])
	}
	assert.NotContains(t, bad.errb.String(), "embedded etcd server started")
	logs := n1.errb.String() + n2.errb.String() + n3.errb.String() + n4.errb.String()
	assert.Contains(t, logs, "not nominating a volunteer whose peer address fails the peer TLS check")
	<-outsider.done
	assert.NotEqual(t, 0, outsider.cmd.ProcessState.ExitCode(), "a node without the cluster's credentials cannot even connect")
	assert.NotContains(t, outsider.errb.String(), "embedded etcd server started")
	assert.Contains(t, outsider.errb.String(), "is not signed by the CA of --trusted-ca-file", "it says why")
	assert.NotContains(t, outsider.errb.String(), "/https://", "the seed is named as its URL, not as a path")

	// Rotation: a new certificate for n1, written over the old files, is
	// what n1 serves on the next handshake, without a restart.
	// The same for its peer certificate.
	served := func(addr string) *x509.Certificate {
		c, err := tls.Dial("tcp", addr, clientTLS(t, p.dir, certDir, "admin"))
		require.NoError(t, err)
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0]
	}
	for _, r := range []struct{ kind, name, addr string }{{"--server", "n1", addrs[0]}, {"--peer", "n1-peer", addrs[1]}} {
		oldSerial := served(r.addr).SerialNumber
		rot := t.TempDir()
		tlsTool(t, "cert", "create", r.kind, r.name, "--dir", rot, "--ca-dir", p.dir)
		newCert, err := certs.ReadCert(filepath.Join(rot, r.name+".pem"))
		require.NoError(t, err)
		require.NotEqual(t, oldSerial, newCert.SerialNumber)
		// Key first, then certificate, each by rename: a handshake in
		// between fails and is retried, never reads a torn file.
		for _, f := range []string{r.name + "-key.pem", r.name + ".pem"} {
			require.NoError(t, os.Rename(filepath.Join(rot, f), filepath.Join(certDir, f)))
		}
		assert.Equal(t, newCert.SerialNumber, served(r.addr).SerialNumber, "the rotated %s certificate is served without a restart", r.name)
	}
	_ = tg.ok(t, append(admin, "put", "/after-rotation", "v")...)
	require.Eventually(t, func() bool { st := status(); return voters(st) == 4 && st.Quorum }, time.Minute, 200*time.Millisecond,
		"the cluster stays healthy with n1's new certificates")

	assert.Equal(t, 0, bad.signalAndWait(t, syscall.SIGTERM), bad.errb.String())
}

// serve --auth enables etcd users and roles with the root password of a
// file or $TOPOCTL_ROOT_PASSWORD: a wrong password is refused, a
// read-only user cannot write, and a restart with another root password
// does not start.
func TestServeAuth(t *testing.T) {
	t.Parallel()
	addrs, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	dataDir := t.TempDir()
	pw := filepath.Join(t.TempDir(), "root-pw")
	require.NoError(t, os.WriteFile(pw, []byte("s3cret\n"), 0o600))
	args := []string{"serve", "--auth", "--auth-bcrypt-cost", "4", "--data-dir", dataDir, "--listen-client-address", addrs[0], "--listen-peer-address", addrs[1]}
	s := startProcess(t, serveEnv, append(args, "--root-password-file", pw)...)
	l := s.waitLine(t, "topoctl --topo-implementation")
	assert.Contains(t, l, "--etcd-user root")
	assert.NotContains(t, l, "s3cret")
	tg := target{impl: "etcd2", addr: addrs[0], root: defaultRoot}
	tg.fails(t, 1, []string{"PermissionDenied"}, "--etcd-user", "root", "--etcd-password", "wrong", "put", "/k", "v")
	tg.fails(t, 1, []string{"PermissionDenied"}, "put", "/k", "v")
	_ = tg.ok(t, "--etcd-user", "root", "--etcd-password", "s3cret", "put", "/k", "v")

	// A read-only user, as docs/security.md sets one up.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addrs[0]}, Username: "root", Password: "s3cret", Logger: zap.NewNop(), DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = cli.RoleAdd(ctx, "reader")
	require.NoError(t, err)
	_, err = cli.RoleGrantPermission(ctx, "reader", defaultRoot+"/", clientv3.GetPrefixRangeEnd(defaultRoot+"/"), clientv3.PermissionType(clientv3.PermRead))
	require.NoError(t, err)
	_, err = cli.UserAdd(ctx, "ro", "ro-pw")
	require.NoError(t, err)
	_, err = cli.UserGrantRole(ctx, "ro", "reader")
	require.NoError(t, err)
	assert.Equal(t, "v", tg.ok(t, "--etcd-user", "ro", "--etcd-password", "ro-pw", "get", "/k"))
	tg.fails(t, 1, []string{"PermissionDenied"}, "--etcd-user", "ro", "--etcd-password", "ro-pw", "put", "/k", "w")
	assert.Equal(t, "v", tg.ok(t, "--etcd-user", "ro", "--etcd-password", "ro-pw", "get", "/k"), "the refused write changed nothing")
	assert.Equal(t, 0, s.signalAndWait(t, syscall.SIGINT), s.errb.String())

	// A restart with another root password (from the variable) refuses
	// to run; with the right one it serves again.
	bad := startProcess(t, append(slices.Clone(serveEnv), envRootPassword+"=other"), args...)
	<-bad.done
	assert.NotEqual(t, 0, bad.cmd.ProcessState.ExitCode())
	assert.Contains(t, bad.errb.String(), "refuses the root password from $"+envRootPassword)
	good := startProcess(t, append(slices.Clone(serveEnv), envRootPassword+"=s3cret"), args...)
	good.waitLine(t, "embedded etcd ready")
	assert.Equal(t, "v", tg.ok(t, "--etcd-user", "root", "--etcd-password", "s3cret", "get", "/k"))
	assert.Equal(t, 0, good.signalAndWait(t, syscall.SIGINT), good.errb.String())
}

// A cluster with --auth: the bootstrapping node enables etcd auth, a node
// with the root password joins, one with a wrong password neither joins
// nor starts, and clients need credentials. The advertised client URL is
// the one printed.
func TestServeClusterAuth(t *testing.T) {
	t.Parallel()
	addrs, err := etcdembed.FreeAddrs(6)
	require.NoError(t, err)
	env := append(slices.Clone(serveEnv), envRootPassword+"=s3cret")
	start := func(env []string, name string, i int, extra ...string) *proc {
		_, port, _ := strings.Cut(addrs[2*i], ":")
		args := append([]string{"--log-level", "info", "serve", "--auth", "--auth-bcrypt-cost", "4", "--name", name, "--data-dir", t.TempDir(),
			"--listen-client-address", addrs[2*i], "--listen-peer-address", addrs[2*i+1], "--advertise-client-url", "http://localhost:" + port}, extra...)
		return startProcess(t, env, args...)
	}
	n1 := start(env, "n1", 0, "--cluster")
	_, port, _ := strings.Cut(addrs[0], ":")
	assert.Contains(t, n1.waitLine(t, "client URL:"), "http://localhost:"+port)
	n1.waitLine(t, "cluster status")
	root := []string{"--etcd-user", "root", "--etcd-password", "s3cret"}
	tg := target{impl: "etcd2", addr: addrs[0], root: defaultRoot}
	status := func() clusterStatusJSON { return clusterStatus(t, tg, root...) }
	wrong := start(append(slices.Clone(serveEnv), envRootPassword+"=wrong"), "n0", 2, "--seeds", "http://"+addrs[0])
	<-wrong.done
	assert.NotEqual(t, 0, wrong.cmd.ProcessState.ExitCode())
	assert.Contains(t, wrong.errb.String(), "authentication failed")
	n2 := start(env, "n2", 1, "--seeds", "http://"+addrs[0])
	require.Eventually(t, func() bool { st := status(); return voters(st) == 2 && st.Quorum }, 3*time.Minute, 200*time.Millisecond,
		"n1: %s\nn2: %s", n1.errb.String(), n2.errb.String())
	for _, m := range status().Members {
		assert.NotEqual(t, "n0", m.Name)
	}
	tg.fails(t, 1, []string{"PermissionDenied"}, "put", "/k", "v")
	tg.fails(t, 1, []string{"PermissionDenied"}, "--etcd-user", "root", "--etcd-password", "wrong", "put", "/k", "v")
	_ = tg.ok(t, append(root, "put", "/k", "v")...)
	assert.Equal(t, "v", target{impl: "etcd2", addr: addrs[2], root: defaultRoot}.ok(t, append(root, "get", "/k")...))
}
