package etcdcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/topokit/topokit/internal/clusterguard"
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
// credentials. With several endpoints it asks each for its status (at
// most 2 s) and returns an error wrapping etcd2topo.ErrClusterMismatch,
// naming the endpoints and their cluster IDs, when they belong to
// different etcd clusters (an endpoint that does not answer then is not
// checked). The client refuses answers from any other cluster than the
// first it got one from (the agreed one when checked): such a call
// returns an error (see the package doc). It does not otherwise wait for
// the cluster.
func NewClientWith(endpoints []string, interval time.Duration, opts ClientOptions) (*clientv3.Client, error) {
	cfg, err := opts.config(endpoints, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("%w: no endpoint given", ErrInvalidConfig)
	}
	guard := new(clusterguard.Guard)
	cfg.DialOptions = append(cfg.DialOptions, guard.DialOptions()...)
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdcluster: %w", err)
	}
	if err := checkClusterIDs(cli, guard, cfg.Endpoints); err != nil {
		cli.Close()
		return nil, err
	}
	go follow(cli, interval, slog.Default(), opts, guard.TakeMismatch, nil)
	return cli, nil
}

// OpenConn opens a topokit etcd2 Conn rooted at root (see
// etcd2topo.NewConn for opts, root and its errors) whose etcd client
// follows the cluster's member list like NewClient's. The follower stops
// when the Conn is closed. Its key-value requests fail over from a
// member that stopped answering or lost its leader within the caller's
// deadline; a write that may or may not have been applied fails with
// Unavailable (outcome unknown) and is sent again only when it is a
// compare-and-set (see the package doc, "Clients").
func OpenConn(opts etcd2topo.Options, root string, interval time.Duration) (*etcd2topo.Conn, error) {
	opts.Endpoints = normalizeEndpoints(opts.Endpoints, opts.TLSCAFile != "" || opts.TLSCertFile != "" || opts.TLSKeyFile != "")
	copts := ClientOptions{
		CertFile: opts.TLSCertFile, KeyFile: opts.TLSKeyFile, CAFile: opts.TLSCAFile,
		Username: opts.Username, Password: opts.Password,
	}
	fo := &failover{ecs: &endpointClients{opts: copts, failFast: true}}
	opts.DialOptions = append(slices.Clone(opts.DialOptions), grpc.WithChainUnaryInterceptor(fo.unary))
	conn, err := etcd2topo.NewConn(opts, root)
	if err != nil {
		fo.ecs.close()
		return nil, err
	}
	fo.cli.Store(conn.Client())
	lg := opts.Logger
	if lg == nil {
		lg = slog.Default()
	}
	go func() {
		follow(conn.Client(), interval, lg, copts, nil, fo)
		fo.ecs.close()
	}()
	return conn, nil
}

// checkClusterIDs refuses endpoints of different clusters
// (clusterguard.Guard.CheckEndpoints); it pins guard to the cluster ID
// when the answers agree.
func checkClusterIDs(cli *clientv3.Client, guard *clusterguard.Guard, endpoints []string) error {
	if m := guard.CheckEndpoints(cli.Ctx(), cli, endpoints, 2*time.Second); m != "" {
		return fmt.Errorf("%w: %s; refusing to use them together (was a member's data lost and the member bootstrapped anew?)",
			etcd2topo.ErrClusterMismatch, m)
	}
	return nil
}

// follow points cli at the current voting members until cli is closed,
// asking the members with the credentials of opts for their cluster ID.
// It checks the current endpoints again when mismatch reports true (a
// call was answered by another cluster), or every tenth round when
// mismatch is nil.
func follow(cli *clientv3.Client, interval time.Duration, lg *slog.Logger, opts ClientOptions, mismatch func() bool, fo *failover) {
	if interval <= 0 {
		interval = DefaultCheckInterval
	}
	ecs := &endpointClients{opts: opts}
	defer ecs.close()
	t := time.NewTicker(interval)
	defer t.Stop()
	for round := 1; ; round++ {
		select {
		case <-cli.Ctx().Done():
			return
		case <-t.C:
		}
		recheck := round%10 == 0
		if mismatch != nil {
			recheck = mismatch()
		}
		syncEndpoints(cli, interval, lg, ecs, recheck, fo)
	}
}

// syncEndpoints sets cli's endpoints to the started voters' client URLs
// when they differ from the current ones. Before it points cli at a
// changed list it asks each URL (through ecs) for its status and keeps
// only those that answer with the cluster ID of the member list's answer:
// a URL now served by another cluster (a member that lost its data and
// bootstrapped anew at its old address) is no longer used. recheck asks
// the URLs even when the list did not change.
func syncEndpoints(cli *clientv3.Client, timeout time.Duration, lg *slog.Logger, ecs *endpointClients, recheck bool, fo *failover) {
	ctx, cancel := context.WithTimeout(cli.Ctx(), max(timeout, time.Second))
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil || resp.Header == nil {
		return
	}
	if fo != nil {
		fo.setMembers(resp.Members)
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
	if slices.Equal(eps, cur) && !recheck {
		return
	}
	want := resp.Header.ClusterId
	ids := make([]uint64, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() {
			if sr, err := ecs.status(ctx, ep); err == nil && sr.Header != nil {
				ids[i] = sr.Header.ClusterId
			}
		})
	}
	wg.Wait()
	var ok []string
	for i, ep := range eps {
		switch ids[i] {
		case want:
			ok = append(ok, ep)
		case 0: // did not answer: not used until it does
		default:
			lg.Warn("etcdcluster: a member's client URL is served by another etcd cluster: not using it",
				"endpoint", ep, "clusterID", fmt.Sprintf("%x", ids[i]), "expectedClusterID", fmt.Sprintf("%x", want))
		}
	}
	if len(ok) == 0 || slices.Equal(ok, cur) {
		return
	}
	lg.Debug("etcdcluster: following member list", "endpoints", ok)
	cli.SetEndpoints(ok...)
}

// endpointClients are etcd clients bound to one endpoint each, for the
// maintenance calls addressed to one member (Status, HashKV, MoveLeader).
// They are kept apart from a member-list-following client because
// clientv3's per-endpoint dial reads the client's endpoint list without
// its lock, which races with SetEndpoints. Safe for concurrent use.
type endpointClients struct {
	opts ClientOptions // set before first use
	// failFast makes each call one attempt that fails at once when its
	// member refuses connections (a dead process), instead of waiting
	// for it to come back until the caller's deadline as clientv3 does
	// by default. Set before first use.
	failFast bool
	mu       sync.Mutex
	m        map[string]*clientv3.Client
	closed   bool // by close: get opens no more clients
}

// get returns the client of endpoint ep, opening it on first use.
func (e *endpointClients) get(ep string) (*clientv3.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.m[ep]; c != nil {
		return c, nil
	}
	if e.closed {
		return nil, errors.New("etcdcluster: the client is closed")
	}
	cfg, err := e.opts.config([]string{ep}, 2*time.Second)
	if err != nil {
		return nil, err
	}
	if e.failFast {
		cfg.MaxUnaryRetries = 1
		cfg.DialOptions = append(cfg.DialOptions, grpc.WithChainUnaryInterceptor(failFast))
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

// failFast is a gRPC unary interceptor that sends a call without waiting
// for a connection that is down (grpc.WaitForReady(false), given after
// clientv3's own WaitForReady(true), overrides it).
func failFast(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(ctx, method, req, reply, cc, append(opts, grpc.WaitForReady(false))...)
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
	e.m, e.closed = nil, true
}
