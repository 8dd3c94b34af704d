package consultopo

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// FactoryName is the name the backend registers under.
const FactoryName = "consul"

const (
	// DefaultSessionTTL is Options.SessionTTL's default.
	DefaultSessionTTL = 15 * time.Second
	// MinSessionTTL is Consul's default session_ttl_min (see
	// Options.MinSessionTTL).
	MinSessionTTL = 10 * time.Second
	// MaxSessionTTL is Consul's longest session TTL, LockName's; longer
	// TTLs are cut to it.
	MaxSessionTTL = 24 * time.Hour
	// DefaultLockDelay is the lock-delay of the sessions this backend
	// creates: after a session holding a lock is invalidated, Consul hands
	// the lock to no one else for this long. Consul's default (15 s) would
	// delay every failover; holders here notice a loss within a round trip
	// or one TTL without renewal, so one second covers requests in flight.
	DefaultLockDelay = time.Second
	// DefaultWatchPollDuration is Options.WatchPollDuration's default.
	DefaultWatchPollDuration = 30 * time.Second
	// DefaultAddress is Options.Address's default.
	DefaultAddress = "127.0.0.1:8500"
	// DefaultDialTimeout is Options.DialTimeout when it is zero.
	DefaultDialTimeout = 5 * time.Second
	// DefaultRequestTimeout is Options.RequestTimeout when it is zero.
	DefaultRequestTimeout = 30 * time.Second
)

// Consul's blocking-query limits: default_query_time, max_query_time, and
// the jitter it adds, up to a sixteenth of the wait.
const (
	consulDefaultQueryTime = 5 * time.Minute
	consulMaxQueryTime     = 10 * time.Minute
	consulJitterFraction   = 16
)

// Options are a Conn's settings. The zero value connects to
// DefaultAddress without ACL token or TLS, with each field's default.
type Options struct {
	// Address is the agent's HTTP address, "host:port"; of a
	// comma-separated list only the first is used (a client talks to one
	// agent). Empty means CONSUL_HTTP_ADDR when set, else DefaultAddress.
	Address string

	// Token is the ACL token sent with every request; TokenFile names a
	// file holding it (read once, by NewConn, at most
	// backendkit.MaxSecretFileSize bytes: a larger file is
	// InvalidArgument). Token wins over TokenFile;
	// with neither, CONSUL_HTTP_TOKEN and CONSUL_HTTP_TOKEN_FILE apply.
	Token     string
	TokenFile string

	// CAFile (verifying the agent), CertFile and KeyFile (the client's)
	// and TLSServerName (the name the agent's certificate must hold;
	// empty: Address's host) configure TLS; any of them means https.
	CAFile        string
	CertFile      string
	KeyFile       string
	TLSServerName string

	// SessionTTL is the TTL of the Conn's long-lived session (of Lock,
	// TryLock and elections), rounded up to whole seconds within
	// [MinSessionTTL, MaxSessionTTL]; zero or negative means
	// DefaultSessionTTL. A holder that cannot renew for this long
	// considers its claims lost; Consul may keep its keys for twice the
	// TTL, plus the lock-delay.
	SessionTTL time.Duration

	// MinSessionTTL is the servers' session_ttl_min, the shortest TTL
	// they accept: every TTL this Conn asks for is raised to it. Zero or
	// negative means MinSessionTTL (10 s, Consul's default); it is rounded
	// up to whole seconds, at least one.
	MinSessionTTL time.Duration

	// LockDelay is the lock-delay of the sessions this Conn creates (see
	// DefaultLockDelay). Zero means DefaultLockDelay; a negative value
	// disables it. Consul caps it at 60 s.
	LockDelay time.Duration

	// Reads is the consistency mode of Get, List, ListDir, Watch,
	// WatchRecursive, GetCurrentLeaderID and WaitForNewLeader; reads under
	// topo.WithLinearizableRead and lock and leadership decisions are
	// consistent whatever it says.
	Reads ReadMode

	// WatchPollDuration is the wait time of each blocking query (watches,
	// lock and leadership waits). Zero means DefaultWatchPollDuration;
	// Consul caps it at 10 minutes. Shorter values notice a restarted
	// (emptied) agent sooner, with more requests.
	WatchPollDuration time.Duration

	// DialTimeout bounds NewConn's first request (see NewConnContext),
	// its TCP connect and TLS handshake included. Each later TCP connect
	// and TLS handshake to the agent is bounded by the longer of
	// DialTimeout and DefaultDialTimeout, so that a short DialTimeout
	// chosen to fail fast at open does not fail the reconnections of a
	// loaded machine. Zero or negative means DefaultDialTimeout (5 s).
	DialTimeout time.Duration

	// RequestTimeout bounds each request's wait for the agent's answer
	// (Client()'s too): Unavailable after RequestTimeout, for a blocking
	// query after its wait time plus Consul's jitter (a sixteenth) plus
	// RequestTimeout; such a request may still have been applied. Zero
	// means DefaultRequestTimeout (30 s, above the 7 s a healthy agent
	// holds a request while its servers elect a leader); negative, none.
	RequestTimeout time.Duration

	// MaxBlockingQueries bounds the blocking queries of the Conn's watches
	// (Watch, WatchRecursive, WaitForNewLeader, Observe, Client()'s) open
	// at once, each holding an HTTP connection, so that its other requests
	// stay below the agent's per-address cap (package doc, "Connections").
	// A claim's own queries (waits of Lock and leadership, the watch of a
	// held lock or term) have a bound of their own, half of it and at least
	// two, so that a handover never waits behind idle watches. A query past
	// a bound waits, holding no connection, for a slot (watches first come
	// first served; claims' the nearest the head of its queue first, one
	// slot kept for the heads' waits for the key), then asks from the index
	// it last saw: nothing is missed, only delayed, behind k others by up
	// to about ceil(k/bound) WatchPollDurations (a slot frees when a query
	// is answered). Zero means DefaultMaxBlockingQueries; negative, no
	// bound. Keep the sum of one and a half times the bounds of all clients
	// of one host below the agent's cap, with room for their other
	// requests.
	MaxBlockingQueries int

	// TxnMaxRequestBytes is the largest request body, in bytes, that Txn
	// sends (larger: InvalidArgument, nothing sent); set it to the larger
	// of the agent's limits.txn_max_req_len and kv_max_value_size when
	// they were raised. Zero means DefaultTxnMaxRequestBytes.
	TxnMaxRequestBytes int

	// defect is the claims engine's deliberate defect (mutation test).
	defect claims.Defect
}

