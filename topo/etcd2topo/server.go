// Package etcd2topo is the etcd backend of topokit, registered as "etcd2".
// It talks to etcd v3 through go.etcd.io/etcd/client/v3 and keeps Vitess's
// store layout (see docs/layout-etcd.md), so that Vitess processes and
// topokit can share one etcd:
//
//   - a file is the key <root>/<path> holding the raw bytes; its Version is
//     the key's ModRevision;
//   - a lock on dir is an entry in the queue <root>/<dir>/locks/: a key
//     named after its lease id in decimal, attached to that lease, holding
//     the lock's contents;
//   - a candidate in leader election name is an entry in the queue
//     <root>/elections/<name>/locks/, holding the participant id;
//   - in a queue only entries count (keys directly under the prefix that
//     are attached to a lease), ordered by ModRevision: the oldest holds
//     the lock or leads, every other waits until no older entry is left.
//
// Locks taken with Lock and TryLock, and election candidacies, share the
// Conn's leases (TTL Options.LockTTL, 30 s by default), kept alive by the
// Conn independently of any caller's context: one lease, or more when
// entries of one queue through one Conn wait at once (an entry's name is
// its lease's, so one lease names one entry per queue; at most
// maxSharedLeases, 32). LockWithTTL (with another TTL), LockName, and
// entries beyond those use a lease of their own, revoked when the entry
// goes.
//
// Locks and elections (Lock, TryLock, LockWithTTL, LockName,
// NewLeaderParticipation, ResumeLeaderParticipation and the native
// elections) are the claims engine's (topo/claims): the Conn embeds it and
// gives it a driver of etcd's primitives. One concept per file: lease.go
// (the lease, the engine's session, and how long it is proven alive),
// driver.go (an entry: creating, listing, deleting and checking it, the
// entries ahead of it, and the watch that follows it), wait.go (waiting for the entry ahead to
// go), leader.go (the head of an election and its published value),
// resume.go (resume information), native.go (the native layout, a variant
// of the same driver), fence.go (a claim as Txn's IfHeld sees it),
// txn.go (transactions).
//
// # Invariants
//
// Which keys the library deletes, and when:
//   - a file key, only by Delete (or Update's put) of that path, never as
//     a side effect; the reserved paths (topo.IsReserved) are never
//     written, locked or campaigned on, so no file is ever taken for, or
//     removed as, a lock entry or candidate. A Conn whose root is itself
//     at a reserved place (inside a "locks" directory, say: its keys may
//     be entries) compares, in every write (Update, Delete, Txn's UpdateOp
//     and DeleteOp), the key's lease with none, so that it never rewrites
//     (nor detaches from its lease) or deletes another holder's entry:
//     a leased key there is no file, and Update finds it there
//     (NodeExists) while Delete finds no file (NoNode), as memorytopo
//     answers. The check is per write, not a refusal of such roots at
//     NewConn: memorytopo accepts them, reads and the leaseless keys
//     there (files other tools wrote) stay usable, and a root outside
//     the reserved places (any Vitess root, /vitess/global) is unchanged:
//     its writes carry no extra compare;
//   - an entry, only its own (the engine's Driver.Delete): by Unlock,
//     Resign, Stop, an abandoned or failed wait or claim, always in a
//     transaction comparing the key's ModRevision (a native key's
//     CreateRevision) with the revision the Conn put it at (only when the
//     outcome of the put is unknown, the key is deleted by name, compared
//     on its lease: the name is its lease's alone, see takeKey, and the
//     Conn does not reuse it until the delete succeeded); a candidate's
//     value key with its entry, in the same transaction; and by revoking
//     the entry's own lease or, at Close, every lease of the Conn;
//   - nothing else: keys other tools wrote at reserved paths stay, are
//     ignored by every queue and reported by List.
//
// Which request runs on which lease: an entry is put with the lease it is
// named after, on that lease only, in a transaction that writes only if
// the key does not exist; a candidate's value is put on its entry's lease,
// in the entry's transaction or guarded on the entry (Proclaim); a lease
// is renewed only by the Conn that granted it (or, after
// ResumeLeaderParticipation, adopted it); a lost lease is never renewed
// nor reused (the next lock grants a new one). A lease is the engine's
// session (claims.Session): declaring it lost ends every claim on it
// before anything else sees the loss.
//
// When a holder believes it holds: a lease is proven alive until the send
// time of its last renewal that etcd acknowledged plus its TTL, minus
// SafetyMargin(TTL). Past that, every lock and leadership on it is given
// up (Check returns LockLost, leadership contexts are cancelled, waits
// return LockLost) before etcd can expire the lease and hand them on.
// Check returns nil only within that time and after a linearizable read
// shows the entry unchanged (CreateRevision = ModRevision = the revision
// it was put at, on its lease).
//
// Reads: every read of the package is linearizable, etcd's default; none
// asks for a serializable read, so Check, lock and election decisions and
// Get all see every write acknowledged before they started.
//
// Errors: etcd's auth refusals are PermissionDenied, and every retry loop
// of the package (watches, queue waits, keepalives, cleanups) treats
// PermissionDenied as permanent.
//
// # Fencing tokens, Done, terms
//
// The fencing token of a lock (LockDescriptor.Token) is the revision etcd
// put the lock's entry at: its CreateRevision (equal to its ModRevision,
// as an entry is never rewritten while held). A leadership term's token
// (LeaderParticipation.Term) is its candidate entry's CreateRevision.
// Revisions only grow and survive lease loss, Conn and member restarts,
// and a holder (or leader) is the queue's entry with the lowest
// ModRevision, so every later holder's token is greater than every
// earlier one's (driver.go gives the argument).
//
// A lock's Done closes on Unlock, on the loss of its lease (expired or
// revoked in etcd, or no longer proven alive: see SafetyMargin), on
// Close, and when its entry is deleted or rewritten behind it, which a
// watch on the entry (driver.Monitor), opened at the first call of Done,
// tells, from the entry's own revision on. A term's Done
// is its leadership context's, which ends likewise.
//
// # Transactions
//
// Conn.Txn is one etcd Txn, one round trip when it succeeds (see there);
// IfHeld compares the ModRevision of the Fence's entry with its token:
// the entry is still there, never rewritten, so its lease is alive and
// nobody else holds.
//
// Watches are opened at the store's current revision, after which the
// current value is read, so that they are served by etcd's synced watcher
// group and see changes as soon as they are applied; after a transient
// error or a member change they resume from the last revision they saw;
// if that history was compacted they re-read the current values. The one
// exception is the watch that follows an entry (Done), opened just after
// the entry's own revision so that it needs no read.
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
	"google.golang.org/grpc/connectivity"

	"github.com/topokit/topokit/internal/clusterguard"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// FactoryName is the name the backend registers under.
