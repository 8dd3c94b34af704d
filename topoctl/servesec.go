package topoctl

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/topokit/topokit/etcdcluster"
	"github.com/topokit/topokit/internal/certs"
	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/topo/backendkit"
)

// envRootPassword holds serve --auth's root password when
// --root-password-file is not given.
const envRootPassword = "TOPOCTL_ROOT_PASSWORD"

// serveSecurity are serve's TLS and authentication flags, named and
// meant as etcd's own.
type serveSecurity struct {
	cert, key, ca      string
	clientCertAuth     bool
	peerCert, peerKey  string
	peerCA             string
	peerClientCertAuth bool
	auth               bool
	rootPasswordFile   string
	rootPassword       string // resolved by check
	insecure           bool
	advertiseClient    string
	bcryptCost         uint
}

func (s *serveSecurity) register(f *pflag.FlagSet) {
	f.StringVar(&s.cert, "cert-file", "", "client TLS: PEM server certificate of the client address (turns https on; with --key-file). In a cluster the node also presents it as its client certificate")
	f.StringVar(&s.key, "key-file", "", "client TLS: PEM key of --cert-file")
	f.StringVar(&s.ca, "trusted-ca-file", "", "client TLS: PEM CA that client certificates must be signed by (etcd then requires client certificates); in a cluster also the CA the node verifies the members with")
	f.BoolVar(&s.clientCertAuth, "client-cert-auth", false, "client TLS: require client certificates signed by --trusted-ca-file")
	f.StringVar(&s.peerCert, "peer-cert-file", "", "peer TLS: PEM certificate of the peer address, presented to and by peers (turns https on; with --peer-key-file)")
	f.StringVar(&s.peerKey, "peer-key-file", "", "peer TLS: PEM key of --peer-cert-file")
	f.StringVar(&s.peerCA, "peer-trusted-ca-file", "", "peer TLS: PEM CA that peer certificates must be signed by")
	f.BoolVar(&s.peerClientCertAuth, "peer-client-cert-auth", false, "peer TLS: require peer certificates signed by --peer-trusted-ca-file")
	f.BoolVar(&s.auth, "auth", false, "enable etcd authentication (users and roles) with the user root, whose password is read from --root-password-file or $"+envRootPassword)
	f.StringVar(&s.rootPasswordFile, "root-password-file", "", "with --auth: file holding the root user's password (first line; default: $"+envRootPassword+")")
	f.BoolVar(&s.insecure, "insecure", false, "allow listening on a non-loopback address without TLS and certificate (or password) authentication: anyone who reaches it can read, write and join")
	f.StringVar(&s.advertiseClient, "advertise-client-url", "", "client URL others reach this node at (default: the listen address; required when that is 0.0.0.0 or ::)")
	f.UintVar(&s.bcryptCost, "auth-bcrypt-cost", 0, "bcrypt cost of etcd's password hashes (0: etcd's default, 10)")
	_ = f.MarkHidden("auth-bcrypt-cost")
}

func (s *serveSecurity) clientTLS() bool { return s.cert != "" }
func (s *serveSecurity) peerTLS() bool   { return s.peerCert != "" }

func (s *serveSecurity) clientInfo() transport.TLSInfo {
	return transport.TLSInfo{CertFile: s.cert, KeyFile: s.key, TrustedCAFile: s.ca, ClientCertAuth: s.clientCertAuth}
}

func (s *serveSecurity) peerInfo() transport.TLSInfo {
	return transport.TLSInfo{CertFile: s.peerCert, KeyFile: s.peerKey, TrustedCAFile: s.peerCA, ClientCertAuth: s.peerClientCertAuth}
}

// scheme returns the URL scheme of a listener with TLS on or off.
func scheme(tls bool) string {
	if tls {
		return "https://"
	}
	return "http://"
}

// isLoopback reports whether host (of a listen address) is a loopback
// address, or "localhost" resolving to loopback addresses only; an empty
// or unspecified host listens on every interface and is not.
func isLoopback(host string) bool {
	return isLoopbackVia(host, net.DefaultResolver.LookupIPAddr)
}

// localhostLookupTimeout bounds isLoopback's lookup of "localhost".
const localhostLookupTimeout = 2 * time.Second

