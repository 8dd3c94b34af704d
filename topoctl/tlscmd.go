package topoctl

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/internal/certs"
)

// newTLSCmd groups the commands that make a CA and the certificates of a
// TLS cluster run by "topoctl serve".
func newTLSCmd(out *printer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Make a CA and the server, client and peer certificates of a TLS etcd (serve)",
		Long: `Make the certificates "topoctl serve" needs for TLS: a certificate
authority ("tls ca create": ca.pem and ca-key.pem), then certificates it
signs ("tls cert create --server|--client|--peer NAME": NAME.pem and
NAME-key.pem). Files go to the current directory unless --dir says
otherwise; an existing file is never overwritten. Keys are PKCS#8 PEM
files of mode 0600. Only Go's standard library is used. See
docs/security.md.`,
		Example: `  topoctl tls ca create
  topoctl tls cert create --server n1 --ip 10.0.0.1 --dns n1.example.com
  topoctl tls cert create --peer n1-peer --ip 10.0.0.1
  topoctl tls cert create --client app`,
	}
	ca := &cobra.Command{
		Use:     "ca",
		Short:   "Manage the certificate authority",
		Example: `  topoctl tls ca create --dir /etc/topokit/tls`,
	}
	ca.AddCommand(newTLSCACreateCmd(out))
	cert := &cobra.Command{
		Use:     "cert",
		Short:   "Manage certificates signed by the CA",
		Example: `  topoctl tls cert create --server n1 --ip 10.0.0.1`,
	}
	cert.AddCommand(newTLSCertCreateCmd(out))
	cmd.AddCommand(groupCmd(ca), groupCmd(cert))
	return groupCmd(cmd)
}

func newTLSCACreateCmd(out *printer) *cobra.Command {
	var (
		dir, cn, alg string
		days         int
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Write a new CA: ca.pem and ca-key.pem",
		Long: `Write a new self-signed certificate authority: ca.pem (the
certificate every node and client trusts, --trusted-ca-file and
--etcd-ca-file) and ca-key.pem (its key, mode 0600: keep it off the
nodes once the certificates are made). It lasts 5 years unless --days
says otherwise. Existing files are never overwritten.`,
		Example: `  topoctl tls ca create
  topoctl tls ca create --dir ./tls --key-type ed25519`,
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			if err := checkDays(days); err != nil {
				return err
			}
			f, err := certs.CreateCA(dir, cn, certs.Options{Algorithm: alg, Days: days})
			if err != nil {
				return tlsError(err)
			}
			return printCerts(out, f, "CA")
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "directory to write ca.pem and ca-key.pem to (created, mode 0700, when missing)")
	cmd.Flags().StringVar(&cn, "common-name", "topokit etcd CA", "the CA's subject common name")
	cmd.Flags().StringVar(&alg, "key-type", certs.ECDSAP256, "key algorithm: "+certs.ECDSAP256+" or "+certs.Ed25519)
	cmd.Flags().IntVar(&days, "days", certs.DefaultCADays, "lifetime in days")
	return cmd
}