const FactoryName = "etcd2"

// DefaultLockTTL is the lease TTL of locks taken with Lock and TryLock and
// of election candidacies, when Options.LockTTL is zero.
const DefaultLockTTL = 30 * time.Second

// DefaultNamedLockTTL is the lease TTL of locks taken with LockName, when
// Options.NamedLockTTL is zero.
const DefaultNamedLockTTL = 24 * time.Hour

// ErrClusterMismatch is wrapped (with code InvalidArgument) by the error
// of NewConn and NewConnContext when the endpoints given belong to
// different etcd clusters: their answers carry different cluster IDs.
// Nothing was read or written through the Conn then.
var ErrClusterMismatch = errors.New("etcd2topo: endpoints belong to different etcd clusters")

// clusterCheckTimeout bounds each endpoint's status request at open.
const clusterCheckTimeout = 2 * time.Second

// DefaultDialTimeout is the time allowed to connect to an endpoint, when
// Options.DialTimeout is zero.
const DefaultDialTimeout = 5 * time.Second

// Options are the settings of a Conn. The zero value of every field but
// Endpoints selects a default.
type Options struct {
	// Endpoints are the etcd members' client addresses, "host:port" (plain
	// TCP, or TLS when a TLS file is set) or full URLs ("https://h:p").
	// Required. With several, requests are spread over them and move off
	// an endpoint that refuses connections, but a write forwarded to a
	// raft leader that died, or sent to a member that stopped, waits out
	// the caller's deadline; etcdcluster.OpenConn opens a Conn that fails
	// over from those within about a second of a new leader's election.
	Endpoints []string

	// TLSCAFile is a PEM file of the CA certificates that sign the members'
	// certificates; TLSCertFile and TLSKeyFile are the PEM client
	// certificate and key presented to the members. Setting any of them
	// turns TLS on.
	TLSCAFile, TLSCertFile, TLSKeyFile string

	// TLSServerName overrides the name checked against the members'
	// certificates (by default each endpoint's host): every member's
	// certificate must then be valid for this one name. It is sent as the
	// gRPC authority of every request.
	TLSServerName string

	// Username and Password authenticate to etcd when auth is enabled.
	Username, Password string

	// DialTimeout bounds how long NewConn (and the Factory) waits for a
	// connection to a member, and the client's later reconnections to
	// an endpoint. Default 5 s.
	DialTimeout time.Duration

	// AutoSyncInterval, when positive, makes the client refresh its
	// endpoints from the cluster's member list that often, so that a Conn
	// follows members being added and removed (for example by package
	// etcdcluster) instead of keeping only the endpoints it was given.
	// Zero (the default) keeps the given endpoints.
	AutoSyncInterval time.Duration

	// LockTTL is the lease TTL, rounded up to whole seconds, of Lock,
	// TryLock and election candidacies: how long they survive the
	// process's death or its loss of etcd. Default 30 s.
	LockTTL time.Duration

	// NamedLockTTL is the lease TTL, rounded up to whole seconds, of
	// LockName. Default 24 h.
	NamedLockTTL time.Duration

	// MaxTxnOps is the most compares, and the most writes, that Txn sends
	// in one etcd transaction (see Txn; its failure reads are never more
	// than its compares);
	// larger transactions are refused with InvalidArgument before anything
	// is sent. Set it to the cluster's --max-txn-ops. Default 128
	// (DefaultMaxTxnOps, etcd's default).
	MaxTxnOps int

	// MaxRequestBytes is the largest transaction request Txn sends, in
	// bytes (see Txn); larger ones are refused with InvalidArgument before
	// anything is sent. Set it to the cluster's --max-request-bytes.
	// Default 1.5 MiB (DefaultMaxRequestBytes, etcd's default).
	MaxRequestBytes int

	// Logger receives the backend's and the etcd client's warnings. Nil
	// means slog.Default().
	Logger *slog.Logger

	// DialOptions are added to the etcd client's gRPC dial options, after
	// the client's own (so a unary interceptor given here runs inside
	// clientv3's retries, once per attempt clientv3 makes). Package
	// etcdcluster's OpenConn uses it for its failover; most callers leave
	// it empty.
	DialOptions []grpc.DialOption

	// dialOptions are added to the etcd client's gRPC dial options: a
	// test seam (the benchmarks count the requests a Conn sends with an
	// interceptor).
	dialOptions []grpc.DialOption
	// defect is given to the Conn's claims engine: for the mutation kit
	// (mutation.EngineDefect) only.
	defect claims.Defect
}