// isLoopbackVia is isLoopback resolving "localhost" with lookup: a
// localhost that a hosts file or resolver points elsewhere (or that does
// not resolve) is not taken for the loopback, where etcd would listen on
// what it resolves to.
func isLoopbackVia(host string, lookup func(context.Context, string) ([]net.IPAddr, error)) bool {
	if strings.EqualFold(host, "localhost") {
		ctx, cancel := context.WithTimeout(context.Background(), localhostLookupTimeout)
		defer cancel()
		ips, err := lookup(ctx, host)
		if err != nil || len(ips) == 0 {
			return false
		}
		for _, ip := range ips {
			if !ip.IP.IsLoopback() {
				return false
			}
		}
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// isUnspecified reports whether host listens on every interface.
func isUnspecified(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// check validates the flags before anything listens: flag pairs, the
// files (readable, key matching certificate, not expired, each error
// naming the file), the refusal to serve a non-loopback address without
// TLS and authentication, and the root password. member is false for a
// --client-only node, which listens on nothing.
func (s *serveSecurity) check(in *input, out *printer, clientAddr, peerAddr string, member bool) error {
	if (s.cert == "") != (s.key == "") {
		return usagef("--cert-file and --key-file go together")
	}
	if (s.peerCert == "") != (s.peerKey == "") {
		return usagef("--peer-cert-file and --peer-key-file go together")
	}
	if s.clientCertAuth && s.ca == "" {
		return usagef("--client-cert-auth needs --trusted-ca-file (the CA client certificates must be signed by)")
	}
	if s.peerClientCertAuth && s.peerCA == "" {
		return usagef("--peer-client-cert-auth needs --peer-trusted-ca-file (the CA peer certificates must be signed by)")
	}
	if member && s.ca != "" && !s.clientTLS() {
		return usagef("--trusted-ca-file needs --cert-file and --key-file (client TLS)")
	}
	if s.peerCA != "" && !s.peerTLS() {
		return usagef("--peer-trusted-ca-file needs --peer-cert-file and --peer-key-file (peer TLS)")
	}
	now := time.Now()
	for _, p := range []struct{ flag, cert, key, ca string }{
		{"--cert-file", s.cert, s.key, s.ca}, {"--peer-cert-file", s.peerCert, s.peerKey, s.peerCA},
	} {
		if p.cert != "" {
			if err := certs.CheckPair(p.cert, p.key, p.ca, now); err != nil {
				return fmt.Errorf("%s: %w; nothing was started", p.flag, err)
			}
		} else if p.ca != "" {
			if _, err := certs.ReadCert(p.ca); err != nil {
				return fmt.Errorf("%s: %w; nothing was started", "--trusted-ca-file", err)
			}
		}
	}
	if s.rootPasswordFile != "" && !s.auth {
		return usagef("--root-password-file needs --auth")
	}
	if s.auth {
		switch {
		case s.rootPasswordFile != "":
			b, err := backendkit.ReadSecretFile(s.rootPasswordFile)
			if err != nil {
				return fmt.Errorf("--root-password-file: %w; nothing was started", err)
			}
			s.rootPassword = strings.TrimRight(strings.SplitN(string(b), "\n", 2)[0], "\r")
			if s.rootPassword == "" {
				return fmt.Errorf("--root-password-file: %s: its first line is empty; nothing was started", s.rootPasswordFile)
			}
		case in.getenv(envRootPassword) != "":
			s.rootPassword = in.getenv(envRootPassword)
		default:
			return usagef("--auth needs the root password: in a file named by --root-password-file, or in $%s (never as a flag value, which any user sees in the process list)", envRootPassword)
		}
	}
	if !member {
		return nil
	}
	ch, _, _ := net.SplitHostPort(clientAddr)
	ph, _, _ := net.SplitHostPort(peerAddr)
	var exposed []string
	// etcd requires client certificates whenever a trusted CA is set.
	if !isLoopback(ch) && !(s.clientTLS() && (s.clientCertAuth || s.ca != "" || s.auth)) {
		exposed = append(exposed, fmt.Sprintf("the client address %s: anyone who reaches it can read and write every key and volunteer to join the cluster (needs --cert-file, --key-file, --trusted-ca-file and --client-cert-auth)", clientAddr))
	}
	if !isLoopback(ph) && !(s.peerTLS() && (s.peerClientCertAuth || s.peerCA != "")) {
		exposed = append(exposed, fmt.Sprintf("the peer address %s: anyone who reaches it can act as a raft peer (needs --peer-cert-file, --peer-key-file, --peer-trusted-ca-file and --peer-client-cert-auth)", peerAddr))
	}
	if len(exposed) > 0 {
		if !s.insecure {
			return usagef("refusing to listen off the loopback without TLS and certificate authentication on %s. Make certificates with \"topoctl tls ca create\" and \"topoctl tls cert create\" and give those flags (see docs/security.md), listen on 127.0.0.1, or give --insecure to expose it anyway", strings.Join(exposed, "; and "))
		}
		out.eprintf("warning: --insecure: serving without TLS and certificate authentication off the loopback exposes %s\n", strings.Join(exposed, "; and "))
	}
	if isUnspecified(ch) && s.advertiseClient == "" {
		return usagef("--listen-client-address %s listens on every interface, which is no address others can dial: give --advertise-client-url %sHOST:%s with an address of this machine they can reach", clientAddr, scheme(s.clientTLS()), portOf(clientAddr))
	}
	if s.advertiseClient != "" {
		if err := checkURL("--advertise-client-url", s.advertiseClient, s.clientTLS()); err != nil {
			return err
		}
	}
	return nil
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// checkURL checks an advertised URL: http(s)://host:port, https exactly
// when TLS is on, and not an unspecified host.
func checkURL(flag, u string, tls bool) error {
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" || (pu.Scheme != "http" && pu.Scheme != "https") {
		return usagef("%s %q: want %sHOST:PORT", flag, u, scheme(tls))
	}
	if tls != (pu.Scheme == "https") {
		return usagef("%s %q: want %sHOST:PORT (TLS is %s)", flag, u, scheme(tls), map[bool]string{true: "on", false: "off"}[tls])
	}
	if isUnspecified(pu.Hostname()) {
		return usagef("%s %q: %s is no address others can dial", flag, u, pu.Hostname())
	}
	return nil
}

// clientOptions are the credentials serve's own clients use: its server
// certificate (which carries the client usage) and CA, and root when
// --auth is on.
func (s *serveSecurity) clientOptions() etcdcluster.ClientOptions {
	co := etcdcluster.ClientOptions{CertFile: s.cert, KeyFile: s.key, CAFile: s.ca}
	if s.auth {
		co.Username, co.Password = "root", s.rootPassword
	}
	return co
}

// enableAuth turns etcd auth on in the single member at clientURL (when
// it is off) and checks the root password by logging in.
func (s *serveSecurity) enableAuth(ctx context.Context, clientURL string) error {
	co := s.clientOptions()
	co.Username, co.Password = "", ""
	cli, err := etcdcluster.NewClientWith([]string{clientURL}, time.Hour, co)
	if err != nil {
		return err
	}
	defer cli.Close()
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := etcdembed.EnableAuth(actx, cli, s.rootPassword); err != nil {
		return err
	}
	return s.checkRootPassword(actx, clientURL)
}

// checkRootPassword logs in as root, failing with an error that says
// where the password came from.
func (s *serveSecurity) checkRootPassword(ctx context.Context, clientURL string) error {
	co := s.clientOptions()
	co.Username, co.Password = "", ""
	cli, err := etcdcluster.NewClientWith([]string{clientURL}, time.Hour, co)
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, err := cli.Authenticate(ctx, "root", s.rootPassword); err != nil {
		from := "$" + envRootPassword
		if s.rootPasswordFile != "" {
			from = s.rootPasswordFile
		}
		return fmt.Errorf("--auth: etcd refuses the root password from %s (%w): give the root password the cluster was set up with", from, err)
	}
	return nil
}

// clientFlags are the flags other topoctl commands need to reach this
// server: its CA, a client certificate when client-certificate auth is on
// (this node's own, which carries the client usage: give a client
// certificate of your own instead), and the root user when --auth is on
// (its password is not printed).
func (s *serveSecurity) clientFlags() []string {
	var f []string
	if s.ca != "" {
		f = append(f, "--etcd-ca-file", s.ca)
	}
	if s.clientCertAuth {
		f = append(f, "--etcd-cert-file", s.cert, "--etcd-key-file", s.key)
	}
	if s.auth {
		f = append(f, "--etcd-user", "root")
	}
	return f
}
