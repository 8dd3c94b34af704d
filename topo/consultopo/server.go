package consultopo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// FactoryName is the name the backend registers under.
const FactoryName = "consul"

const (
	// DefaultSessionTTL is the TTL of a Conn's long-lived session, which
	// carries default-TTL locks and elections.
	DefaultSessionTTL = 15 * time.Second
	// MinSessionTTL is Consul's default minimum session TTL (the servers'
	// session_ttl_min); shorter TTLs are rounded up to it unless
	// Options.MinSessionTTL says the servers allow less.
	MinSessionTTL = 10 * time.Second
	// MaxSessionTTL is Consul's maximum session TTL; longer TTLs are rounded
	// down to it. LockName uses it.
	MaxSessionTTL = 24 * time.Hour
	// DefaultLockDelay is the lock-delay of the sessions this backend
	// creates: after a session holding a lock is invalidated, Consul refuses
	// to hand that lock to anyone else for this long, giving the old holder
	// time to notice the loss. Consul's own default (15 s) would make every
	// failover wait 15 s; holders here notice loss within a round trip
	// (Check reads the lock key, leaders watch theirs with a blocking query)
	// or declare it themselves after one TTL without renewal, so one second
	// covers operations already in flight.
	DefaultLockDelay = time.Second
	// DefaultWatchPollDuration is the wait time of the blocking queries
	// behind Watch, WatchRecursive and lock waits.
	DefaultWatchPollDuration = 30 * time.Second
	// closeTimeout bounds how long Close tries to destroy the Conn's
	// sessions.
	closeTimeout = 5 * time.Second
	// DefaultAddress is the agent address used when Options.Address is
	// empty.
	DefaultAddress = "127.0.0.1:8500"
	// DefaultDialTimeout is Options.DialTimeout when it is zero: the bound
	// of NewConn's first request, and of each TCP connect and TLS
	// handshake to the agent.
	DefaultDialTimeout = 5 * time.Second
	// DefaultRequestTimeout is Options.RequestTimeout when it is zero: how
	// long a request waits for the agent's answer beyond a blocking
	// query's wait time.
	DefaultRequestTimeout = 30 * time.Second
)

// TCP keep-alive of the connections to the agent, to notice a vanished
// host during a long blocking query (docs/layout-consul.md, "Opening a
// Conn"; a hung agent process is RequestTimeout's).
const (
	keepAliveIdle     = 15 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
)

// Consul's blocking-query limits (its default_query_time and
// max_query_time defaults): a blocking query without a wait time waits
// consulDefaultQueryTime, a longer wait time is cut to consulMaxQueryTime,
// and the servers add up to a sixteenth of the wait as jitter.
const (
	consulDefaultQueryTime = 5 * time.Minute
	consulMaxQueryTime     = 10 * time.Minute
	consulJitterFraction   = 16
)