// ReadMode is the Consul consistency mode of a Conn's reads.
type ReadMode int

const (
	// ReadConsistent (the default) sends reads with ?consistent: a read
	// never misses a write acknowledged before it started, by any Conn;
	// right after a leader election Consul refuses it until the new leader
	// has applied every committed write (cost: docs/layout-consul.md).
	ReadConsistent ReadMode = iota
	// ReadDefault is Consul's default mode: after a restart or a leader
	// change a read may miss committed writes, even this Conn's own.
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
	o.SessionTTL = o.clampTTL(backendkit.OrDefault(o.SessionTTL, DefaultSessionTTL))
	o.LockDelay = orOff(o.LockDelay, DefaultLockDelay)
	o.WatchPollDuration = backendkit.OrDefault(o.WatchPollDuration, DefaultWatchPollDuration)
	o.TxnMaxRequestBytes = backendkit.OrDefault(o.TxnMaxRequestBytes, DefaultTxnMaxRequestBytes)
	o.DialTimeout = backendkit.OrDefault(o.DialTimeout, DefaultDialTimeout)
	o.MaxBlockingQueries = cmp.Or(o.MaxBlockingQueries, DefaultMaxBlockingQueries) // negative: no bound
	o.RequestTimeout = orOff(o.RequestTimeout, DefaultRequestTimeout)              // 0: no bound
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
// MaxSessionTTL].
func (o Options) clampTTL(ttl time.Duration) time.Duration {
	return min(max(wholeSeconds(ttl), o.MinSessionTTL), MaxSessionTTL)
}

func wholeSeconds(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second)
}

// Factory creates Conns with fixed Options, a non-empty serverAddress
// replacing Options.Address; the one registered as "consul" uses the zero
// Options. It is a topo.ContextFactory and safe for concurrent use.
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

// CreateContext implements topo.ContextFactory: NewConnContext with the
// factory's options (errors: see there). cell is not used.
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

