package zk2topo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// FactoryName is the name zk2topo registers its factory under.
const FactoryName = "zk2"

// DefaultSessionTimeout is the ZooKeeper session timeout a Conn asks for when
// Options.SessionTimeout is zero. The server clamps it between its
// minSessionTimeout and maxSessionTimeout (by default 2 and 20 tickTimes).
const DefaultSessionTimeout = 30 * time.Second

// DefaultDialTimeout is the default of Options.DialTimeout.
const DefaultDialTimeout = 5 * time.Second

// DefaultMaxConcurrency is the default of Options.MaxConcurrency.
const DefaultMaxConcurrency = 64

const (
	locksDir     = "locks"
	electionsDir = "elections"
)

func init() { topo.MustRegisterFactory(FactoryName, Factory{}) }

// Options configures a Conn. The zero value connects with the defaults.
type Options struct {
	// Servers lists the ensemble's "host:port" client addresses.
	Servers []string

	// SessionTimeout is the session timeout to ask the server for (which
	// clamps it); zero means DefaultSessionTimeout. The server drops the
	// Conn's locks and leadership this long after it stops hearing from it.
	SessionTimeout time.Duration

	// Auth is an authentication "scheme:auth" added to the session, for
	// example "digest:user:password". Empty means none.
	Auth string

	// AuthFile names a file holding a "scheme:auth" (white space trimmed),
	// read by NewConn (at most backendkit.MaxSecretFileSize bytes: a
	// larger file is InvalidArgument); Auth wins when both are set.
	AuthFile string

	// ACL is given to every znode the Conn creates. Nil means world-open
	// (zk.WorldACL(zk.PermAll)); with digest auth, zk.AuthACL(zk.PermAll)
	// restricts the znodes to the authenticated identity.
	ACL []zk.ACL

	// MaxConcurrency bounds the requests in flight at once (abandoned ones
	// included, until answered); zero means DefaultMaxConcurrency.
	MaxConcurrency int

	// SafetyMargin is how long before the server may expire the session
	// the Conn gives it up: its locks report LockLost, its leadership ends,
	// a new session serves later calls (package doc, Sessions). Zero means
	// a fifth of the negotiated timeout; it is capped at half. An idle
	// session is given up when an answer takes over 7/12 of the timeout
	// minus the margin.
	SafetyMargin time.Duration

	// LinearizableReads makes every read (lock and election reads and
	// watches included) send a read barrier first, pipelined (no extra
	// round trip, but the read waits for it; see barrierThen), so that it
	// sees every write any client had acknowledged before it started; each
	// read is then a transaction (a log write on a quorum) and needs READ
	// permission on "/". Without it a Conn sees its own writes but may miss
	// another client's latest. A context of topo.WithLinearizableRead sends
	// the barrier anyway.
	LinearizableReads bool

	// MaxTxnBytes is the largest Txn request sent, in encoded bytes: set
	// it to the servers' jute.maxbuffer when they raise it. Zero means
	// DefaultMaxTxnBytes; values above 1.5 MiB - 4 (the library's buffer)
	// count as that.
	MaxTxnBytes int

	defect           claims.Defect // the mutation kit's (mutants_test.go)
	libraryPingsOnly bool          // tests: no pinger
	txnRetry         func()        // tests: run before each multi of a Txn after its first

	// Dialer, if set, replaces net.DialTimeout.
	Dialer func(network, address string, timeout time.Duration) (net.Conn, error)

	// DialTimeout bounds how long NewConn (and the Factory) waits for the
	// first session; zero means DefaultDialTimeout.
	DialTimeout time.Duration

	// TLSCAFile is a PEM file of the CAs of the servers' certificates
	// (the system's roots when empty); TLSCertFile and TLSKeyFile are the
	// PEM client certificate and key (required by ssl.clientAuth=need; the
	// session then has the certificate's x509 identity for ACLs). Setting
	// any makes every connection TLS (a secureClientPort), over Dialer's
	// connection when Dialer is set.
	TLSCAFile, TLSCertFile, TLSKeyFile string

	// TLSServerName is checked against the servers' certificates; empty
	// means each server address's host.
	TLSServerName string

	// Logger receives the library's and the Conn's logs; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Factory opens zk2 connections with its Options, Servers replaced by the
// serverAddress given to Create: topo.WithFactory(zk2topo.NewFactory(opts))
// opens the global cell and every CellInfo cell with opts. The zero value
// (registered as "zk2") uses the defaults. It implements
// topo.ContextFactory and is safe for concurrent use.
type Factory struct {
	Options Options // every Conn's; Servers replaced by Create's address
}

// NewFactory returns a Factory that opens every Conn with opts.
func NewFactory(opts Options) *Factory { return &Factory{Options: opts} }

// Create is CreateContext without a context: the wait for the first
// session is bounded by Options.DialTimeout alone.
func (f Factory) Create(cell, serverAddress, root string) (topo.Conn, error) {
	return f.CreateContext(context.Background(), cell, serverAddress, root)
}

// CreateContext opens a Conn (NewConnContext) to the servers in
// serverAddress ("host:port[,host:port...]") rooted at root (a znode path
// such as "/vt"; "" or "/" is the ZooKeeper root); cell is not used.
// Errors as NewConnContext's.
func (f Factory) CreateContext(ctx context.Context, cell, serverAddress, root string) (topo.Conn, error) {
	opts := f.Options
	opts.Servers = backendkit.SplitAddresses(serverAddress)
	c, err := NewConnContext(ctx, opts, root)
	if err != nil {
		return nil, err // no typed nil *Conn in a topo.Conn
	}
	return c, nil
}

var _ topo.ContextFactory = Factory{}

// Conn is a topo.Conn over a sequence of ZooKeeper sessions, one at a
// time (see the package doc, Sessions). It is safe for concurrent use.
type Conn struct {
	// inClaims: the root is at a reserved place or has a segment
	// "elections" (see entriesAt).
	inClaims bool

	root string // "" for the ZooKeeper root, else "/a/b"
	acl  []zk.ACL
	opts Options
	log  *slog.Logger
	sem  chan struct{}
	jobs chan job // to idle workers

	authScheme string
	auth       []byte

	closed    atomic.Bool
	closing   chan struct{}
	closeOnce sync.Once
	bg        sync.WaitGroup // goroutines Close waits for (goBG)
	bgMu      sync.RWMutex   // goBG adds under it shared, Close sets bgShut under it: no Add after Wait
	bgShut    bool

	mu      sync.Mutex
	cur     *zkSession   // the current session; replaced once lost
	resumed []*zkSession // sessions Resume adopted (see endResumed)

	listCache listCache // sorted names of large directories, see listCache

	// For driver.Ahead and WaitGone: stash, by queue, the latest Create's
	// children read (a listing); nextUp, by the key of the entry ahead of
	// it, a waiter; headed, the entries WaitGone showed heading their queue.
	stash          sync.Map
	nextUp, headed sync.Map

	claims.Claims // the claims engine eng, over c's driver
	eng           *claims.Engine

	lastDialErr atomic.Pointer[error] // the latest failed dial, for NewConn's error
}

// NewConn is NewConnContext without a context: the wait for the first
// session is bounded by opts.DialTimeout alone.
func NewConn(opts Options, root string) (*Conn, error) {
	return NewConnContext(context.Background(), opts, root)
}

// NewConnContext opens a Conn with opts, rooted at root (see
// Factory.CreateContext), and waits for its first session, at most
// opts.DialTimeout and until ctx ends. It returns InvalidArgument when opts
// has no server, a malformed Auth, unreadable TLS files or AuthFile,
// InvalidPath for a bad root, Unavailable naming the servers when none
// gives a session in time (nothing listens, a refused TLS handshake; its
// cause a *topo.UnreachableError), and
// Timeout or Interrupted when ctx ends first.
func NewConnContext(ctx context.Context, opts Options, root string) (*Conn, error) {
	r, err := topo.CleanDirPath(root)
	if err != nil {
		return nil, err
	}
	if len(opts.Servers) == 0 {
		return nil, backendkit.Wrap(topo.InvalidArgument, root, errors.New("zk2topo: no ZooKeeper server address"))
	}
	addr := strings.Join(opts.Servers, ",")
	if err := backendkit.CheckContext(ctx, addr); err != nil {
		return nil, err
	}
	opts.DialTimeout = backendkit.OrDefault(opts.DialTimeout, DefaultDialTimeout)
	if opts.Dialer == nil {
		opts.Dialer = net.DialTimeout
	}
	if opts.TLSCAFile != "" || opts.TLSCertFile != "" || opts.TLSKeyFile != "" {
		cfg, err := tlsConfig(opts)
		if err != nil {
			return nil, backendkit.Wrap(topo.InvalidArgument, root, err)
		}
		// A TLS handshake gets what the library gives each read on a
		// session's connection (two thirds of the session timeout).
		opts.Dialer = tlsDialer(cfg, backendkit.OrDefault(opts.SessionTimeout, DefaultSessionTimeout)*2/3, opts.Dialer)
	}
	auth := opts.Auth
	if auth == "" && opts.AuthFile != "" {
		b, err := backendkit.ReadSecretFile(opts.AuthFile)
		if err != nil {
			return nil, backendkit.Wrap(topo.InvalidArgument, opts.AuthFile, err)
		}
		auth = strings.TrimSpace(string(b))
	}
	c := &Conn{
		acl:     opts.ACL,
		opts:    opts,
		log:     cmp.Or(opts.Logger, slog.Default()),
		closing: make(chan struct{}),
	}
	if r != "" {
		c.root = "/" + r
	}
	c.inClaims = topo.IsReserved(r) || hasSegment(r, electionsDir)
	if auth != "" {
		scheme, a, ok := strings.Cut(auth, ":")
		if !ok || scheme == "" {
			return nil, backendkit.Wrap(topo.InvalidArgument, root, errors.New("zk2topo: auth must be \"scheme:auth\""))
		}
		c.authScheme, c.auth = scheme, []byte(a)
	}
	if c.acl == nil {
		c.acl = zk.WorldACL(zk.PermAll)
	}
	c.opts.SessionTimeout = backendkit.OrDefault(c.opts.SessionTimeout, DefaultSessionTimeout)
	c.sem = make(chan struct{}, backendkit.OrDefault(opts.MaxConcurrency, DefaultMaxConcurrency))
	c.jobs = make(chan job)
	c.eng = claims.New(driver{c}, claims.Options{Defect: opts.defect})
	c.Claims = c.eng
	s, err := c.newSessionAs(0, nil)
	if err != nil {
		return nil, backendkit.Wrap(topo.InvalidArgument, strings.Join(opts.Servers, ","), err)
	}
	c.cur = s
	if err := c.awaitSession(ctx, s, addr, 0); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// awaitSession waits until s has its session, at most DialTimeout and until
// ctx ends; with a resumed session's id, for that session, returning
// claims.ErrNotHeld once the server said it expired.
func (c *Conn) awaitSession(ctx context.Context, s *zkSession, p string, id int64) error {
	bound := time.NewTimer(c.opts.DialTimeout)
	defer bound.Stop()
	// Polled (the event callback is the session's), briefly at first.
	tick := time.Millisecond
	for s.zk.State() != zk.StateHasSession || id != 0 && s.zk.SessionID() != id {
		if id != 0 && (s.isLost() || s.zk.State() == zk.StateExpired) {
			return claims.ErrNotHeld
		}
		select {
		case <-ctx.Done():
			return backendkit.FromContext(ctx, p)
		case <-bound.C:
			err := fmt.Errorf("zk2topo: no ZooKeeper server at %s gave a session within %v", strings.Join(c.opts.Servers, ","), c.opts.DialTimeout)
			if last := c.lastDialErr.Load(); last != nil {
				err = fmt.Errorf("%w (last dial: %w)", err, *last)
			}
			return backendkit.Wrap(topo.Unavailable, p, &topo.UnreachableError{Addrs: c.opts.Servers, Err: err})
		case <-time.After(tick):
		}
		tick = min(2*tick, 50*time.Millisecond)
	}
	return nil
}

// slogLogger adapts slog to the client library's Printf logger.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Printf(format string, args ...any) {
	s.l.Debug(fmt.Sprintf("zk: "+format, args...))
}

// session returns the current session, starting a new one when it is
// over. It returns Closed after Close.
func (c *Conn) session(p string) (*zkSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		return nil, topo.NewError(topo.Closed, p)
	}
	if c.cur.isLost() {
		s, err := c.newSessionAs(0, nil)
		if err != nil {
			return nil, backendkit.Wrap(topo.Unavailable, p, err)
		}
		c.cur = s
	}
	return c.cur, nil
}

