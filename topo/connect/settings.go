package connect

import (
	"context"
	"strings"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/zk2topo"
)

// Etcd are the etcd2 backend's settings (see etcd2topo.Options).
type Etcd struct {
	// CAFile, CertFile and KeyFile are PEM files (any of them turns TLS
	// on); ServerName is checked against the members' certificates.
	CAFile, CertFile, KeyFile, ServerName string
	// User and Password authenticate when etcd auth is enabled.
	User, Password string
	// AutoSync is how often connections refresh their endpoints from the
	// member list (0: never).
	AutoSync time.Duration
}

// ZooKeeper are the zk2 backend's settings (see zk2topo.Options).
type ZooKeeper struct {
	// Auth is "scheme:auth" added to the session; AuthFile a file holding
	// it.
	Auth, AuthFile string
	// CAFile, CertFile and KeyFile are PEM files (any of them turns TLS
	// on); ServerName is checked against the servers' certificates.
	CAFile, CertFile, KeyFile, ServerName string
}

// Consul are the consul backend's settings (see consultopo.Options).
type Consul struct {
	// Token is the ACL token; TokenFile a file holding it.
	Token, TokenFile string
	// CAFile, CertFile and KeyFile are PEM files (any of them turns https
	// on); ServerName is checked against the agent's certificate.
	CAFile, CertFile, KeyFile, ServerName string
}

// Settings are the connection settings of the bundled backends. The zero
// value connects without TLS or authentication.
type Settings struct {
	Etcd      Etcd
	ZooKeeper ZooKeeper
	Consul    Consul
	// ClaimTTL, when positive, is how long the claims of a connection
	// (Lock, TryLock and election candidacies) outlive a holder that stops
	// renewing them: etcd2's LockTTL (a lease, rounded up to whole
	// seconds), zk2's SessionTimeout (the session's, which the server
	// clamps to its bounds: 2 to 20 tickTimes by default) and consul's
	// SessionTTL (rounded up to whole seconds, at least 10 s, and Consul
	// invalidates a session up to twice its TTL later). Zero keeps each
	// backend's default (30 s, 30 s, 15 s). Other implementations ignore
	// it. LockWithTTL and LockName keep their own TTLs.
	ClaimTTL time.Duration
	// DialTimeout, when positive, bounds how long opening a connection
	// waits for the store to answer before it fails with the backend's
	// Unavailable error naming the address: etcd2's DialTimeout (the wait
	// for a member, with TLS the handshake and with a user the
	// authentication; also the client's later reconnections), zk2's
	// DialTimeout (the wait for the first session) and consul's
	// DialTimeout (the first request; later TCP connects and TLS
	// handshakes to the agent get the longer of it and 5 s). Zero or
	// negative keeps each backend's default (5 s). Other implementations ignore it. It bounds every
	// connection the Factory opens: the global cell's and each cell's
	// (ConnForCell).
	DialTimeout time.Duration
	// EtcdDialError, when set, is applied to the error of a failed etcd2
	// connection with its address, to explain it (topoctl diagnoses TLS
	// mismatches there). The result is returned instead.
	EtcdDialError func(addr string, err error) error
}

// EtcdOptions are the etcd2topo options of s for the members at addr
// ("host:port[,host:port...]").
func (s Settings) EtcdOptions(addr string) etcd2topo.Options {
	e := s.Etcd
	opts := etcd2topo.Options{
		TLSCAFile: e.CAFile, TLSCertFile: e.CertFile, TLSKeyFile: e.KeyFile, TLSServerName: e.ServerName,
		Username: e.User, Password: e.Password, AutoSyncInterval: e.AutoSync,
		LockTTL: s.ClaimTTL, DialTimeout: s.DialTimeout,
	}
	for ep := range strings.SplitSeq(addr, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			opts.Endpoints = append(opts.Endpoints, ep)
		}
	}
	return opts
}

// Factory returns the factory that opens impl's connections with s: etcd2,
// zk2 and consul with their settings, any other implementation from the
// registry (NoImplementation when none is registered under that name).
// The etcd2, zk2 and consul factories are topo.ContextFactory: the
// context of Open (or of the Server's ConnForCell) ends their dial, which
// then returns Timeout or Interrupted and leaves nothing running.
func (s Settings) Factory(impl string) (topo.Factory, error) {
	switch impl {
	case etcd2topo.FactoryName:
		return etcdFactory{s}, nil
	case zk2topo.FactoryName:
		z := s.ZooKeeper
		return zk2topo.Factory{Options: zk2topo.Options{Auth: z.Auth, AuthFile: z.AuthFile,
			TLSCAFile: z.CAFile, TLSCertFile: z.CertFile, TLSKeyFile: z.KeyFile, TLSServerName: z.ServerName,
			SessionTimeout: s.ClaimTTL, DialTimeout: s.DialTimeout}}, nil
	case consultopo.FactoryName:
		c := s.Consul
		return consultopo.NewFactory(consultopo.Options{
			Token: c.Token, TokenFile: c.TokenFile,
			CAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile, TLSServerName: c.ServerName,
			SessionTTL: s.ClaimTTL, DialTimeout: s.DialTimeout,
		}), nil
	}
	return topo.GetFactory(impl)
}

// etcdFactory opens etcd2 Conns with a Settings' etcd options and its
// EtcdDialError. It is a topo.ContextFactory: a cancelled or expired
// context ends the dial itself, not only the wait for it.
type etcdFactory struct{ s Settings }

// Create is CreateContext without a context.
func (f etcdFactory) Create(cell, addr, root string) (topo.Conn, error) {
	return f.CreateContext(context.Background(), cell, addr, root)
}

// CreateContext opens a Conn with etcd2topo.NewConnContext, bounded by ctx.
func (f etcdFactory) CreateContext(ctx context.Context, _, addr, root string) (topo.Conn, error) {
	c, err := etcd2topo.NewConnContext(ctx, f.s.EtcdOptions(addr), root)
	if err != nil && f.s.EtcdDialError != nil {
		return nil, f.s.EtcdDialError(addr, err)
	}
	if err != nil {
		return nil, err // no typed nil *Conn in a topo.Conn
	}
	return c, nil
}

var _ topo.ContextFactory = etcdFactory{}

// Open opens the topology whose global cell is at addr under root in the
// store impl, with s's settings, every connection decorated with mws (see
// topo.OpenServerContext for what ctx bounds and the errors: the
// factory's, NoImplementation for an unknown impl). Close the Server when
// done.
func (s Settings) Open(ctx context.Context, impl, addr, root string, mws ...topo.Middleware) (*topo.Server, error) {
	f, err := s.Factory(impl)
	if err != nil {
		return nil, err
	}
	return topo.OpenServerContext(ctx, impl, addr, root, topo.WithFactory(f), topo.WithMiddleware(mws...))
}