// Conn is a topo.Conn on one Consul agent, rooted at a key prefix, safe
// for concurrent use. Create it with NewConn or the "consul" factory.
type Conn struct {
	// Claims: the claims engine over this store's driver (driver.go).
	claims.Claims
	eng *claims.Engine

	client     *api.Client
	transport  *http.Transport
	bounded    *boundedTransport // between the slots and transport
	slots      *querySlots       // Options.MaxBlockingQueries, of watches
	claimSlots *querySlots       // of claims' own queries (claimSlotsFor)
	kv         *api.KV
	root       string // canonical, "" for the whole KV store
	opts       Options

	// ctx ends at Close; background work runs under it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	sessionMu sync.Mutex // serialises creating the shared session

	stripes [64]sync.Mutex // see send

	// grants: the tokens of the keys this Conn's claims acquired and have
	// not released (see resolve). contended: the keys a contender of this
	// Conn recently found held or queued for; the next one queues at once.
	grants    keySet[uint64]
	contended keySet[string]

	mu         sync.Mutex
	closed     atomic.Bool                // written under mu
	shared     *session                   // the long-lived session, nil until needed
	sessions   map[*session]struct{}      // every live session, destroyed by Close
	waiters    map[string]*waiter         // see waiter
	preds      map[string]*waiter         // see waiter
	tailDrops  map[uint64][]chan struct{} // see dropTailLater
	keyWatches map[string]*keyWatch       // by key; see keyWatch
}

// keySet is a set, safe for concurrent use; the zero value is empty.
type keySet[K comparable] struct{ m sync.Map }

func (s *keySet[K]) set(k K, on bool) {
	if on {
		s.m.Store(k, nil)
	} else {
		s.m.Delete(k)
	}
}

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
// It sends one request that needs no ACL permission, bounded by ctx and
// opts.DialTimeout: with a token, GET /v1/acl/token/self, answered by the
// servers' leader, checking that Consul knows the token (an agent without
// ACLs answers "ACL support disabled": fine); without, GET
// /v1/status/leader, answered even while the datacenter has no leader.
//
// It returns InvalidPath for a malformed root; InvalidArgument for an
// unknown read mode, an empty address, an unreadable token file or
// unusable TLS settings; and, naming the address, Timeout or Interrupted
// when ctx ends, PermissionDenied when Consul refuses the token, and
// Unavailable when no answer comes within the bound, when nothing
// listens, the TLS handshake fails or plain HTTP reaches an HTTPS agent
// (in these cases its cause a *topo.UnreachableError), or when the agent
// answers with an error.
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
		b, err := backendkit.ReadSecretFile(opts.TokenFile)
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
	// Blocking queries park connections: keep enough idle ones.
	cfg.Transport.MaxIdleConnsPerHost = 64
	// The open's connect and handshake are bounded by probe's DialTimeout
	// context; later ones by connectBound.
	connectBound := max(opts.DialTimeout, DefaultDialTimeout)
	// TCP keep-alive notices a vanished host during a blocking query
	// (docs/layout-consul.md, "Opening a Conn").
	dialer := &net.Dialer{Timeout: connectBound, KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}}
	cfg.Transport.DialContext = dialer.DialContext
	// No gzip: compressing answers (claims' transactions) costs a nearby
	// agent and client more CPU than it saves (a tenth of both's CPU per
	// term, 300 candidates on one election).
	cfg.Transport.DisableCompression = true
	cfg.Transport.TLSHandshakeTimeout = connectBound
	httpClient, err := api.NewHttpClient(cfg.Transport, cfg.TLSConfig)
	if err != nil {
		return nil, backendkit.Wrap(topo.InvalidArgument, cfg.Address, err)
	}
	// A blocking query waits for its slot before RequestTimeout starts.
	slots, claimSlots := newQuerySlots(opts.MaxBlockingQueries, 0), claimSlotsFor(opts.MaxBlockingQueries)
	bounded := &boundedTransport{base: cfg.Transport, addr: cfg.Address, timeout: opts.RequestTimeout}
	httpClient.Transport = &slotTransport{watches: slots, claims: claimSlots, base: bounded}
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
		client:     client,
		transport:  cfg.Transport,
		bounded:    bounded,
		slots:      slots,
		claimSlots: claimSlots,
		kv:         client.KV(),
		root:       r,
		opts:       opts,
		ctx:        cctx,
		cancel:     cancel,
		sessions:   map[*session]struct{}{},
		waiters:    map[string]*waiter{},
		preds:      map[string]*waiter{},
		tailDrops:  map[uint64][]chan struct{}{},
		keyWatches: map[string]*keyWatch{},
	}
	c.eng = claims.New(driver{c}, claims.Options{Defect: opts.defect})
	c.Claims = c.eng
	return c, nil
}

