// Package etcd2topo is the etcd backend of topokit, registered as "etcd2".
// It talks to etcd v3 through go.etcd.io/etcd/client/v3 and keeps Vitess's
// store layout (docs/layout-etcd.md), so that Vitess processes and topokit
// can share one etcd:
//
//   - a file is the key <root>/<path> holding the raw bytes; its Version is
//     the key's ModRevision;
//   - a lock on dir is an entry in the queue <root>/<dir>/locks/: a key
//     named after its lease id in decimal, attached to that lease, holding
//     the lock's contents;
//   - a candidate in leader election name is an entry in the queue
//     <root>/elections/<name>/locks/, holding the participant id (its
//     published value: doc.go);
//   - in a queue only entries count (keys directly under the prefix that
//     are attached to a lease), ordered by ModRevision: the oldest holds
//     the lock or leads, every other waits until no older entry is left.
//
// Lock, TryLock and election candidacies share the Conn's leases (TTL
// Options.LockTTL), kept alive by the Conn whatever the caller's context:
// one lease names one entry per queue, so entries of one queue waiting at
// once through one Conn take further shared leases, at most
// maxSharedLeases (32). LockWithTTL (with another TTL), LockName and
// entries beyond those have a lease of their own, revoked when the entry
// goes.
//
// Locks and elections, native ones included, are the claims engine's
// (topo/claims), run over a driver of etcd's primitives (driver.go).
//
// # Invariants
//
// Which keys the library deletes, and when:
//   - a file key, only by Delete (or Update's put) of that path; reserved
//     paths (topo.IsReserved) are never written, locked or campaigned on,
//     so no file is taken for, or removed as, an entry. A Conn rooted at a reserved place (inside a
//     "locks" directory, say) compares in every write (Update, Delete,
//     Txn's UpdateOp, DeleteOp) the key's lease with none: a leased key is
//     no file there, so Update finds it (NodeExists) and Delete does not
//     (NoNode), as memorytopo. Other roots carry no extra compare;
//   - an entry, only its own (Driver.Delete): by Unlock, Resign, Stop, an
//     abandoned or failed wait or claim, in a transaction comparing its
//     ModRevision (a native key's CreateRevision) with the revision the
//     Conn put it at; when the put's outcome is unknown, by name, compared
//     on its lease (the name is its lease's alone, and the Conn does not
//     reuse it until the delete succeeded: takeKey); a candidate's value
//     key in the same transaction; and by revoking the entry's own lease,
//     or every lease of the Conn at Close;
//   - nothing else: keys other tools wrote at reserved paths stay, are
//     ignored by every queue and reported by List.
//
// Sessions: an entry is put in a transaction that writes only if its key
// does not exist, on the lease it is named after; a candidate's value on
// its entry's lease. A lease is renewed only by the Conn that granted (or
// resumed) it, and a lost lease is never renewed nor reused. A lease is
// the engine's claims.Session: declaring it lost ends every claim on it
// before anything else sees the loss.
//
// When a holder believes it holds: a lease is proven alive until the send
// time of its last acknowledged renewal plus its TTL, minus
// SafetyMargin(TTL); past that every claim on it is given up (Check
// returns LockLost, leadership contexts end) before etcd can expire the
// lease and hand the claims on. Check returns nil only within that time
// and after a linearizable read shows the entry unchanged since its put.
//
// Every read is linearizable (etcd's default). etcd's auth refusals are
// PermissionDenied, which every retry loop treats as permanent.
//
// # Fencing tokens, Done, terms
//
// A lock's token (LockDescriptor.Token) and a term's
// (LeaderParticipation.Term) are the revision etcd put the entry at: its
// CreateRevision, equal to its ModRevision while held. Revisions only grow
// and survive lease loss and restarts, and the engine grants an entry only
// once no older one is left in its queue, so later holders' tokens are
// greater.
//
// A lock's Done closes on Unlock, on the loss of its lease (see
// SafetyMargin), on Close, and when its entry is deleted or rewritten
// behind it, which a watch on the entry from its own revision, opened at
// the first call of Done, tells (driver.Monitor). A term's Done is its
// leadership context's, which ends likewise.
//
// Watches are opened at the store's current revision, then the current
// value is read (newStream); they resume from the last revision seen, and
// re-read the current values if that history was compacted.
package etcd2topo

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"

	"github.com/topokit/topokit/internal/clusterguard"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// MaxReconnectDelay is the longest a Conn waits (give or take a fifth)