// Options are the connection settings that do not fit in a factory's
// serverAddress. The zero value is usable: it connects to DefaultAddress
// without ACL token or TLS, with the defaults documented on each field.
type Options struct {
	// Address is the agent's HTTP address, "host:port". When it lists
	// several comma-separated addresses only the first is used (a Consul
	// client talks to one agent, usually the local one). Empty means
	// DefaultAddress, or CONSUL_HTTP_ADDR when set in the environment.
	Address string

	// Token is the ACL token sent with every request. TokenFile names a
	// file holding the token (read once, when the Conn is created); Token
	// wins when both are set. When both are empty the api package's
	// environment (CONSUL_HTTP_TOKEN, CONSUL_HTTP_TOKEN_FILE) applies.
	Token     string
	TokenFile string

	// CAFile, CertFile and KeyFile configure TLS: the CA bundle verifying
	// the agent's certificate and the client certificate and key.
	// TLSServerName is the name the agent's certificate must hold (empty:
	// the host of Address). Setting any of the four switches the scheme
	// to https.
	CAFile        string
	CertFile      string
	KeyFile       string
	TLSServerName string

	// SessionTTL is the TTL of the Conn's long-lived session (and hence of
	// Lock, TryLock and elections). Zero means DefaultSessionTTL; values are
	// rounded up to whole seconds and clamped to [Options.MinSessionTTL,
	// MaxSessionTTL]. A holder that cannot renew its session for this long
	// considers its locks lost; Consul itself invalidates the session
	// somewhat later (it allows up to twice the TTL).
	SessionTTL time.Duration

	// MinSessionTTL is the shortest session TTL the Consul servers accept:
	// their session_ttl_min setting. Zero or negative means MinSessionTTL (10 s,
	// Consul's default); values are rounded up to whole seconds, and to at
	// least one second. Every TTL this Conn asks for (SessionTTL,
	// LockWithTTL) is raised to it, since Consul refuses to create a
	// session with a shorter TTL. Set it only when the servers were
	// configured with a smaller session_ttl_min.
	MinSessionTTL time.Duration

	// LockDelay is the lock-delay of the sessions this Conn creates (see
	// DefaultLockDelay). Zero means DefaultLockDelay; a negative value
	// disables it. Consul caps it at 60 s.
	LockDelay time.Duration

	// Reads selects the consistency mode of Get, List, ListDir, Watch,
	// WatchRecursive, GetCurrentLeaderID and WaitForNewLeader. The zero
	// value, ReadConsistent, is linearizable. Lock, Check and leadership
	// decisions always use consistent reads, whatever this says, and so do
	// reads under a context of topo.WithLinearizableRead.
	Reads ReadMode

	// WatchPollDuration is the wait time of each blocking query (Watch,
	// WatchRecursive, lock and leadership waits). Zero means
	// DefaultWatchPollDuration; Consul caps it at 10 minutes. Shorter
	// values notice a restarted (emptied) agent sooner at the cost of more
	// requests.
	WatchPollDuration time.Duration

	// DialTimeout bounds how long NewConn (and the Factory) waits for the
	// agent's answer to its first request (see NewConnContext), and each
	// TCP connect and TLS handshake of the Conn's later connections to the
	// agent. Zero or negative means DefaultDialTimeout (5 s).
	DialTimeout time.Duration

	// RequestTimeout bounds how long each request to the agent waits for
	// the answer (its response headers) when the caller's context has not
	// ended first: a request that is not a blocking query fails with
	// Unavailable after RequestTimeout without an answer, a blocking query
	// (Watch, WatchRecursive, lock and leadership waits) after its wait
	// time (Options.WatchPollDuration), plus the sixteenth Consul may add
	// to it, plus RequestTimeout. It applies whether or not the caller's
	// context has a deadline (the earlier of the two ends the call), and to
	// the requests of Client() too. Zero means DefaultRequestTimeout
	// (30 s), comfortably above Consul's 7 s rpc_hold_timeout, the longest
	// a healthy agent holds an ordinary request while its servers elect a
	// leader; a negative value removes the bound, leaving calls bounded by
	// their context alone. A request that fails so may still have been
	// applied, as after a deadline.
	RequestTimeout time.Duration

	// TxnMaxRequestBytes is the largest transaction request body, in
	// bytes, that Txn sends: set it to the larger of the agent's
	// limits.txn_max_req_len and kv_max_value_size when they were raised.
	// Zero means DefaultTxnMaxRequestBytes (Consul's default, 512 KiB); a
	// transaction whose request body is larger fails with InvalidArgument
	// before anything is sent.
	TxnMaxRequestBytes int

	// defect is the claims engine's deliberate defect, set by the
	// package's mutation test only.
	defect claims.Defect
}

// ReadMode is the Consul consistency mode of a Conn's reads.
type ReadMode int

const (
	// ReadConsistent (the default) sends every read with ?consistent: the
	// leader confirms with a quorum that it still leads, and answers only
	// once it has applied every committed write (Consul refuses consistent
	// reads right after a leader election until then). A read therefore
	// never returns data older than a write acknowledged before it started,
	// by this Conn or any other. On a single-server dev agent it costs
	// little (see docs/layout-consul.md for the measured numbers).
	ReadConsistent ReadMode = iota
	// ReadDefault uses Consul's default mode: the leader answers from its
	// own state without confirming its leadership. Right after a server
	// restart or a leader change that state can lag behind committed
	// writes, so a read may return data older than a write this Conn had
	// already acknowledged, or NoNode for a file that exists. Choose it only
	// when such stale answers are acceptable.
	ReadDefault
)

// String names the mode.
func (m ReadMode) String() string {
	switch m {
	case ReadConsistent:
		return "consistent"
	case ReadDefault:
		return "default"
	}
	return fmt.Sprintf("ReadMode(%d)", int(m))
}