// live returns the current session with the Conn's credentials added.
func (c *Conn) live(ctx context.Context, p string) (*zkSession, error) {
	s, err := c.session(p)
	if err != nil {
		return nil, err
	}
	if err := s.ensureAuth(ctx, p); err != nil {
		return nil, err
	}
	return s, nil
}

// Close closes the ZooKeeper session: active watches end with Interrupted,
// locks and election entries of the session disappear, and later calls
// return Closed. It is idempotent and safe for concurrent use.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		c.eng.Close()
		c.closed.Store(true)
		close(c.closing)
		c.mu.Lock()
		ss := append([]*zkSession{c.cur}, c.resumed...)
		c.mu.Unlock()
		for _, s := range ss {
			s.dead.Store(true)
			s.zk.Close() // sends closeSession: the session's entries go at once
			s.lose()
		}
		c.bgMu.Lock()
		c.bgShut = true
		c.bgMu.Unlock()
		c.bg.Wait()
	})
}

// zkPath maps a canonical topo path ("" for the root) to its znode path.
func (c *Conn) zkPath(p string) string {
	if p == "" {
		if c.root == "" {
			return "/"
		}
		return c.root
	}
	return c.root + "/" + p
}

// relPath maps a znode path under the root back to a canonical topo path.
func (c *Conn) relPath(zp string) string {
	if zp == c.root || zp == "/" {
		return ""
	}
	return strings.TrimPrefix(zp, c.root+"/")
}

