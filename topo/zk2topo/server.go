package zk2topo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
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

// DefaultDialTimeout is how long NewConn waits for the first session when
// Options.DialTimeout is zero.
const DefaultDialTimeout = 5 * time.Second

// DefaultMaxConcurrency is the number of requests a Conn keeps in flight at
// once when Options.MaxConcurrency is zero.
const DefaultMaxConcurrency = 64

const (
	locksDir     = "locks"
	electionsDir = "elections"
)

func init() { topo.MustRegisterFactory(FactoryName, Factory{}) }

// Options configures a Conn. The zero value connects with the defaults.
type Options struct {
	// Servers lists the ensemble's "host:port" client addresses. The
	// factory fills it from its serverAddress ("host:port,host:port").
	Servers []string

	// SessionTimeout is the session timeout to ask the server for (the
	// server clamps it to its own bounds); zero means
	// DefaultSessionTimeout. Locks and leadership held through the Conn are
	// dropped by the server this long after the process stops talking to it.
	SessionTimeout time.Duration

	// Auth is an authentication "scheme:auth" added to the session, for
	// example "digest:user:password". Empty means none.
	Auth string

	// AuthFile names a file whose content (surrounding white space trimmed)
	// is a "scheme:auth" as in Auth. It is read by NewConn; Auth wins when
	// both are set.
	AuthFile string

	// ACL is the access control list given to every znode the Conn creates
	// (files, directories, lock and election entries). Nil means world-open
	// (zk.WorldACL(zk.PermAll)). With digest auth, zk.AuthACL(zk.PermAll)
	// restricts the nodes to the authenticated identity.
	ACL []zk.ACL

	// MaxConcurrency bounds the requests the Conn has in flight at once
	// (including requests abandoned because their context ended, until the
	// server answers); zero means DefaultMaxConcurrency.
	MaxConcurrency int

	// SafetyMargin is how long before the server may expire the session
	// the Conn stops trusting it: a session whose latest answered request
	// was sent more than (negotiated session timeout - SafetyMargin) ago is
	// given up (its locks report LockLost, its leadership ends, and a new
	// session serves later calls). Zero means a fifth of the negotiated
	// session timeout; it is capped at half of it. An answer proves the
	// send time of a request a quarter of the session timeout older (see
	// the package doc, Sessions), and an idle session sends a sync every
	// twelfth of the timeout: it is given up when an answer takes longer
	// than 7/12 of the timeout minus the margin (23/60 with the default).
	SafetyMargin time.Duration

	// LinearizableReads makes every read (Get, List, ListDir, the reads
	// of Watch and WatchRecursive, lock and election reads) send a read
	// barrier first: a multi whose only op checks "/" at any version
	// (pipelined: it costs no extra round trip of waiting before the read
	// is sent, but the read waits for the barrier), so that it sees every
	// write acknowledged, by any client, before the read started, whichever
	// server the session is on (a sync does not give that on the leader;
	// see zkSession.barrierThen). Each such read is thus a transaction (a
	// log write on a quorum), and needs READ permission on "/". Without
	// it, only the first read of each session syncs: a Conn still sees all
	// of its own acknowledged writes, but may miss a very recent write of
	// another client (ZooKeeper's default). A read under a context of
	// topo.WithLinearizableRead sends the barrier whatever this says.
	LinearizableReads bool

	// MaxTxnBytes is the largest transaction (Txn) request the Conn
	// sends, in bytes as encoded: set it to the servers' jute.maxbuffer
	// when they raise it. Zero means DefaultMaxTxnBytes (ZooKeeper's
	// default jute.maxbuffer); values above 1.5 MiB - 4 (the client
	// library's buffer) count as that.
	MaxTxnBytes int

	// defect is a deliberate defect of the Conn's claims engine, for the
	// mutation kit only (mutants_test.go).
	defect claims.Defect
	// libraryPingsOnly, for tests, stops the connections' own syncs (see
	// pinger): an idle session then sends the client library's pings alone.
	libraryPingsOnly bool

	// Dialer, if set, replaces net.DialTimeout for the connections to the
	// servers.
	Dialer func(network, address string, timeout time.Duration) (net.Conn, error)

	// DialTimeout bounds how long NewConn (and the Factory) waits for the
	// first session; zero means DefaultDialTimeout.
	DialTimeout time.Duration

	// TLSCAFile is a PEM file of the CA certificates that sign the
	// servers' certificates (the system's roots when empty); TLSCertFile
	// and TLSKeyFile are the PEM client certificate and key presented to
	// the servers (required by a server with ssl.clientAuth=need, which
	// also gives the session the certificate's x509 identity for ACLs).
	// Setting any of them makes every connection TLS, as a server's
	// secureClientPort expects (with the Netty connection factory); the
	// TLS handshake runs over Dialer's connection when Dialer is set.
	TLSCAFile, TLSCertFile, TLSKeyFile string

	// TLSServerName is the name checked against the servers'
	// certificates; empty means the host of each server address (an IP
	// address is checked against the certificate's IP addresses).
	TLSServerName string

	// Logger receives the client library's and the Conn's log messages; nil
	// means slog.Default().
	Logger *slog.Logger
}