// probe sends NewConnContext's first request and classifies its failure
// (see there).
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
		return backendkit.Wrap(topo.Unavailable, addr, &topo.UnreachableError{Addrs: []string{addr},
			Err: fmt.Errorf("consultopo: no Consul agent answered at %s within %v (the dial timeout): %w", addr, dialTimeout, err)})
	}
	var se api.StatusError
	if errors.As(err, &se) && !strings.Contains(se.Body, "HTTP request to an HTTPS server") {
		// The agent answered, with an error: it is reachable.
		return backendkit.Wrap(topo.Unavailable, addr, fmt.Errorf("consultopo: the Consul agent at %s answered with an error: %w", addr, err))
	}
	// Nothing listens, the TLS handshake failed, or plain HTTP reached an
	// HTTPS agent: no agent the Conn could use answers at addr.
	return backendkit.Wrap(topo.Unavailable, addr, &topo.UnreachableError{Addrs: []string{addr},
		Err: fmt.Errorf("consultopo: no usable Consul agent at %s: %w", addr, err)})
}

// errNoAnswer is boundedTransport's cancellation cause.
var errNoAnswer = errors.New("no answer")

// boundedTransport bounds each request's wait for its response headers
// (Options.RequestTimeout; timeout 0: no bound). Consul sends the body
// with the headers. It also aborts a request whose context ends without
// harm to a connection another request took meanwhile (requestGate).
type boundedTransport struct {
	base    http.RoundTripper
	addr    string
	timeout time.Duration
	// deferred counts the aborts that waited for RoundTrip (a test
	// reads it).
	deferred atomic.Int64
}

// RoundTrip implements http.RoundTripper.
func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	parent := req.Context()
	g, ctx := newRequestGate(parent, &t.deferred)
	stop := context.AfterFunc(parent, func() { g.abort(context.Cause(parent), false) })
	bound := t.timeout + blockingWait(req.URL.RawQuery)
	var timer *time.Timer
	if t.timeout > 0 {
		timer = time.AfterFunc(bound, func() { g.abort(errNoAnswer, true) })
	}
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if timer != nil {
		timer.Stop()
	}
	release := func() { stop(); g.cancel(nil) }
	if cause := g.roundTripped(); cause != nil {
		// Aborted (an answer just then may be cut off: dropped).
		if resp != nil {
			_ = resp.Body.Close()
		}
		release()
		if cause == errNoAnswer {
			// It wraps no context error: Unavailable.
			return nil, fmt.Errorf("consultopo: the Consul agent at %s sent no answer within %v", t.addr, bound)
		}
		return nil, cause
	}
	if err != nil {
		release()
		return nil, err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		// The agent's refusal of a connection past its per-client limit
		// (or a rate limit) comes as this error on every call, whatever
		// the API client does with the status of the call's answer (its
		// Txn call drops it): ResourceExhausted (codeOf).
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		_ = resp.Body.Close()
		release()
		return nil, api.StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(body))}
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: release}
	return resp, nil
}

// requestGate aborts one request. net/http puts a connection back in its
// idle pool as soon as it has read an answer without a body (Consul's 404
// to a GET of a missing key), before the request's RoundTrip has taken
// that answer; a cancellation of the request's context in that gap
// closes the connection, which another request may have taken meanwhile:
// that one fails with the first one's cause (a semaphore's session create
// failed with "consul session destroyed by its connection": a released
// lock's Monitor query, answered 404 by the release, was cancelled by the
// end of its session at that moment; TestAbortSparesReusedConnection).
// So a request is sent with a context of its own, cancelled at once by an
// abort that comes before the first byte of the answer was read (net/http
// then closes the connection, still the request's), and by one that comes
// after it only once RoundTrip has returned (Consul sends the body with
// the headers, so that is at once), unless the abort is the request's
// bound (force), which ends it at once in any case.
type requestGate struct {
	trace  httptrace.ClientTrace
	cancel context.CancelCauseFunc // of the context the request is sent with

	mu       sync.Mutex
	answered bool  // the first byte of the answer was read
	returned bool  // RoundTrip returned
	cause    error // the abort's, once the context is cancelled
	pending  error // an abort waiting for RoundTrip to return

	deferred *atomic.Int64 // the transport's count of aborts that waited
}