func (o Options) normalized() Options {
	o.MinSessionTTL = backendkit.OrDefault(o.MinSessionTTL, MinSessionTTL)
	o.MinSessionTTL = max(wholeSeconds(o.MinSessionTTL), time.Second)
	if o.SessionTTL == 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	o.SessionTTL = o.clampTTL(o.SessionTTL)
	o.LockDelay = orOff(o.LockDelay, DefaultLockDelay)
	o.WatchPollDuration = backendkit.OrDefault(o.WatchPollDuration, DefaultWatchPollDuration)
	o.TxnMaxRequestBytes = backendkit.OrDefault(o.TxnMaxRequestBytes, DefaultTxnMaxRequestBytes)
	o.DialTimeout = backendkit.OrDefault(o.DialTimeout, DefaultDialTimeout)
	o.RequestTimeout = orOff(o.RequestTimeout, DefaultRequestTimeout) // 0: no bound
	return o
}

// orOff returns def for a zero v, 0 (off) for a negative one, else v.
func orOff(v, def time.Duration) time.Duration {
	if v < 0 {
		return 0
	}
	return backendkit.OrDefault(v, def)
}

// clampTTL rounds ttl up to whole seconds within [o.MinSessionTTL,
// MaxSessionTTL] (o normalized).
func (o Options) clampTTL(ttl time.Duration) time.Duration {
	return min(max(wholeSeconds(ttl), o.MinSessionTTL), MaxSessionTTL)
}

// wholeSeconds rounds d up to whole seconds.
func wholeSeconds(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second)
}

// Factory creates Conns with a fixed set of Options; the serverAddress
// given to Create replaces Options.Address. The factory registered as
// "consul" uses the zero Options (consistent reads); register or use
// NewFactory(Options{Reads: ReadDefault, ...}) for other settings. It
// implements topo.ContextFactory, so OpenServerContext and
// Server.ConnForCell hand it their context. It is safe for concurrent
// use.
type Factory struct {
	opts Options
}

// NewFactory returns a Factory using opts for every Conn it creates.
func NewFactory(opts Options) *Factory { return &Factory{opts: opts} }

// Create is CreateContext without a context: the first request is bounded
// by Options.DialTimeout alone.
func (f *Factory) Create(cell, serverAddress, root string) (topo.Conn, error) {
	return f.CreateContext(context.Background(), cell, serverAddress, root)
}

// CreateContext implements topo.ContextFactory: it returns NewConnContext
// with the factory's options and serverAddress (when not empty) as the
// agent address, so it fails with Unavailable naming the address when no
// agent answers there within Options.DialTimeout, PermissionDenied when
// Consul does not know the ACL token, and Timeout or Interrupted when ctx
// ends first (see NewConnContext). cell is not used.
func (f *Factory) CreateContext(ctx context.Context, cell, serverAddress, root string) (topo.Conn, error) {
	opts := f.opts
	if serverAddress != "" {
		opts.Address = serverAddress
	}
	c, err := NewConnContext(ctx, opts, root)
	if err != nil {
		return nil, err // an untyped nil: never a nil *Conn in a topo.Conn
	}
	return c, nil
}

var _ topo.ContextFactory = (*Factory)(nil)

func init() { topo.MustRegisterFactory(FactoryName, NewFactory(Options{})) }

// Conn is a topo.Conn on one Consul agent, rooted at a key prefix. It is
// safe for concurrent use. Create Conns with NewConn or through the
// "consul" factory.
type Conn struct {
	// Claims are Lock, LockWithTTL, LockName, TryLock,
	// NewLeaderParticipation and ResumeLeaderParticipation: the claims
	// engine over this store's driver (driver.go).
	claims.Claims
	eng *claims.Engine

	client    *api.Client
	transport *http.Transport
	kv        *api.KV
	root      string // canonical, "" for the whole KV store
	opts      Options

	// ctx ends when the Conn is closed; background work (session renewal,
	// watches, leadership monitors) runs under it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	sessionMu sync.Mutex // serialises creating the shared session

	// stripes serialise the acquire requests of one key within the Conn
	// (see send).
	stripes [64]sync.Mutex

	// grants holds the tokens of the keys this Conn's claims acquired and
	// have not released (see resolve).
	grants keySet[uint64]
	// contended holds the lock and election keys a contender of this Conn
	// recently found held or queued for (see queue.go): the next one
	// queues at once.
	contended keySet[string]

	mu       sync.Mutex
	closed   bool
	shared   *session              // the long-lived session, nil until needed
	sessions map[*session]struct{} // every live session, destroyed by Close
	// waiters and preds hold what the Conn knows of its entries waiting
	// in queues (see waiter).
	waiters map[string]*waiter
	preds   map[string]*waiter
	// tailDrops holds, by the token of the acquire that started it, each
	// tail drop still running in the background (dropTailLater), closed
	// when it is over; a drop removes only its own record (a later
	// acquire of the same index, after an agent restart, records its
	// drop beside it).
	tailDrops map[uint64][]chan struct{}
}

