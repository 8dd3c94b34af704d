// Package zk2topo is topokit's ZooKeeper backend, registered as "zk2". It
// keeps the store layout of Vitess's zk2topo so that a Vitess process and
// topokit can share one ensemble (see docs/layout-zookeeper.md):
//
//   - a file is the znode <root>/<path>; intermediate znodes are directories,
//     created on demand and removed again when their last file is deleted;
//   - the lock on directory D is an ephemeral-sequential child of
//     <root>/D/locks/ holding the lock's contents; the lowest sequence holds
//     it and every waiter watches only its predecessor;
//   - election "name" has one ephemeral-sequential child per candidate under
//     <root>/elections/<name>/, holding the candidate's id; the lowest leads.
//
// Versions are the znode's Stat.Version (starting at 0). ZooKeeper keeps no
// history, so GetVersion returns NoImplementation. Locks and election
// entries live as long as the Conn's ZooKeeper session: when the session
// expires, held locks report LockLost from Check, leadership contexts are
// cancelled and watches end with an Unavailable error, and the Conn goes on
// with a new session for later calls.
//
// The names "locks" (at any depth) and "elections" (directly under the root)
// are reserved for locks and elections, as in Vitess.
package zk2topo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
)

// FactoryName is the name zk2topo registers its factory under.
const FactoryName = "zk2"

// DefaultSessionTimeout is the ZooKeeper session timeout a Conn asks for when
// Options.SessionTimeout is zero. The server clamps it between its
// minSessionTimeout and maxSessionTimeout (by default 2 and 20 tickTimes).
const DefaultSessionTimeout = 30 * time.Second

// DefaultMaxConcurrency is the number of requests a Conn keeps in flight at
// once when Options.MaxConcurrency is zero.
const DefaultMaxConcurrency = 64

const (
	locksDir     = "locks"
	electionsDir = "elections"
)

func init() {
	if err := topo.RegisterFactory(FactoryName, Factory{}); err != nil {
		slog.Error("zk2topo: cannot register the zk2 factory", "err", err)
	}
}

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

	// Logger receives the client library's and the Conn's log messages; nil
	// means slog.Default().
	Logger *slog.Logger
}

// Factory opens zk2 connections. Its Options are the base options of every
// Conn it opens; the serverAddress given to Create replaces Options.Servers.
// It is safe for concurrent use.
type Factory struct {
	Options Options
}

// Create opens a Conn to the ZooKeeper servers in serverAddress
// ("host:port[,host:port...]") rooted at root (a znode path such as "/vt";
// "" or "/" is the ZooKeeper root). The cell name is not used. It returns
// InvalidArgument for an empty address and InvalidPath for a bad root. The
// servers are dialled in the background: an unreachable ensemble shows up
// as Unavailable or Timeout errors from later calls.
func (f Factory) Create(cell, serverAddress, root string) (topo.Conn, error) {
	opts := f.Options
	opts.Servers = nil
	for _, s := range strings.Split(serverAddress, ",") {
		if s = strings.TrimSpace(s); s != "" {
			opts.Servers = append(opts.Servers, s)
		}
	}
	return NewConn(opts, root)
}

// Conn is a topo.Conn over one ZooKeeper session (replaced by a new session
// when the server expires it). It is safe for concurrent use.
type Conn struct {
	root string // "" for the ZooKeeper root, else "/a/b"
	acl  []zk.ACL
	opts Options
	log  *slog.Logger
	zk   *zk.Conn
	sem  chan struct{}
	jobs chan job // to idle workers
	sent *sendObserver
	dirs dirCache

	authScheme string
	auth       []byte
	authMu     sync.Mutex
	authDone   atomic.Bool

	closed    atomic.Bool
	closing   chan struct{}
	closeOnce sync.Once
	bg        sync.WaitGroup // workers, background deletes, leader streams

	mu             sync.Mutex
	sess           *session
	disconnectedAt time.Time       // zero while connected with a session
	entries        map[string]bool // lock and election entries of the session
	pending        map[string]int  // entry creates in flight, by parent znode
}

// session is one ZooKeeper session of a Conn; lost is closed when the
// server expired it, after the registered onLost functions ran.
type session struct {
	lost chan struct{}

	mu      sync.Mutex
	funcs   []func()
	suspend []func() // run on the next disconnection (or expiry)
	isDone  bool
}

// onDisconnect registers f to run (synchronously, it must not block) when
// the connection to the server drops (the session may then expire without
// the Conn knowing) or the session expires, whichever comes first. It
// returns false, without registering, when the session is already lost.
func (s *session) onDisconnect(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isDone {
		return false
	}
	s.suspend = append(s.suspend, f)
	return true
}

// disconnected runs and forgets the onDisconnect functions.
func (s *session) disconnected() {
	s.mu.Lock()
	funcs := s.suspend
	s.suspend = nil
	s.mu.Unlock()
	for _, f := range funcs {
		f()
	}
}

// onLost registers f to run (synchronously, it must not block) when the
// session expires. It returns false, without registering, when the session
// is already lost.
func (s *session) onLost(f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isDone {
		return false
	}
	s.funcs = append(s.funcs, f)
	return true
}

// expire runs the onLost functions and closes lost.
func (s *session) expire() {
	s.mu.Lock()
	s.isDone = true
	funcs := append(s.funcs, s.suspend...)
	s.funcs, s.suspend = nil, nil
	s.mu.Unlock()
	for _, f := range funcs {
		f()
	}
	close(s.lost)
}