// between two attempts to dial again a member it lost: the cap of its
// gRPC reconnection backoff, which starts at 250 ms and grows 1.6 times
// per failed attempt. Options.DialOptions may set other ConnectParams.
const MaxReconnectDelay = 2 * time.Second

// FactoryName is the name the backend registers under.
const FactoryName = "etcd2"

// The defaults of Options' zero fields; the Txn limits are etcd's own
// defaults (--max-txn-ops, --max-request-bytes: 1.5 MiB).
const (
	DefaultLockTTL         = 30 * time.Second // Options.LockTTL
	DefaultNamedLockTTL    = 24 * time.Hour   // Options.NamedLockTTL
	DefaultDialTimeout     = 5 * time.Second  // Options.DialTimeout
	DefaultMaxTxnOps       = 128              // Options.MaxTxnOps
	DefaultMaxRequestBytes = 3 << 19          // Options.MaxRequestBytes
)

// ErrClusterMismatch is wrapped (with code InvalidArgument) by the error
// of NewConn and NewConnContext when the endpoints given belong to
// different etcd clusters: their answers carry different cluster IDs.
// Nothing was read or written through the Conn then.
var ErrClusterMismatch = errors.New("etcd2topo: endpoints belong to different etcd clusters")

// clusterCheckTimeout bounds each endpoint's status request at open.
const clusterCheckTimeout = 2 * time.Second

// Options are the settings of a Conn. The zero value of every field but
// Endpoints selects a default.
type Options struct {
	// Endpoints are the members' client addresses, "host:port" (TLS when
	// a TLS file is set) or URLs ("https://h:p"). Required. Requests move
	// off an endpoint that refuses connections, but a write to a dead
	// raft leader or a stopped member waits out the caller's deadline;
	// etcdcluster.OpenConn's Conns fail over within about a second.
	Endpoints []string

	// TLSCAFile is the PEM CA bundle of the members' certificates;
	// TLSCertFile and TLSKeyFile the PEM client certificate and key.
	// Setting any of them turns TLS on.
	TLSCAFile, TLSCertFile, TLSKeyFile string

	// TLSServerName, if set, is the one name every member's certificate
	// must be valid for (by default each endpoint's host); it is sent as
	// the gRPC authority.
	TLSServerName string

	// Username and Password authenticate to etcd when auth is enabled.
	Username, Password string

	// DialTimeout bounds NewConn's wait for a member, and later
	// reconnections. Default 5 s.
	DialTimeout time.Duration

	// AutoSyncInterval, when positive, refreshes the endpoints from the
	// cluster's member list that often, following members added and
	// removed. Zero (the default) keeps the given endpoints.
	AutoSyncInterval time.Duration

	// LockTTL is the lease TTL, rounded up to whole seconds, of Lock,
	// TryLock and candidacies: how long they outlive their process or its
	// loss of etcd. Default 30 s (DefaultLockTTL).
	LockTTL time.Duration

	// NamedLockTTL is LockName's lease TTL, rounded up to whole seconds.
	// Default 24 h.
	NamedLockTTL time.Duration

	// MaxTxnOps is the most compares, and the most writes, of one Txn;
	// larger ones are refused with InvalidArgument before anything is
	// sent. Set it to the cluster's --max-txn-ops. Default 128.
	MaxTxnOps int

	// MaxRequestBytes is the largest Txn request, in bytes; larger ones
	// are refused with InvalidArgument before anything is sent. Set it to
	// the cluster's --max-request-bytes. Default 1.5 MiB.
	MaxRequestBytes int

	// Logger receives the backend's and the etcd client's warnings
	// (default slog.Default()).
	Logger *slog.Logger

	// DialOptions are added after the etcd client's own gRPC dial options
	// (a unary interceptor here runs once per clientv3 retry).
	// etcdcluster.OpenConn uses it for its failover.
	DialOptions []grpc.DialOption

	dialOptions []grpc.DialOption // test seam: request counting
	defect      claims.Defect     // for the mutation kit only
}

// Factory opens etcd2 Conns with its Options, Endpoints replaced by the
// serverAddress given to Create: topo.WithFactory(NewFactory(opts)) opens
// the global cell and every cell of a CellInfo record with opts. The zero
// value (registered as "etcd2") uses the defaults. It implements
// topo.ContextFactory and is safe for concurrent use.
type Factory struct {
	Options Options // of every Conn; Endpoints is replaced
}

// NewFactory returns a Factory that opens every Conn with opts.
func NewFactory(opts Options) *Factory { return &Factory{Options: opts} }