// keySet is a set of keys, safe for concurrent use; the zero value is
// empty.
type keySet[K comparable] struct{ m sync.Map }

// set adds k to s (on) or removes it.
func (s *keySet[K]) set(k K, on bool) {
	if on {
		s.m.Store(k, nil)
	} else {
		s.m.Delete(k)
	}
}

// has reports whether k is in s.
func (s *keySet[K]) has(k K) bool {
	_, ok := s.m.Load(k)
	return ok
}

// NewConn is NewConnContext without a context: the first request is
// bounded by opts.DialTimeout alone.
func NewConn(opts Options, root string) (*Conn, error) {
	return NewConnContext(context.Background(), opts, root)
}

// NewConnContext returns a Conn on the agent at opts.Address whose files
// live under the key prefix root ("" or "/" for the whole KV store; "/a/b"
// and "a/b" are the same root).
//
// It sends the agent one cheap request that needs no ACL permission, so
// that a read-only token opens: with an ACL token (Options.Token,
// TokenFile, or the api environment) GET /v1/acl/token/self, which also
// checks that Consul knows the token (an agent without ACLs answers it
// "ACL support disabled", which is fine) and is answered by the servers'
// leader; without a token GET /v1/status/leader, which the agent answers
// even while its datacenter has no leader. The request, its TCP connect
// and TLS handshake are bounded by opts.DialTimeout (default 5 s) and by
// ctx.
//
// It returns InvalidPath for a malformed root; InvalidArgument for an
// unknown read mode, an empty address, an unreadable token file or
// unusable TLS settings; Timeout or Interrupted (naming the address) when
// ctx has ended or ends during the request; PermissionDenied (naming the
// address) when Consul refuses the token ("ACL not found"); and
// Unavailable naming the address when no answer comes within the bound
// (nothing listens, the agent accepts connections but does not answer, the
// TLS handshake fails, a plain-HTTP Conn meets an agent serving only
// HTTPS) or the agent answers with an error. Once it returned, an agent
// that goes away shows up as Unavailable or Timeout errors from the
// Conn's calls, each bounded as Options.RequestTimeout says.
func NewConnContext(ctx context.Context, opts Options, root string) (*Conn, error) {
	r, err := topo.CleanDirPath(root)
	if err != nil {
		return nil, err
	}
	if opts.Reads != ReadConsistent && opts.Reads != ReadDefault {
		return nil, backendkit.Wrap(topo.InvalidArgument, r, fmt.Errorf("unknown read mode %v", opts.Reads))
	}
	opts = opts.normalized()

	cfg := api.DefaultConfig()
	if addr, _, _ := strings.Cut(opts.Address, ","); addr != "" {
		cfg.Address = strings.TrimSpace(addr)
	} else if opts.Address != "" {
		return nil, backendkit.Wrap(topo.InvalidArgument, opts.Address, errors.New("empty Consul agent address"))
	}
	switch {
	case opts.Token != "":
		cfg.Token = opts.Token
	case opts.TokenFile != "":
		b, err := os.ReadFile(opts.TokenFile)
		if err != nil {
			return nil, backendkit.Wrap(topo.InvalidArgument, opts.TokenFile, fmt.Errorf("reading the ACL token file: %w", err))
		}
		cfg.Token = strings.TrimSpace(string(b))
		cfg.TokenFile = ""
	}
	if opts.CAFile != "" || opts.CertFile != "" || opts.KeyFile != "" || opts.TLSServerName != "" {
		cfg.Scheme = "https"
		cfg.TLSConfig.CAFile = opts.CAFile
		cfg.TLSConfig.CertFile = opts.CertFile
		cfg.TLSConfig.KeyFile = opts.KeyFile
		cfg.TLSConfig.Address = opts.TLSServerName // the api package's name for the ServerName
	}
	if err := backendkit.CheckContext(ctx, cfg.Address); err != nil {
		return nil, err
	}
	// Blocking queries park connections; keep enough idle ones that
	// ordinary calls do not dial each time.
	cfg.Transport.MaxIdleConnsPerHost = 64
	dialer := &net.Dialer{Timeout: opts.DialTimeout, KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount}}
	cfg.Transport.DialContext = dialer.DialContext
	// No gzip: the agent compresses every answer of 1400 bytes or more
	// that the client accepts gzipped (a lock's or election's
	// transaction answers reach that with long key paths), and
	// decompressing costs the client too. The HTTP API is meant for an
	// agent on the same host or network, where compressing costs more
	// CPU than it saves in transfer: with 300 candidates on one election
	// under 50-byte roots it was about a tenth of the agent's and of the
	// client's CPU per term.
	cfg.Transport.DisableCompression = true
	cfg.Transport.TLSHandshakeTimeout = opts.DialTimeout
	httpClient, err := api.NewHttpClient(cfg.Transport, cfg.TLSConfig)
	if err != nil {
		return nil, backendkit.Wrap(topo.InvalidArgument, cfg.Address, err)
	}
	httpClient.Transport = &boundedTransport{base: cfg.Transport, addr: cfg.Address, timeout: opts.RequestTimeout}
	cfg.HttpClient = httpClient
	client, err := api.NewClient(cfg)
	if err != nil {
		return nil, backendkit.Wrap(topo.InvalidArgument, cfg.Address, err)
	}
	if err := probe(ctx, client, cfg.Address, cfg.Token != "", opts.DialTimeout); err != nil {
		cfg.Transport.CloseIdleConnections()
		return nil, err
	}
	cctx, cancel := context.WithCancel(context.Background())
	c := &Conn{
		client:    client,
		transport: cfg.Transport,
		kv:        client.KV(),
		root:      r,
		opts:      opts,
		ctx:       cctx,
		cancel:    cancel,
		sessions:  map[*session]struct{}{},
		waiters:   map[string]*waiter{},
		preds:     map[string]*waiter{},
		tailDrops: map[uint64][]chan struct{}{},
	}
	c.eng = claims.New(driver{c}, claims.Options{Defect: opts.defect})
	c.Claims = c.eng
	return c, nil
}

