package etcdcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/topokit/topokit/topo/etcd2topo"
)

// ClientOptions are the credentials a client of the cluster presents.
// The zero value is a plaintext client without etcd credentials.
type ClientOptions struct {
	// CertFile and KeyFile are the PEM client certificate and key; CAFile
	// the PEM CA the members' certificates are verified against (the
	// system roots when empty). Setting any of them turns TLS on;
	// host:port endpoints then mean https. The certificate is re-read on
	// each TLS handshake.
	CertFile, KeyFile, CAFile string
	// Username and Password log in to etcd when its auth is on (ignored
	// when it is off).
	Username, Password string
}

// secure reports whether the options turn TLS on.
func (o ClientOptions) secure() bool { return o.CertFile != "" || o.KeyFile != "" || o.CAFile != "" }

// tlsConfig returns the client TLS configuration, nil when TLS is off. Its
// error names the file it could not use.
func (o ClientOptions) tlsConfig() (*tls.Config, error) {
	if !o.secure() {
		return nil, nil
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, fmt.Errorf("%w: a client certificate needs both its certificate and key files", ErrInvalidConfig)
	}
	c, err := transport.TLSInfo{CertFile: o.CertFile, KeyFile: o.KeyFile, TrustedCAFile: o.CAFile, Logger: zap.NewNop()}.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: client TLS: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

// config returns the clientv3 configuration of endpoints with the options.
func (o ClientOptions) config(endpoints []string, dialTimeout time.Duration) (clientv3.Config, error) {
	tc, err := o.tlsConfig()
	if err != nil {
		return clientv3.Config{}, err
	}
	return clientv3.Config{
		Endpoints:            normalizeEndpoints(endpoints, tc != nil),
		DialTimeout:          dialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
		TLS:                  tc,
		Username:             o.Username,
		Password:             o.Password,
	}, nil
}

// NewClient opens a plaintext client without credentials: NewClientWith
// with zero ClientOptions.
func NewClient(endpoints []string, interval time.Duration) (*clientv3.Client, error) {
	return NewClientWith(endpoints, interval, ClientOptions{})
}

// NewClientWith opens an etcd client on endpoints (client URLs or
// host:port of any members), with the credentials of opts, that follows
// the cluster's member list: every interval
// (DefaultCheckInterval when <= 0) it reads the member list and, when it
// changed, points the client at the client URLs of the started voting
// members, so that removing the member the client talks to does not break
// it. The follower stops when the client is closed. It returns an error
// wrapping ErrInvalidConfig when endpoints is empty or a TLS file of opts
// cannot be used (naming it), and the login error when etcd refuses the
// credentials. It does not otherwise wait for the cluster.
func NewClientWith(endpoints []string, interval time.Duration, opts ClientOptions) (*clientv3.Client, error) {
	cfg, err := opts.config(endpoints, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("%w: no endpoint given", ErrInvalidConfig)
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdcluster: %w", err)
	}
	go follow(cli, interval, slog.Default())
	return cli, nil
}

// OpenConn opens a topokit etcd2 Conn rooted at root (see
// etcd2topo.NewConn for opts, root and its errors) whose etcd client
// follows the cluster's member list like NewClient's. The follower stops
// when the Conn is closed.
func OpenConn(opts etcd2topo.Options, root string, interval time.Duration) (*etcd2topo.Conn, error) {
	opts.Endpoints = normalizeEndpoints(opts.Endpoints, opts.TLSCAFile != "" || opts.TLSCertFile != "" || opts.TLSKeyFile != "")
	conn, err := etcd2topo.NewConn(opts, root)
	if err != nil {
		return nil, err
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.Default()
	}
	go follow(conn.Client(), interval, lg)
	return conn, nil
}

// follow points cli at the current voting members until cli is closed.
func follow(cli *clientv3.Client, interval time.Duration, lg *slog.Logger) {
	if interval <= 0 {
		interval = DefaultCheckInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-cli.Ctx().Done():
			return
		case <-t.C:
		}
		syncEndpoints(cli, interval, lg)
	}
}

// syncEndpoints sets cli's endpoints to the started voters' client URLs
// when they differ from the current ones.
func syncEndpoints(cli *clientv3.Client, timeout time.Duration, lg *slog.Logger) {
	ctx, cancel := context.WithTimeout(cli.Ctx(), max(timeout, time.Second))
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return
	}
	var eps []string
	for _, m := range resp.Members {
		if m.Name != "" && !m.IsLearner {
			eps = append(eps, m.ClientURLs...)
		}
	}
	if len(eps) == 0 {
		return
	}
	slices.Sort(eps)
	cur := slices.Clone(cli.Endpoints())
	slices.Sort(cur)
	if !slices.Equal(eps, cur) {
		lg.Debug("etcdcluster: following member list", "endpoints", eps)
		cli.SetEndpoints(eps...)
	}
}

// endpointClients are etcd clients bound to one endpoint each, for the
// maintenance calls addressed to one member (Status, HashKV, MoveLeader).
// They are kept apart from a member-list-following client because
// clientv3's per-endpoint dial reads the client's endpoint list without
// its lock, which races with SetEndpoints. Safe for concurrent use.
type endpointClients struct {
	opts ClientOptions // set before first use
	mu   sync.Mutex
	m    map[string]*clientv3.Client
}

// get returns the client of endpoint ep, opening it on first use.
func (e *endpointClients) get(ep string) (*clientv3.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.m[ep]; c != nil {
		return c, nil
	}
	cfg, err := e.opts.config([]string{ep}, 2*time.Second)
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	if e.m == nil {
		e.m = map[string]*clientv3.Client{}
	}
	e.m[ep] = c
	return c, nil
}

// status asks member endpoint ep for its status.
func (e *endpointClients) status(ctx context.Context, ep string) (*clientv3.StatusResponse, error) {
	c, err := e.get(ep)
	if err != nil {
		return nil, err
	}
	return c.Status(ctx, ep)
}

// close closes every client.
func (e *endpointClients) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.m {
		c.Close()
	}
	e.m = nil
}