// Create is CreateContext without a context: the dial is bounded by
// Options.DialTimeout alone.
func (f Factory) Create(cell, serverAddress, root string) (topo.Conn, error) {
	return f.CreateContext(context.Background(), cell, serverAddress, root)
}

// CreateContext opens a Conn (NewConnContext) to the etcd cluster at
// serverAddress, a comma-separated list of client addresses or URLs,
// rooted at root (such as "/vitess/global"); the cell is not used. Errors
// are NewConnContext's (InvalidArgument for an empty address).
func (f Factory) CreateContext(ctx context.Context, cell, serverAddress, root string) (topo.Conn, error) {
	opts := f.Options
	opts.Endpoints = backendkit.SplitAddresses(serverAddress)
	c, err := NewConnContext(ctx, opts, root)
	if err != nil {
		return nil, err // no typed nil *Conn in a topo.Conn
	}
	return c, nil
}

var _ topo.ContextFactory = Factory{}

func init() { topo.MustRegisterFactory(FactoryName, Factory{}) }

// Conn is a connection to one cell's store in etcd, rooted at a key
// prefix. It implements topo.Conn; what is etcd's own is on the package
// and each method. It is safe for concurrent use.
type Conn struct {
	cli       *clientv3.Client
	cliCancel context.CancelFunc // cancels cli's base context (Close)
	opts      Options
	log       *slog.Logger

	rootPrefix string // the root and "/", or "" for an empty root
	// inClaims: the root is at a reserved place, where the writes compare
	// the key's lease with none (see the package doc, Invariants).
	inClaims bool

	ctx    context.Context // cancelled by Close: ends watches, keepalives, waits
	cancel context.CancelFunc

	grantMu sync.Mutex          // serializes grants of the first shared lease
	closed  atomic.Bool         // set first thing in Close
	guard   *clusterguard.Guard // pins cli to one cluster, whose ID it has once one answer came (IfHeld)

	mu        sync.Mutex
	shared    []*lease              // the leases of Lock, TryLock and elections (sharedLease)
	leases    map[*lease]struct{}   // every live lease, for Close
	keysInUse map[string]struct{}   // entry names taken, see takeKey
	views     map[string]*queueView // the views of queues with waiters, by prefix (view.go)
	waiting   map[string]int        // WaitGone calls under way, by queue prefix

	claims.Claims // the Conn's locks and elections: eng
	eng           *claims.Engine
}

// NewConn is NewConnContext without a context: the dial is bounded by
// opts.DialTimeout alone.
func NewConn(opts Options, root string) (*Conn, error) {
	return NewConnContext(context.Background(), opts, root)
}