// zkDir returns the parent znode path of zp.
func zkDir(zp string) string { return path.Dir(zp) }

// write runs fn (a request, not retried) with do on the current session.
func (c *Conn) write(ctx context.Context, p string, fn func(z *zk.Conn) error) error {
	s, err := c.live(ctx, p)
	if err != nil {
		return err
	}
	return c.do(ctx, p, func() error { return fn(s.zk) })
}

// do runs fn (client calls, which take no context) honouring ctx: when ctx
// can end, fn runs on a worker and do returns Timeout or Interrupted as
// soon as ctx ends (fn's results then dropped). At most MaxConcurrency fns
// run at once. It returns fn's raw error, or a *topo.Error for ctx or Close.
func (c *Conn) do(ctx context.Context, p string, fn func() error) error {
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return backendkit.FromContext(ctx, p)
	case <-c.closing:
		return topo.NewError(topo.Closed, p)
	}
	if ctx.Done() == nil {
		defer func() { <-c.sem }()
		return fn()
	}
	j := job{fn: fn, done: make(chan error, 1)}
	select {
	case c.jobs <- j: // an idle worker took it
	default:
		if !c.goBG(func() { c.worker(j) }) {
			<-c.sem
			return topo.NewError(topo.Closed, p)
		}
	}
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		return backendkit.FromContext(ctx, p)
	}
}