// Factory opens etcd2 Conns with its Options: the serverAddress given to
// Create replaces Options.Endpoints, every other option (TLS, credentials,
// TTLs, DialTimeout, Logger) applies to every Conn it opens. So
// topo.WithFactory(etcd2topo.NewFactory(opts)) opens the global cell and
// every cell named by a CellInfo record with opts. The zero value (the one
// registered as "etcd2") uses the defaults. It implements
// topo.ContextFactory and is safe for concurrent use.
type Factory struct {
	// Options are the base options of every Conn; Endpoints is replaced
	// by the address given to Create.
	Options Options
}

// NewFactory returns a Factory that opens every Conn with opts (its
// Endpoints are replaced by the address of each Create).
func NewFactory(opts Options) *Factory { return &Factory{Options: opts} }

// Create is CreateContext without a context: the dial is bounded by
// Options.DialTimeout alone.
func (f Factory) Create(cell, serverAddress, root string) (topo.Conn, error) {
	return f.CreateContext(context.Background(), cell, serverAddress, root)
}

// CreateContext opens a Conn (NewConnContext) with the factory's Options
// to the etcd cluster at serverAddress, a comma-separated list of
// "host:port" client addresses or URLs, rooted at root (for example
// "/vitess/global"). It returns InvalidArgument for an empty address,
// InvalidPath for a malformed root, Unavailable naming the address when no
// member answers within Options.DialTimeout, and Timeout or Interrupted
// when ctx ends first. The cell name is not used.
func (f Factory) CreateContext(ctx context.Context, cell, serverAddress, root string) (topo.Conn, error) {
	opts := f.Options
	opts.Endpoints = backendkit.SplitAddresses(serverAddress)
	return NewConnContext(ctx, opts, root)
}

var _ topo.ContextFactory = Factory{}