// NewConnContext opens a Conn with opts, rooted at root, a key prefix
// such as "/vitess/global" (trailing slashes ignored).
//
// It waits, at most opts.DialTimeout and while ctx lives, for a connection
// to a member (with TLS, the handshake done) and, with a Username, for
// authentication. It returns InvalidArgument for no endpoint or unreadable
// TLS files, InvalidPath for a malformed root, Unavailable naming the
// endpoints when no member answers in time (a dead address, a refused
// handshake; its cause a *topo.UnreachableError), Timeout or Interrupted when ctx ends first, and
// PermissionDenied for refused credentials. With several endpoints it asks
// each for its status (at most 2 s; one that does not answer is not
// checked): InvalidArgument wrapping ErrClusterMismatch, naming endpoints
// and cluster IDs, when they belong to different clusters.
func NewConnContext(ctx context.Context, opts Options, root string) (*Conn, error) {
	if len(opts.Endpoints) == 0 {
		return nil, backendkit.Wrap(topo.InvalidArgument, root, errors.New("etcd2topo: no endpoint given"))
	}
	canonRoot, err := topo.CleanDirPath(root)
	if err != nil {
		return nil, err
	}
	opts.DialTimeout = backendkit.OrDefault(opts.DialTimeout, DefaultDialTimeout)
	opts.LockTTL = backendkit.OrDefault(opts.LockTTL, DefaultLockTTL)
	opts.NamedLockTTL = backendkit.OrDefault(opts.NamedLockTTL, DefaultNamedLockTTL)
	opts.MaxTxnOps = backendkit.OrDefault(opts.MaxTxnOps, DefaultMaxTxnOps)
	opts.MaxRequestBytes = backendkit.OrDefault(opts.MaxRequestBytes, DefaultMaxRequestBytes)
	addr := strings.Join(opts.Endpoints, ",")
	if err := backendkit.CheckContext(ctx, addr); err != nil {
		return nil, err
	}
	lg := cmp.Or(opts.Logger, slog.Default()).With("backend", FactoryName, "root", root)

	var tlsCfg *tls.Config
	if opts.TLSCAFile != "" || opts.TLSCertFile != "" || opts.TLSKeyFile != "" {
		info := transport.TLSInfo{
			CertFile:      opts.TLSCertFile,
			KeyFile:       opts.TLSKeyFile,
			TrustedCAFile: opts.TLSCAFile,
			ServerName:    opts.TLSServerName,
		}
		if tlsCfg, err = info.ClientConfig(); err != nil {
			return nil, backendkit.Wrap(topo.InvalidArgument, root, fmt.Errorf("etcd2topo: TLS settings: %w", err))
		}
	}
	// gRPC's default reconnection backoff grows to 120 s: a member back
	// after an outage of a minute was dialled again only some 25 s later,
	// every call failing Unavailable (or waiting out its deadline)
	// meanwhile. An attempt still gets gRPC's default 20 s to connect.
	reconnect := grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: 20 * time.Second,
		Backoff: backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: MaxReconnectDelay}})
	dialOptions := slices.Concat([]grpc.DialOption{reconnect}, opts.DialOptions, opts.dialOptions)
	if tlsCfg != nil && opts.TLSServerName != "" {
		// grpc checks certificates against the authority, not ServerName.
		dialOptions = append(dialOptions, grpc.WithAuthority(opts.TLSServerName))
	}
	guard := new(clusterguard.Guard)
	dialOptions = append(dialOptions, guard.DialOptions()...)
	dctx, cancelDial := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancelDial()
	dl, _ := dctx.Deadline() // ctx's or DialTimeout's, whichever is first
	// clientv3.New authenticates (with a Username) under the client's own
	// context and DialTimeout, not ctx: its base context is cancelled when
	// ctx ends during New, so that the open ends with ctx. Once New has
	// returned it never is (the client outlives ctx); Close cancels it.
	base, cancelBase := context.WithCancel(context.Background())
	stopBase := context.AfterFunc(ctx, cancelBase)
	cli, err := clientv3.New(clientv3.Config{
		Context:              base,
		Endpoints:            opts.Endpoints,
		DialTimeout:          max(time.Until(dl), time.Millisecond),
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		AutoSyncInterval:     opts.AutoSyncInterval,
		TLS:                  tlsCfg,
		Username:             opts.Username,
		Password:             opts.Password,
		Logger:               zap.New(slogCore{lg}),
		DialOptions:          dialOptions,
	})
	fail := func(err error) (*Conn, error) {
		if cli != nil {
			_ = cli.Close()
		}
		cancelBase()
		return nil, err
	}
	switch {
	case !stopBase(): // ctx ended during New: its client (if any) is cancelled
		return fail(backendkit.FromContext(ctx, addr))
	case err != nil: // with a username the client authenticates at once
		return fail(dialError(ctx, opts.Endpoints, opts.DialTimeout, err))
	}
	if err := waitConnected(dctx, cli.ActiveConnection()); err != nil {
		return fail(dialError(ctx, opts.Endpoints, opts.DialTimeout, err))
	}
	// guard is pinned to the cluster here.
	if m := guard.CheckEndpoints(ctx, cli, opts.Endpoints, clusterCheckTimeout); m != "" {
		return fail(backendkit.Wrap(topo.InvalidArgument, addr,
			fmt.Errorf("%w: %s; refusing to use them together (was a member's data lost and the member bootstrapped anew?)", ErrClusterMismatch, m)))
	}
	if ctx.Err() != nil { // ctx ended during the check, which then checked nothing
		return fail(backendkit.FromContext(ctx, addr))
	}

	rootPrefix := ""
	if root != "" {
		rootPrefix = strings.TrimRight(root, "/") + "/"
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		cli:        cli,
		cliCancel:  cancelBase,
		opts:       opts,
		log:        lg,
		rootPrefix: rootPrefix,
		inClaims:   topo.IsReserved(canonRoot),
		ctx:        ctx,
		cancel:     cancel,
		guard:      guard,
		leases:     map[*lease]struct{}{},
		keysInUse:  map[string]struct{}{},
		views:      map[string]*queueView{},
		waiting:    map[string]int{},
	}
	c.eng = claims.New(driver{c}, claims.Options{Defect: opts.defect})
	c.Claims = c.eng
	return c, nil
}