// newRequestGate returns a gate and the context to send a request of
// parent with: parent's values (its trace hooks too), not its
// cancellation.
func newRequestGate(parent context.Context, deferred *atomic.Int64) (*requestGate, context.Context) {
	g := &requestGate{deferred: deferred}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	g.cancel = cancel
	// It runs in net/http's read loop before the connection can go back
	// to the pool.
	g.trace.GotFirstResponseByte = func() {
		g.mu.Lock()
		g.answered = true
		g.mu.Unlock()
	}
	return g, httptrace.WithClientTrace(ctx, &g.trace)
}

// abort ends the request with cause: at once before its answer, after
// RoundTrip returned or when forced, else once RoundTrip returns.
func (g *requestGate) abort(cause error, force bool) {
	g.mu.Lock()
	if g.cause != nil {
		g.mu.Unlock()
		return
	}
	if g.answered && !g.returned && !force {
		if g.pending == nil {
			g.pending = cause
			g.deferred.Add(1)
		}
		g.mu.Unlock()
		return
	}
	g.cause = cause
	g.mu.Unlock()
	g.cancel(cause)
}

// roundTripped records that RoundTrip returned and runs an abort that
// waited for it. It returns the abort's cause when the request was
// aborted before, or by that abort, else nil.
func (g *requestGate) roundTripped() error {
	g.mu.Lock()
	g.returned = true
	cause, pending := g.cause, g.pending
	g.mu.Unlock()
	if cause == nil && pending != nil {
		g.abort(pending, true)
		return pending
	}
	return cause
}

// cancelOnClose releases a request's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel func()
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// blockingWait returns how long Consul may hold a request with the URL
// query rawQuery: a blocking query's (index above 0) wait time, as Consul
// applies it, plus jitter; 0 for any other request.
func blockingWait(rawQuery string) time.Duration {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return consulMaxQueryTime + consulMaxQueryTime/consulJitterFraction
	}
	if idx := q.Get("index"); idx == "" || idx == "0" {
		return 0
	}
	wait := consulDefaultQueryTime
	if d, err := time.ParseDuration(q.Get("wait")); err == nil && d > 0 { // "" is an error
		wait = d
	}
	wait = min(wait, consulMaxQueryTime)
	return wait + wait/consulJitterFraction
}

// Client returns the Conn's consul api client, for Consul features beyond
// topo.Conn, bounded as the Conn's requests are. It is safe for
// concurrent use.
func (c *Conn) Client() *api.Client { return c.client }

// Close implements topo.Conn.Close: it ends every watch (Interrupted) and
// claim and destroys the Conn's sessions, deleting their keys (trying for
// at most 5 s; others may take them after the lock-delay). It waits for
// background goroutines and is idempotent.
func (c *Conn) Close() {
	c.eng.Close()
	c.mu.Lock()
	if c.closed.Swap(true) {
		c.mu.Unlock()
		return
	}
	sessions := c.sessions // no longer written: c.sessions is a new map
	c.sessions = map[*session]struct{}{}
	c.shared = nil
	c.mu.Unlock()

	c.cancel()
	// Past closeTimeout, Consul expires them after their TTL.
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

func (c *Conn) isClosed() bool { return c.closed.Load() }

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

// dirPrefix returns the KV prefix of the directory dir's entries.
func (c *Conn) dirPrefix(dir string) string {
	if k := c.key(dir); k != "" {
		return k + "/"
	}
	return ""
}

// queryOptions returns options carrying ctx for a read in the Conn's read
// mode, consistent under topo.WithLinearizableRead.
func (c *Conn) queryOptions(ctx context.Context) *api.QueryOptions {
	consistent := c.opts.Reads != ReadDefault || topo.LinearizableRead(ctx)
	return (&api.QueryOptions{RequireConsistent: consistent}).WithContext(ctx)
}

// consistentOptions returns options for a consistent read.
func (c *Conn) consistentOptions(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx)
}

// blocking makes q a blocking query for an index above index.
func (c *Conn) blocking(q *api.QueryOptions, index uint64) *api.QueryOptions {
	q.WaitIndex, q.WaitTime = index, c.opts.WatchPollDuration
	return q
}

func (c *Conn) writeOptions(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{}).WithContext(ctx)
}

// spawn runs f in a goroutine that Close waits for (after Close, untracked:
// the Conn's context is cancelled).
func (c *Conn) spawn(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed.Load() {
		go f()
		return
	}
	c.wg.Go(f)
}