func newTLSCertCreateCmd(out *printer) *cobra.Command {
	var (
		dir, caDir, alg      string
		server, client, peer string
		days                 int
		ipFlags, dnsFlags    []string
	)
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Write a certificate signed by the CA: NAME.pem and NAME-key.pem",
		Long: `Write a certificate signed by the CA in --ca-dir (default: --dir),
named NAME (its common name):

  --server NAME  for a node's client port (serve --cert-file); it carries
                 both server and client usages, since a cluster node is
                 also a client of the other members
  --peer NAME    for a node's peer port (serve --peer-cert-file)
  --client NAME  for a client (--etcd-cert-file); with etcd auth on, etcd
                 takes NAME as the user name when no password is given

Server and peer certificates are valid for 127.0.0.1 and localhost plus
every --ip and --dns: give the addresses the others reach the node at.
Certificates last one year unless --days says otherwise. Existing files
are never overwritten.`,
		Example: `  topoctl tls cert create --server n1 --ip 10.0.0.1 --dns n1.example.com
  topoctl tls cert create --peer n1-peer --ip 10.0.0.1
  topoctl tls cert create --client app --dir ./tls`,
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			var (
				kind  certs.Kind
				name  string
				given int
			)
			for _, c := range []struct {
				k certs.Kind
				v string
			}{{certs.Server, server}, {certs.Client, client}, {certs.Peer, peer}} {
				if c.v != "" {
					kind, name = c.k, c.v
					given++
				}
			}
			if given != 1 {
				return usagef("give exactly one of --server NAME, --client NAME or --peer NAME")
			}
			if err := checkDays(days); err != nil {
				return err
			}
			if strings.ContainsAny(name, `/\`) || name == "ca" || strings.HasPrefix(name, ".") {
				return usagef("certificate name %q: want a plain file name other than \"ca\"", name)
			}
			var ips []net.IP
			for _, s := range ipFlags {
				ip := net.ParseIP(strings.TrimSpace(s))
				if ip == nil {
					return usagef("--ip %q is not an IP address", s)
				}
				ips = append(ips, ip)
			}
			if caDir == "" {
				caDir = dir
			}
			f, err := certs.CreateCert(dir, caDir, name, kind, ips, dnsFlags, certs.Options{Algorithm: alg, Days: days})
			if _, serr := os.Stat(certs.CAFiles(caDir).Cert); err != nil && errors.Is(serr, fs.ErrNotExist) {
				return fmt.Errorf("%w (no CA in %s: make one first with \"topoctl tls ca create --dir %s\", or give --ca-dir)", err, caDir, caDir)
			}
			if err != nil {
				return tlsError(err)
			}
			return printCerts(out, f, kind.String())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&server, "server", "", "make a server certificate (server and client usages) named NAME")
	fl.StringVar(&client, "client", "", "make a client certificate named NAME")
	fl.StringVar(&peer, "peer", "", "make a peer certificate named NAME")
	fl.StringSliceVar(&ipFlags, "ip", nil, "IP address the certificate is valid for (repeatable, or comma-separated)")
	fl.StringSliceVar(&dnsFlags, "dns", nil, "DNS name the certificate is valid for (repeatable, or comma-separated)")
	fl.StringVar(&dir, "dir", ".", "directory to write NAME.pem and NAME-key.pem to")
	fl.StringVar(&caDir, "ca-dir", "", "directory of ca.pem and ca-key.pem (default: --dir)")
	fl.StringVar(&alg, "key-type", certs.ECDSAP256, "key algorithm: "+certs.ECDSAP256+" or "+certs.Ed25519)
	fl.IntVar(&days, "days", certs.DefaultCertDays, "lifetime in days")
	return cmd
}

// checkDays refuses a --days below 1 (certs.Options would take it for the
// default lifetime).
func checkDays(days int) error {
	if days < 1 {
		return usagef("--days %d: want at least 1", days)
	}
	return nil
}

// tlsError makes a refused input (an existing file, an unknown key type)
// a usage error; other errors stay failures.
func tlsError(err error) error {
	if errors.Is(err, certs.ErrExists) || strings.Contains(err.Error(), "unknown key algorithm") || strings.Contains(err.Error(), "fewer --days") {
		return usageError{err}
	}
	return err
}

func printCerts(out *printer, f certs.Files, what string) error {
	c := f.Certificate
	if out.jsonOut() {
		return out.printJSON(map[string]any{
			"kind": what, "cert_file": f.Cert, "key_file": f.Key, "common_name": c.Subject.CommonName,
			"not_after": c.NotAfter.UTC().Format(time.RFC3339), "ip_addresses": ipStrings(c.IPAddresses), "dns_names": append([]string{}, c.DNSNames...),
		})
	}
	out.printf("wrote %s certificate %s and key %s (mode 0600)\n", what, f.Cert, f.Key)
	out.printf("  common name: %s, valid until %s\n", c.Subject.CommonName, c.NotAfter.UTC().Format(time.RFC3339))
	if len(c.IPAddresses)+len(c.DNSNames) > 0 {
		out.printf("  valid for: %s\n", strings.Join(append(ipStrings(c.IPAddresses), c.DNSNames...), ", "))
	}
	return nil
}

func ipStrings(ips []net.IP) []string {
	out := []string{}
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}