func init() { topo.MustRegisterFactory(FactoryName, Factory{}) }

// Conn is a connection to one cell's store in etcd, rooted at a key
// prefix. It implements topo.Conn (see there for the contract); the
// etcd-specific behaviour is described on the package and on each method.
// It is safe for concurrent use.
type Conn struct {
	cli  *clientv3.Client
	opts Options
	log  *slog.Logger

	// rootPrefix is prepended to every canonical path to form a key: the
	// root followed by "/", or "" for an empty root.
	rootPrefix string

	// inClaims says that the root is at a reserved place (topo.IsReserved:
	// inside a "locks" directory, say), where every key of the Conn may be
	// a lock or election entry: its writes then leave leased keys alone
	// (see leaseless).
	inClaims bool

	// ctx lives as long as the Conn; Close cancels it, which ends watches,
	// keepalives and waits.
	ctx    context.Context
	cancel context.CancelFunc

	grantMu sync.Mutex // serializes grants of the shared leases

	closed atomic.Bool // set first thing in Close

	// clusterID is the id of the etcd cluster, once an answer told it (0
	// before), for IfHeld with Fences of other Conns.
	clusterID atomic.Uint64

	mu        sync.Mutex
	shared    []*lease              // the leases of Lock, TryLock and elections (sharedLease)
	leases    map[*lease]struct{}   // every live lease, for Close
	keysInUse map[string]struct{}   // entry names taken, see takeKey
	views     map[string]*queueView // the views of queues with waiters, by prefix (view.go)
	waiting   map[string]int        // WaitGone calls under way, by queue prefix

	// Claims are the Conn's locks and elections: eng, run over the Conn's
	// driver (driver.go).
	claims.Claims
	eng *claims.Engine
}

// NewConn is NewConnContext without a context: the dial is bounded by
// opts.DialTimeout alone.
func NewConn(opts Options, root string) (*Conn, error) {
	return NewConnContext(context.Background(), opts, root)
}