// goBG runs f in a goroutine that Close waits for, and reports whether it
// started: none starts once Close has begun waiting (f's work is then moot
// or done by Close).
func (c *Conn) goBG(f func()) bool {
	c.bgMu.RLock()
	defer c.bgMu.RUnlock()
	if c.bgShut {
		return false
	}
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		f()
	}()
	return true
}

// job is one call handed to a worker by do.
type job struct {
	fn   func() error
	done chan error // buffered: the worker never blocks on an abandoned job
}

// worker runs jobs for do until the Conn closes; started when none is
// idle and kept (about MaxConcurrency at most): a goroutine start per call
// cost a few percent of its latency.
func (c *Conn) worker(j job) {
	for {
		err := j.fn()
		<-c.sem
		j.done <- err
		select {
		case j = <-c.jobs:
		case <-c.closing:
			return
		}
	}
}

// retriable reports whether a read failed only because the connection or
// session was lost.
func retriable(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved) ||
		errors.Is(err, zk.ErrClosing)
}

// read runs an idempotent read with do on the current session, retrying
// it (on a new session when the old one ended) while ctx allows. The first
// read of every session is preceded by a sync (so it sees the Conn's
// earlier sessions' writes), and with LinearizableReads or
// topo.WithLinearizableRead every read by a barrier (see barrierThen).
func (c *Conn) read(ctx context.Context, p string, fn func(z *zk.Conn) error) error {
	backoff := 10 * time.Millisecond
	for {
		s, err := c.live(ctx, p)
		if err != nil {
			return err
		}
		linearizable := c.opts.LinearizableReads || topo.LinearizableRead(ctx)
		scope, _ := ctx.Value(barrierScopeKey{}).(*barrierScope)
		if linearizable && scope != nil && scope.passed.Load() == s {
			linearizable = false // the call's barrier preceded this read on s
		}
		sync := linearizable || !s.synced.Load()
		err = c.do(ctx, p, func() error {
			switch {
			case linearizable:
				return s.barrierThen(func() error { return fn(s.zk) })
			case sync:
				return s.syncThen(func() error { return fn(s.zk) })
			}
			return fn(s.zk)
		})
		if err == nil && sync {
			s.synced.Store(true)
		}
		if err == nil && linearizable && scope != nil {
			scope.passed.Store(s)
		}
		if err == nil || !retriable(err) || c.closed.Load() {
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return backendkit.FromContext(ctx, p)
		case <-c.closing:
			return topo.NewError(topo.Closed, p)
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// barrierScope lets the reads of one call (List, ListDir) share a read
// barrier: a read started after one with a barrier succeeded on the same
// session needs none (a session's reads are monotonic).
type barrierScope struct {
	passed atomic.Pointer[zkSession] // the session whose barrier passed
}

type barrierScopeKey struct{}

// barrierScoped returns ctx with a barrierScope when its reads must be
// linearizable; only for a call whose later reads start after its first
// answered.
func (c *Conn) barrierScoped(ctx context.Context) context.Context {
	if !c.opts.LinearizableReads && !topo.LinearizableRead(ctx) {
		return ctx
	}
	return context.WithValue(ctx, barrierScopeKey{}, &barrierScope{})
}

// syncThen runs a sync and then fn on the session, pipelined.
func (s *zkSession) syncThen(fn func() error) error {
	return s.firstThen(opSync, "/", func() error {
		_, err := s.zk.Sync("/")
		return err
	}, fn)
}

// firstThen runs first (one request of opcode op on path) and then fn on
// the session, pipelined: fn's request is queued once first's frame was
// written (sendFirst). first's error wins.
func (s *zkSession) firstThen(op int32, path string, first, fn func() error) error {
	res := sendFirst(s, op, path, first)
	select {
	case err := <-res: // answered already (or never sent)
		if err != nil {
			return err
		}
		return fn()
	default:
	}
	err := fn()
	if ferr := <-res; ferr != nil {
		return ferr
	}
	return err
}

// barrierPath is the znode a read barrier checks: it always exists.
const barrierPath = "/"

// barrierThen runs a read barrier and then fn on the session, pipelined:
// a multi checking barrierPath at any version, a transaction answered once
// the server applied every one committed before it, so fn sees every write
// acknowledged before it began (a sync does not on the leader:
// docs/layout-zookeeper.md, Reads). Cost: BenchmarkLinearizableRead.
func (s *zkSession) barrierThen(fn func() error) error {
	return s.firstThen(opMulti, barrierPath, func() error {
		_, err := s.zk.Multi(&zk.CheckVersionRequest{Path: barrierPath, Version: -1})
		return err
	}, fn)
}

// freshContext returns a context for clean-up work that must run even
// though the caller's context ended (removing an abandoned lock entry).
func freshContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

var _ topo.Conn = (*Conn)(nil)

// entriesAt reports whether the znode of p may be a lock or election
// entry, which writes must leave alone (see Txn): on a Conn with inClaims
// (rooted inside another's claims), or when p has a segment "elections" (a
// Conn rooted lower down's candidates: unlike etcd's, no "locks" segment
// the reserved-name rule refuses marks them).
func (c *Conn) entriesAt(p string) bool {
	return c.inClaims || hasSegment(p, electionsDir)
}

// hasSegment reports whether the canonical path p has a segment seg,
// without allocating.
func hasSegment(p, seg string) bool {
	for p != "" {
		var s string
		s, p, _ = strings.Cut(p, "/")
		if s == seg {
			return true
		}
	}
	return false
}