// probe sends NewConnContext's first request (see there) to the agent at
// addr, bounded by ctx and dialTimeout, and classifies its failure: ctx's
// Timeout or Interrupted, PermissionDenied for a refused token, Unavailable
// otherwise; all name addr.
func probe(ctx context.Context, client *api.Client, addr string, withToken bool, dialTimeout time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	q := (&api.QueryOptions{}).WithContext(pctx)
	var err error
	if withToken {
		_, _, err = client.ACL().TokenReadSelf(q)
		var se api.StatusError
		if errors.As(err, &se) && se.Code == http.StatusUnauthorized && strings.Contains(se.Body, "ACL support disabled") {
			err = nil
		}
	} else {
		_, err = client.Status().LeaderWithQueryOptions(q)
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return backendkit.FromContext(ctx, addr)
	case isPermissionDenied(err):
		return backendkit.Wrap(topo.PermissionDenied, addr, fmt.Errorf("consultopo: the Consul agent at %s refused the ACL token: %w", addr, err))
	}
	if pctx.Err() != nil {
		return backendkit.Wrap(topo.Unavailable, addr, fmt.Errorf("consultopo: no Consul agent answered at %s within %v (the dial timeout): %w", addr, dialTimeout, err))
	}
	return backendkit.Wrap(topo.Unavailable, addr, fmt.Errorf("consultopo: no usable Consul agent at %s: %w", addr, err))
}

// errNoAnswer is the cancellation cause of a request that boundedTransport
// gave up on.
var errNoAnswer = errors.New("no answer")

// noAnswerError is the error of a request the agent did not answer within
// its bound (see Options.RequestTimeout). It wraps no context error, so
// that convertError maps it to Unavailable.
type noAnswerError struct {
	addr  string
	bound time.Duration
}

func (e *noAnswerError) Error() string {
	return fmt.Sprintf("consultopo: the Consul agent at %s sent no answer within %v", e.addr, e.bound)
}

// boundedTransport bounds each request's wait for its response headers:
// timeout for an ordinary request, timeout plus the wait time and Consul's
// jitter for a blocking query (see Options.RequestTimeout). The body is
// not bounded (Consul sends it with the headers). timeout 0: no bound.
type boundedTransport struct {
	base    http.RoundTripper
	addr    string
	timeout time.Duration
}