// NewConnContext opens a Conn with opts, rooted at root: files are the
// keys <root>/<path>. root is a key prefix such as "/vitess/global";
// trailing slashes are ignored.
//
// It waits until the client has a connection to a member (TCP and, with
// TLS, the handshake done), at most opts.DialTimeout (default 5 s) and
// until ctx ends; with opts.Username set it also authenticates, within the
// same bound. It returns InvalidArgument when opts has no endpoint or
// unreadable TLS files, InvalidPath for a malformed root, Unavailable
// naming the endpoints when no member answers within the bound (a dead
// address, a refused TLS handshake), Timeout or Interrupted (naming the
// endpoints) when ctx ends first, and PermissionDenied when etcd refuses
// the credentials. With several endpoints it asks each for its status
// (at most 2 s) and returns InvalidArgument wrapping ErrClusterMismatch,
// naming the endpoints and cluster IDs, when they belong to different
// clusters (an endpoint that does not answer then is not checked). Once it returned, a member that goes away shows up as
// Unavailable or Timeout errors from the Conn's calls.
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
		var err error
		if tlsCfg, err = info.ClientConfig(); err != nil {
			return nil, backendkit.Wrap(topo.InvalidArgument, root, fmt.Errorf("etcd2topo: TLS settings: %w", err))
		}
	}
	dialOptions := append(slices.Clone(opts.DialOptions), opts.dialOptions...)
	if tlsCfg != nil && opts.TLSServerName != "" {
		// grpc's TLS credentials check the server's certificate against
		// the connection's authority (each endpoint's host), not the
		// tls.Config's ServerName: set the authority to the name.
		dialOptions = append(slices.Clone(dialOptions), grpc.WithAuthority(opts.TLSServerName))
	}
	guard := new(clusterguard.Guard)
	dialOptions = append(slices.Clone(dialOptions), guard.DialOption())
	// The dial bound: DialTimeout, or less when ctx ends sooner.
	dctx, cancelDial := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancelDial()
	dialTimeout := opts.DialTimeout
	if dl, ok := dctx.Deadline(); ok {
		dialTimeout = max(time.Until(dl), time.Millisecond)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            opts.Endpoints,
		DialTimeout:          dialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		AutoSyncInterval:     opts.AutoSyncInterval,
		TLS:                  tlsCfg,
		Username:             opts.Username,
		Password:             opts.Password,
		Logger:               zap.New(slogCore{lg}),
		DialOptions:          dialOptions,
	})
	if err != nil {
		// With a username the client authenticates at once, so an
		// unreachable etcd or bad credentials show up here.
		return nil, dialError(ctx, addr, opts.DialTimeout, err)
	}
	if err := waitConnected(dctx, cli.ActiveConnection()); err != nil {
		_ = cli.Close()
		return nil, dialError(ctx, addr, opts.DialTimeout, err)
	}
	// Endpoints of different clusters (a member's data lost and the member
	// bootstrapped anew?) are refused; one that does not answer within
	// clusterCheckTimeout is not checked. guard is pinned to the cluster.
	if m := guard.CheckEndpoints(ctx, cli, opts.Endpoints, clusterCheckTimeout); m != "" {
		_ = cli.Close()
		return nil, backendkit.Wrap(topo.InvalidArgument, addr,
			fmt.Errorf("%w: %s; refusing to use them together (was a member's data lost and the member bootstrapped anew?)", ErrClusterMismatch, m))
	}

	rootPrefix := ""
	if root != "" {
		rootPrefix = strings.TrimRight(root, "/") + "/"
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		cli:        cli,
		opts:       opts,
		log:        lg,
		rootPrefix: rootPrefix,
		inClaims:   topo.IsReserved(canonRoot),
		ctx:        ctx,
		cancel:     cancel,
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

// dialError classifies err, a failure to connect to (or authenticate with)
// the members at addr: ctx's Timeout or Interrupted when the caller's ctx
// ended, the store's refusal (PermissionDenied, ...) when a member
// answered, and Unavailable naming addr otherwise.
func dialError(ctx context.Context, addr string, bound time.Duration, err error) error {
	if ctx.Err() != nil {
		return backendkit.FromContext(ctx, addr)
	}
	switch code := codeOf(err); code {
	case topo.Timeout, topo.Interrupted, topo.Unavailable:
		return backendkit.Wrap(topo.Unavailable, addr,
			fmt.Errorf("etcd2topo: no etcd member answered at %s within %v: %w", addr, bound, err))
	default:
		return backendkit.Wrap(code, addr, fmt.Errorf("etcd2topo: connecting to %s: %w", addr, err))
	}
}

// Client returns the underlying etcd client, for operations topo.Conn does
// not offer. It is closed by Close.
func (c *Conn) Client() *clientv3.Client { return c.cli }

// key returns the etcd key of a canonical path.
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

// isClosed reports whether Close was called.
func (c *Conn) isClosed() bool { return c.closed.Load() }

// closedErr returns a Closed error for path once Close was called.
func (c *Conn) closedErr(path string) error {
	if c.isClosed() {
		return topo.NewError(topo.Closed, path)
	}
	return nil
}

// Close revokes the Conn's leases (releasing its locks and election
// candidacies at once, rather than after their TTL; it waits at most 2 s
// for etcd to answer), ends its watches with
// Interrupted and closes the etcd client. Later calls return Closed. Close
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

	// Revoke first, with the client still open, so that waiters elsewhere
	// get the locks now.
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
}

// slogCore is a zapcore.Core that hands the etcd client's warnings and
// errors to slog, so that the whole library logs through log/slog.
type slogCore struct{ l *slog.Logger }

// Enabled passes warnings and errors only.
func (s slogCore) Enabled(lvl zapcore.Level) bool { return lvl >= zapcore.WarnLevel }

// With adds fields to every later entry.
func (s slogCore) With(fields []zapcore.Field) zapcore.Core {
	return slogCore{s.l.With(fieldsToAttrs(fields)...)}
}

// Check accepts the entries Enabled passes.
func (s slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if s.Enabled(e.Level) {
		return ce.AddCore(e, s)
	}
	return ce
}

// Write logs one entry through slog.
func (s slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	lvl := slog.LevelWarn
	switch {
	case e.Level >= zapcore.ErrorLevel:
		lvl = slog.LevelError
	case strings.HasPrefix(e.Message, "retrying of unary invoker failed"):
		// Every failed call is logged so, including those whose context
		// was cancelled on purpose; the caller gets the error anyway.
		lvl = slog.LevelDebug
	}
	s.l.Log(context.Background(), lvl, "etcd client: "+e.Message, fieldsToAttrs(fields)...)
	return nil
}

// Sync does nothing: slog handlers flush on their own.
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