// waitConnected waits until cc has a ready connection to a member, or ctx
// ends (its error is returned then).
func waitConnected(ctx context.Context, cc *grpc.ClientConn) error {
	cc.Connect()
	for {
		st := cc.GetState()
		switch st {
		case connectivity.Ready:
			return nil
		case connectivity.Shutdown:
			return errors.New("the client connection was shut down")
		}
		if !cc.WaitForStateChange(ctx, st) {
			return ctx.Err()
		}
	}
}

// dialError classifies err, a failure to connect or authenticate at the
// endpoints eps: ctx's error, a member's refusal (PermissionDenied, ...),
// or Unavailable with a *topo.UnreachableError.
func dialError(ctx context.Context, eps []string, bound time.Duration, err error) error {
	addr := strings.Join(eps, ",")
	if ctx.Err() != nil {
		return backendkit.FromContext(ctx, addr)
	}
	switch code := codeOf(err); code {
	case topo.Timeout, topo.Interrupted, topo.Unavailable:
		return backendkit.Wrap(topo.Unavailable, addr, &topo.UnreachableError{Addrs: eps,
			Err: fmt.Errorf("etcd2topo: no etcd member answered at %s within %v: %w", addr, bound, err)})
	default:
		return backendkit.Wrap(code, addr, fmt.Errorf("etcd2topo: connecting to %s: %w", addr, err))
	}
}

// Client returns the underlying etcd client, for operations topo.Conn does
// not offer. It is closed by Close.
func (c *Conn) Client() *clientv3.Client { return c.cli }

func (c *Conn) key(p string) string { return c.rootPrefix + p }

// dirPrefix returns the key prefix of everything under a canonical
// directory ("" for the root).
func (c *Conn) dirPrefix(dir string) string {
	if dir == "" {
		return c.rootPrefix
	}
	return c.rootPrefix + dir + "/"
}

// rel returns the canonical path of a key under the root.
func (c *Conn) rel(key []byte) string { return string(key[len(c.rootPrefix):]) }

func (c *Conn) isClosed() bool { return c.closed.Load() }

func (c *Conn) closedErr(path string) error {
	if c.isClosed() {
		return topo.NewError(topo.Closed, path)
	}
	return nil
}

// Close revokes the Conn's leases, releasing its claims at once rather
// than after their TTL (waiting at most 2 s for etcd), ends its watches
// with Interrupted and closes the client. Later calls return Closed. Close
// is idempotent and safe for concurrent use.
func (c *Conn) Close() {
	c.eng.Close()
	if c.closed.Swap(true) {
		return
	}
	c.mu.Lock()
	leases := slices.Collect(maps.Keys(c.leases))
	c.shared = nil
	c.mu.Unlock()

	// Revoke with the client still open: waiters elsewhere get the locks now.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	var wg sync.WaitGroup
	for _, l := range leases {
		l.markLost()
		wg.Go(func() {
			if _, err := c.cli.Revoke(ctx, l.id); err != nil {
				c.log.Debug("revoking lease at close", "lease", fmt.Sprintf("%x", l.id), "err", err)
			}
		})
	}
	wg.Wait()
	cancel()
	c.cancel()
	if err := c.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		c.log.Debug("closing etcd client", "err", err)
	}
	c.cliCancel()
}

// slogCore is a zapcore.Core that hands the etcd client's warnings and
// errors to slog.
type slogCore struct{ l *slog.Logger }

func (s slogCore) Enabled(lvl zapcore.Level) bool { return lvl >= zapcore.WarnLevel }

func (s slogCore) With(fields []zapcore.Field) zapcore.Core {
	return slogCore{s.l.With(fieldsToAttrs(fields)...)}
}

func (s slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if s.Enabled(e.Level) {
		return ce.AddCore(e, s)
	}
	return ce
}

func (s slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	lvl := slog.LevelWarn
	switch {
	case e.Level >= zapcore.ErrorLevel:
		lvl = slog.LevelError
	case strings.HasPrefix(e.Message, "retrying of unary invoker failed"):
		// Every failed call, cancelled ones too; the caller has the error.
		lvl = slog.LevelDebug
	}
	s.l.Log(context.Background(), lvl, "etcd client: "+e.Message, fieldsToAttrs(fields)...)
	return nil
}

func (s slogCore) Sync() error { return nil }

func fieldsToAttrs(fields []zapcore.Field) []any {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]any, 0, 2*len(enc.Fields))
	for k, v := range enc.Fields {
		attrs = append(attrs, k, v)
	}
	return attrs
}