// RoundTrip implements http.RoundTripper.
func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.timeout <= 0 {
		return t.base.RoundTrip(req)
	}
	bound := t.timeout + blockingWait(req.URL.RawQuery)
	ctx, cancel := context.WithCancelCause(req.Context())
	timer := time.AfterFunc(bound, func() { cancel(errNoAnswer) })
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if !timer.Stop() && context.Cause(ctx) == errNoAnswer {
		// The bound passed (an answer that came at the same moment is
		// dropped: its body may already be cut off).
		if resp != nil {
			_ = resp.Body.Close()
		}
		cancel(nil)
		return nil, &noAnswerError{addr: t.addr, bound: bound}
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose releases a request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}

// blockingWait returns how long Consul may hold the request whose URL
// query is rawQuery before answering: for a blocking query (an index
// above 0) its wait time as Consul applies it (default and cap) plus the
// jitter Consul adds, 0 for any other request.
func blockingWait(rawQuery string) time.Duration {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return consulMaxQueryTime + consulMaxQueryTime/consulJitterFraction
	}
	if idx := q.Get("index"); idx == "" || idx == "0" {
		return 0
	}
	wait := consulDefaultQueryTime
	if w := q.Get("wait"); w != "" {
		if d, err := time.ParseDuration(w); err == nil && d > 0 {
			wait = d
		}
	}
	wait = min(wait, consulMaxQueryTime)
	return wait + wait/consulJitterFraction
}

// Client returns the Conn's consul api client, for callers that need
// Consul features beyond topo.Conn. Its requests are bounded as the
// Conn's are (Options.DialTimeout, Options.RequestTimeout). It is safe for
// concurrent use.
func (c *Conn) Client() *api.Client { return c.client }

// Close implements topo.Conn.Close: it ends every watch (Interrupted),
// cancels leadership contexts, and destroys the Conn's sessions, which
// deletes the lock and election keys they hold (other clients may take them
// after the lock-delay). It waits for background goroutines and is
// idempotent.
func (c *Conn) Close() {
	c.eng.Close()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	sessions := c.sessions // no longer written: c.sessions is a new map
	c.sessions = map[*session]struct{}{}
	c.shared = nil
	c.mu.Unlock()

	c.cancel()
	// Destroy the sessions in parallel, giving up on an unreachable agent
	// after closeTimeout (Consul then expires them after their TTL).
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	var wg sync.WaitGroup
	for s := range sessions {
		s.markLost(errSessionClosed)
		wg.Go(func() { c.destroySession(ctx, s) })
	}
	wg.Wait()
	cancel()
	c.wg.Wait()
	c.transport.CloseIdleConnections()
}

// isClosed reports whether Close was called.
func (c *Conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// key returns the KV key of the canonical path p ("" is the root itself).
func (c *Conn) key(p string) string {
	switch {
	case c.root == "":
		return p
	case p == "":
		return c.root
	}
	return c.root + "/" + p
}

// dirPrefix returns the KV prefix of the entries under the canonical
// directory dir.
func (c *Conn) dirPrefix(dir string) string {
	if k := c.key(dir); k != "" {
		return k + "/"
	}
	return ""
}

// relPath returns the canonical path of key, relative to the root, and
// false when key is not under the root.
func (c *Conn) relPath(key string) (string, bool) {
	if c.root == "" {
		return key, key != ""
	}
	p, ok := strings.CutPrefix(key, c.root+"/")
	return p, ok && p != ""
}

// queryOptions returns options carrying ctx for a read in the Conn's read
// mode (Options.Reads), or in consistent mode when ctx is of
// topo.WithLinearizableRead.
func (c *Conn) queryOptions(ctx context.Context) *api.QueryOptions {
	consistent := c.opts.Reads != ReadDefault || topo.LinearizableRead(ctx)
	return (&api.QueryOptions{RequireConsistent: consistent}).WithContext(ctx)
}

// consistentOptions returns options for a consistent read, whatever the
// Conn's read mode: every lock and leadership decision is taken on one.
func (c *Conn) consistentOptions(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx)
}

// blocking makes q a blocking query, waiting for an index above index for
// at most Options.WatchPollDuration.
func (c *Conn) blocking(q *api.QueryOptions, index uint64) *api.QueryOptions {
	q.WaitIndex, q.WaitTime = index, c.opts.WatchPollDuration
	return q
}

// writeOptions returns options carrying ctx for a write.
func (c *Conn) writeOptions(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{}).WithContext(ctx)
}

// spawn runs f in a goroutine that Close waits for. After Close the
// goroutine is not tracked (f then finishes quickly: the Conn's context is
// cancelled).
func (c *Conn) spawn(f func()) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		go f()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		f()
	}()
}