func (s *session) isLost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// NewConn opens a Conn with opts, rooted at root (see Factory.Create). It
// returns InvalidArgument when opts has no server or a malformed Auth,
// when AuthFile cannot be read, and InvalidPath for a bad root. It does not
// wait for the servers.
func NewConn(opts Options, root string) (*Conn, error) {
	r, err := topo.CleanDirPath(root)
	if err != nil {
		return nil, err
	}
	if len(opts.Servers) == 0 {
		return nil, &topo.Error{Code: topo.InvalidArgument, Path: root, Err: errors.New("zk2topo: no ZooKeeper server address")}
	}
	auth := opts.Auth
	if auth == "" && opts.AuthFile != "" {
		b, err := os.ReadFile(opts.AuthFile)
		if err != nil {
			return nil, &topo.Error{Code: topo.InvalidArgument, Path: opts.AuthFile, Err: err}
		}
		auth = strings.TrimSpace(string(b))
	}
	c := &Conn{
		acl:     opts.ACL,
		opts:    opts,
		log:     opts.Logger,
		closing: make(chan struct{}),
		sess:    &session{lost: make(chan struct{})},
		sent:    newSendObserver(),
		entries: map[string]bool{},
		pending: map[string]int{},
	}
	if r != "" {
		c.root = "/" + r
	}
	if auth != "" {
		scheme, a, ok := strings.Cut(auth, ":")
		if !ok || scheme == "" {
			return nil, &topo.Error{Code: topo.InvalidArgument, Path: root, Err: errors.New("zk2topo: auth must be \"scheme:auth\"")}
		}
		c.authScheme, c.auth = scheme, []byte(a)
	}
	if c.acl == nil {
		c.acl = zk.WorldACL(zk.PermAll)
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.opts.SessionTimeout <= 0 {
		c.opts.SessionTimeout = DefaultSessionTimeout
	}
	n := opts.MaxConcurrency
	if n <= 0 {
		n = DefaultMaxConcurrency
	}
	c.sem = make(chan struct{}, n)
	c.jobs = make(chan job)
	zc, _, err := zk.Connect(opts.Servers, c.opts.SessionTimeout,
		zk.WithLogger(slogLogger{c.log}),
		zk.WithLogInfo(false),
		zk.WithDialer(c.sent.dial),
		zk.WithEventCallback(c.onEvent))
	if err != nil {
		return nil, &topo.Error{Code: topo.InvalidArgument, Path: strings.Join(opts.Servers, ","), Err: err}
	}
	c.zk = zc
	return c, nil
}

// slogLogger adapts slog to the client library's Printf logger.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Printf(format string, args ...any) {
	s.l.Debug(fmt.Sprintf("zk: "+format, args...))
}

// onEvent runs in the client library's goroutines (it must not block): it
// tracks session expiry and disconnection.
func (c *Conn) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev.State {
	case zk.StateExpired:
		c.sess.expire()
		clear(c.entries) // the server deleted them
		c.sess = &session{lost: make(chan struct{})}
	case zk.StateHasSession:
		c.disconnectedAt = time.Time{}
	case zk.StateDisconnected:
		if c.disconnectedAt.IsZero() {
			c.disconnectedAt = time.Now()
		}
		c.sess.disconnected()
	}
}

// session returns the current session.
func (c *Conn) session() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess
}

// isDisconnected reports whether the Conn is without a live connection to a
// server.
func (c *Conn) isDisconnected() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.disconnectedAt.IsZero()
}

// surelyExpired reports whether the Conn has been without a session for
// longer than the session timeout, so the server has certainly expired it.
func (c *Conn) surelyExpired() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.disconnectedAt.IsZero() && time.Since(c.disconnectedAt) > c.opts.SessionTimeout
}

// Close closes the ZooKeeper session: active watches end with Interrupted,
// locks and election entries of the session disappear, and later calls
// return Closed. It is idempotent and safe for concurrent use.
func (c *Conn) Close() {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		close(c.closing)
		c.zk.Close()
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

// ensureAuth adds the configured credentials to the session once (the
// client library re-sends them after reconnecting).
func (c *Conn) ensureAuth(ctx context.Context, p string) error {
	if c.authScheme == "" || c.authDone.Load() {
		return nil
	}
	c.authMu.Lock()
	defer c.authMu.Unlock()
	if c.authDone.Load() {
		return nil
	}
	err := c.do(ctx, p, func() error { return c.zk.AddAuth(c.authScheme, c.auth) })
	if err != nil {
		return c.convert(err, p)
	}
	c.authDone.Store(true)
	return nil
}

// begin checks the Conn and ctx before a call touches the store.
func (c *Conn) begin(ctx context.Context, p string) error {
	if c.closed.Load() {
		return topo.NewError(topo.Closed, p)
	}
	if err := topo.CheckContext(ctx, p); err != nil {
		return err
	}
	return c.ensureAuth(ctx, p)
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
		return topo.FromContext(ctx, p)
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
		c.bg.Add(1)
		go c.worker(j)
	}
	select {
	case err := <-j.done:
		return err
	case <-ctx.Done():
		return topo.FromContext(ctx, p)
	}
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
	defer c.bg.Done()
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
// session was lost, so that it can be sent again.
func retriable(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionExpired) || errors.Is(err, zk.ErrSessionMoved)
}

// read runs an idempotent read with do, retrying it while the connection is
// being re-established and ctx allows.
func (c *Conn) read(ctx context.Context, p string, fn func() error) error {
	backoff := 10 * time.Millisecond
	for {
		err := c.do(ctx, p, fn)
		if err == nil || !retriable(err) || c.closed.Load() {
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return topo.FromContext(ctx, p)
		case <-c.closing:
			return topo.NewError(topo.Closed, p)
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// freshContext returns a context for clean-up work that must run even
// though the caller's context ended (removing an abandoned lock entry).
func freshContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// zkConn returns the client connection (for tests).
func (c *Conn) zkConn() *zk.Conn { return c.zk }

var _ topo.Conn = (*Conn)(nil)
