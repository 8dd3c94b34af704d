package topoctl

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// zkHolderSessionTimeout is the session timeout asked for by zkHolder's
// short-lived session.
const zkHolderSessionTimeout = 10 * time.Second

// zkHolder returns the contents of the entry that holds the lock on dir in
// the ZooKeeper store sp (the lowest sequence under <root>/<dir>/locks),
// read on a session of its own with the --zk-* TLS and authentication
// settings: zk2topo's Get does not return lock entries (ephemeral znodes
// are not files). It returns "" when the entry cannot be read before ctx
// ends.
func (o *options) zkHolder(ctx context.Context, sp spec, dir string) string {
	var servers []string
	for s := range strings.SplitSeq(sp.addr, ",") {
		if s = strings.TrimSpace(s); s != "" {
			servers = append(servers, s)
		}
	}
	root, err := topo.CleanDirPath(sp.root)
	if err != nil || len(servers) == 0 {
		return ""
	}
	dial := zk.Dialer(net.DialTimeout)
	if s := o.sec; s.zkCA != "" || s.zkCert != "" || s.zkKey != "" {
		cfg, err := zkTLSConfig(s)
		if err != nil {
			o.log.Debug("cannot read the lock holder", "dir", dir, "err", err)
			return ""
		}
		dial = func(network, addr string, timeout time.Duration) (net.Conn, error) {
			return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, cfg)
		}
	}
	z, _, err := zk.Connect(servers, zkHolderSessionTimeout, zk.WithLogger(zkLogger{o}), zk.WithDialer(dial))
	if err != nil {
		return ""
	}
	defer z.Close()
	locks := "/" + backendkit.JoinPath(backendkit.JoinPath(root, dir), backendkit.LocksDirName)
	type answer struct {
		data string
		err  error
	}
	ch := make(chan answer, 1)
	go func() {
		data, err := zkLowestEntry(z, o.sec, locks)
		ch <- answer{data, err}
	}()
	select {
	case a := <-ch:
		if a.err != nil {
			o.log.Debug("cannot read the lock holder", "dir", dir, "err", a.err)
		}
		return a.data
	case <-ctx.Done():
		z.Close() // ends the calls in flight
		<-ch
		return ""
	}
}

// zkLowestEntry adds the --zk-auth identity to z's session and returns the
// data of the child of locks with the lowest sequence number.
func zkLowestEntry(z *zk.Conn, s security, locks string) (string, error) {
	if err := zkAddAuth(z, s); err != nil {
		return "", err
	}
	names, _, err := z.Children(locks)
	if err != nil {
		return "", err
	}
	// Entries are named by their 10-digit sequence: the lowest sorts first.
	slices.Sort(names)
	for _, n := range names {
		data, _, err := z.Get(locks + "/" + n)
		if err == nil && len(data) > 0 {
			return string(data), nil
		}
	}
	return "", fmt.Errorf("no readable entry under %s", locks)
}

// zkTLSConfig is the client TLS configuration of the --zk-* TLS flags.
func zkTLSConfig(s security) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.zkServerName}
	if s.zkCA != "" {
		b, err := os.ReadFile(s.zkCA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%s holds no PEM certificate", s.zkCA)
		}
	}
	if s.zkCert != "" || s.zkKey != "" {
		c, err := tls.LoadX509KeyPair(s.zkCert, s.zkKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}

// zkLogger sends the ZooKeeper client's log lines to topoctl's logger, at
// debug level.
type zkLogger struct{ o *options }

func (l zkLogger) Printf(format string, args ...any) {
	l.o.log.Debug(fmt.Sprintf(format, args...), "component", "zk-holder")
}