// Factory opens zk2 connections with its Options: the serverAddress given
// to Create replaces Options.Servers, every other option (TLS, Auth, ACL,
// SessionTimeout, DialTimeout, ...) applies to every Conn it opens. So
// topo.WithFactory(zk2topo.NewFactory(opts)) opens the global cell and
// every cell named by a CellInfo record with opts. The zero value (the one
// registered as "zk2") uses the defaults. It implements
// topo.ContextFactory and is safe for concurrent use.
type Factory struct {
	// Options are the base options of every Conn; Servers is replaced by
	// the address given to Create.
	Options Options
}

// NewFactory returns a Factory that opens every Conn with opts (its
// Servers are replaced by the address of each Create).
func NewFactory(opts Options) *Factory { return &Factory{Options: opts} }

// Create is CreateContext without a context: the wait for the first
// session is bounded by Options.DialTimeout alone.
func (f Factory) Create(cell, serverAddress, root string) (topo.Conn, error) {
	return f.CreateContext(context.Background(), cell, serverAddress, root)
}

// CreateContext opens a Conn (NewConnContext) with the factory's Options
// to the ZooKeeper servers in serverAddress ("host:port[,host:port...]")
// rooted at root (a znode path such as "/vt"; "" or "/" is the ZooKeeper
// root). The cell name is not used. It returns InvalidArgument for an
// empty address or bad options, InvalidPath for a bad root, Unavailable
// naming the address when no server gives a session within
// Options.DialTimeout, and Timeout or Interrupted when ctx ends first.
func (f Factory) CreateContext(ctx context.Context, cell, serverAddress, root string) (topo.Conn, error) {
	opts := f.Options
	opts.Servers = backendkit.SplitAddresses(serverAddress)
	return NewConnContext(ctx, opts, root)
}

var _ topo.ContextFactory = Factory{}

// Conn is a topo.Conn over a sequence of ZooKeeper sessions: one at a
// time, each on its own client connection; when the server expires the
// current session (or the Conn gives it up, see Options.SafetyMargin) the
// next call starts a new one. It is safe for concurrent use.
type Conn struct {
	// inClaims says that the root is at a reserved place (topo.IsReserved:
	// inside a "locks" znode, say) or inside an election of a Conn rooted
	// higher up, where the Conn's znodes may be lock or election entries:
	// its writes read the Stat first and leave ephemeral znodes alone (see
	// Txn). The reserved-name rule knows "elections" only as the first
	// segment below a root, but a Conn rooted at <a>/elections/x (or
	// <a>/elections) is inside the elections of a Conn rooted at <a>, whose
	// candidate entries and values are its plain names: so a segment
	// "elections" at any depth counts too.
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
	bg        sync.WaitGroup // workers, background deletes, leader streams, watchdogs
	// bgMu guards bgShut: goBG adds to bg holding it shared, Close sets
	// bgShut holding it before bg.Wait, so that no goroutine is added
	// once the count may have reached zero (sync.WaitGroup's rule).
	bgMu   sync.RWMutex
	bgShut bool

	mu  sync.Mutex
	cur *zkSession // the current session; replaced once lost
	// resumed are the sessions adopted by ResumeLeaderParticipation, each
	// on its own client; the resumed participation's end closes its
	// session and takes it off (endResumed), Close closes them with cur.
	resumed []*zkSession

	listCache listCache // sorted names of large directories, see listCache

	// stash keeps, per queue (its parent znode), the children read that
	// the latest Create made there (a listing; see driver.Ahead).
	stash sync.Map

	// nextUp keeps, by the key of the one entry ahead of it, a waiting
	// entry of c's (a waiter: set by Ahead, taken by WaitGone); headed,
	// the waiting entries that WaitGone's lookahead showed heading their
	// queue (taken by Ahead; see driver.WaitGone).
	nextUp, headed sync.Map

	// Claims are c's locks and elections: eng, the claims engine, run over
	// c's driver (driver.go).
	claims.Claims
	eng *claims.Engine

	lastDialErr atomic.Pointer[error] // the latest failed dial, for NewConn's error
}

// NewConn is NewConnContext without a context: the wait for the first
// session is bounded by opts.DialTimeout alone.
func NewConn(opts Options, root string) (*Conn, error) {
	return NewConnContext(context.Background(), opts, root)
}

// NewConnContext opens a Conn with opts, rooted at root (see
// Factory.CreateContext) and waits for its first session: until a server
// accepted the session, at most opts.DialTimeout (default 5 s) and until
// ctx ends. It returns InvalidArgument when opts has no server, a malformed
// Auth or unreadable TLS files, when AuthFile cannot be read, InvalidPath
// for a bad root, Unavailable naming the servers when none gives a session
// within the bound (nothing listens, a refused TLS handshake), and Timeout
// or Interrupted (naming the servers) when ctx ends first. Later sessions
// (after an expiry) are started by the calls that need them.
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
	if opts.TLSCAFile != "" || opts.TLSCertFile != "" || opts.TLSKeyFile != "" {
		cfg, err := tlsConfig(opts)
		if err != nil {
			return nil, backendkit.Wrap(topo.InvalidArgument, root, err)
		}
		opts.Dialer = tlsDialer(cfg, opts.Dialer)
	}
	auth := opts.Auth
	if auth == "" && opts.AuthFile != "" {
		b, err := os.ReadFile(opts.AuthFile)
		if err != nil {
			return nil, backendkit.Wrap(topo.InvalidArgument, opts.AuthFile, err)
		}
		auth = strings.TrimSpace(string(b))
	}
	if opts.Dialer == nil {
		opts.Dialer = net.DialTimeout
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
// ctx ends (p names the call's path for errors). With a resumed session's
// id, it waits for that session and returns claims.ErrNotHeld once the
// server answered that it expired.
func (c *Conn) awaitSession(ctx context.Context, s *zkSession, p string, id int64) error {
	bound := time.NewTimer(c.opts.DialTimeout)
	defer bound.Stop()
	// The client library announces its states through an event callback
	// that the session already takes; its state is polled here instead,
	// briefly at first (a local server answers within a millisecond).
	tick := time.Millisecond
	for s.zk.State() != zk.StateHasSession || id != 0 && s.zk.SessionID() != id {
		if id != 0 && (s.isLost() || s.zk.State() == zk.StateExpired) {
			return claims.ErrNotHeld
		}
		select {
		case <-ctx.Done():
			return backendkit.FromContext(ctx, p)
		case <-bound.C:
			// Why, with the latest dial error if a dial failed.
			err := fmt.Errorf("zk2topo: no ZooKeeper server at %s gave a session within %v", strings.Join(c.opts.Servers, ","), c.opts.DialTimeout)
			if last := c.lastDialErr.Load(); last != nil {
				err = fmt.Errorf("%w (last dial: %w)", err, *last)
			}
			return backendkit.Wrap(topo.Unavailable, p, err)
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

// write runs fn (a request that is not retried) on the current session
// with do.
func (c *Conn) write(ctx context.Context, p string, fn func(z *zk.Conn) error) error {
	s, err := c.live(ctx, p)
	if err != nil {
		return err
	}
	return c.do(ctx, p, func() error { return fn(s.zk) })
}

// do runs fn (one or more client calls) while honouring ctx: the client
// library takes no context, so fn runs in its own goroutine when ctx can
// end, and do returns Timeout or Interrupted as soon as ctx ends (fn then
// finishes in the background and its results are dropped). At most
// MaxConcurrency fns run at once. do returns fn's raw error, or a
// *topo.Error for ctx or a closed Conn.
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
// started: none starts once Close has begun waiting (the Conn is closed
// then, and what f would do is moot or done by Close).
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

// worker runs jobs for do until the Conn closes. Workers are started on
// demand when none is idle and kept; since do hands out at most
// MaxConcurrency jobs at once, there are about that many at most. Reusing
// them spares a goroutine start and a fresh goroutine's stack growth on
// every call (a few percent of a call's latency).
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
// session was lost, so that it can be sent again (on a new session if the
// old one is over).
func retriable(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved) ||
		errors.Is(err, zk.ErrClosing)
}

// read runs an idempotent read with do on the current session, retrying it
// (on a new session when the old one ended) while the connection is being
// re-established and ctx allows. The first read of every session, and
// every read with Options.LinearizableReads or under a context of
// topo.WithLinearizableRead, is preceded by a sync (a barrier for the
// latter two): the server the session is connected to then has applied
// every write acknowledged before the read started, including those of
// the Conn's earlier sessions (ZooKeeper keeps reads monotonic within one
// session only).
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

// barrierScope lets the reads of one call that needs linearizable reads
// (List, ListDir) share one read barrier: a read that starts after an
// earlier read of the call, with its barrier, succeeded on the same
// session needs none, because ZooKeeper runs a session's requests in
// order and a session never sees an older state than it saw. A read on
// another session (the first one ended) sends its own barrier.
type barrierScope struct {
	passed atomic.Pointer[zkSession] // the session whose barrier passed
}

type barrierScopeKey struct{}

// barrierScoped returns ctx with a barrierScope when its reads must be
// linearizable, and ctx otherwise. Only a call whose later reads start
// after its first read answered may use it.
func (c *Conn) barrierScoped(ctx context.Context) context.Context {
	if !c.opts.LinearizableReads && !topo.LinearizableRead(ctx) {
		return ctx
	}
	return context.WithValue(ctx, barrierScopeKey{}, &barrierScope{})
}

// syncThen runs a sync and then fn on the session, pipelined (see
// firstThen).
func (s *zkSession) syncThen(fn func() error) error {
	return s.firstThen(opSync, "/", func() error {
		_, err := s.zk.Sync("/")
		return err
	}, fn)
}

// firstThen runs first, one request of opcode op on path, and then fn on
// the session, pipelined: fn's request is queued once first's frame was
// written (see sendFirst), so the server runs it after first's, without
// waiting for first's answer. first's error wins over fn's.
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

// barrierPath is the znode that a read barrier's check op names: the
// ZooKeeper root, which always exists. The session needs READ permission
// on it (world-readable unless an operator restricted it).
const barrierPath = "/"

// barrierThen runs a read barrier and then fn on the session, pipelined
// (see firstThen). The barrier is a multi whose only op checks that
// barrierPath exists, at any version: a transaction, which the session's
// server answers only after applying every transaction committed before
// it, so fn's read (a session's requests run in order) sees every write
// acknowledged before the read began. A sync does not give this on the
// leader, which answers its own clients' syncs at once (why:
// docs/layout-zookeeper.md, Reads). The barrier costs a transaction (a log
// write on a quorum) per read: see BenchmarkLinearizableRead.
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

// entriesAt reports whether the znode of p (a canonical file path) may be
// a lock or election entry, so that a write of it must read its Stat
// first and leave an ephemeral znode alone (see Txn): on a Conn rooted at
// a claims place (Conn.inClaims), or when p has a segment "elections"
// (below its first, which the reserved-name rule refuses: the candidates
// of a Conn rooted lower down, which unlike etcd's have no "locks"
// segment that it refuses).
func (c *Conn) entriesAt(p string) bool {
	return c.inClaims || hasSegment(p, electionsDir)
}

// hasSegment reports whether the canonical path p has a segment seg
// (without allocating: entriesAt runs on every Update and Delete).
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
