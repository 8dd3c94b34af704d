package consultopo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
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
	// decisions always use consistent reads, whatever this says.
	Reads ReadMode

	// WatchPollDuration is the wait time of each blocking query (Watch,
	// WatchRecursive, lock and leadership waits). Zero means
	// DefaultWatchPollDuration; Consul caps it at 10 minutes. Shorter
	// values notice a restarted (emptied) agent sooner at the cost of more
	// requests.
	WatchPollDuration time.Duration

	// TxnMaxRequestBytes is the largest transaction request body, in
	// bytes, that Txn sends: set it to the larger of the agent's
	// limits.txn_max_req_len and kv_max_value_size when they were raised.
	// Zero means DefaultTxnMaxRequestBytes (Consul's default, 512 KiB); a
	// transaction estimated larger fails with InvalidArgument before
	// anything is sent.
	TxnMaxRequestBytes int
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
	if o.MinSessionTTL <= 0 {
		o.MinSessionTTL = MinSessionTTL
	}
	o.MinSessionTTL = max(wholeSeconds(o.MinSessionTTL), time.Second)
	if o.SessionTTL == 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	o.SessionTTL = o.clampTTL(o.SessionTTL)
	switch {
	case o.LockDelay == 0:
		o.LockDelay = DefaultLockDelay
	case o.LockDelay < 0:
		o.LockDelay = 0
	}
	if o.WatchPollDuration <= 0 {
		o.WatchPollDuration = DefaultWatchPollDuration
	}
	if o.TxnMaxRequestBytes <= 0 {
		o.TxnMaxRequestBytes = DefaultTxnMaxRequestBytes
	}
	return o
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
// NewFactory(Options{Reads: ReadDefault, ...}) for other settings. It is
// safe for concurrent use.
type Factory struct {
	opts Options
}

// NewFactory returns a Factory using opts for every Conn it creates.
func NewFactory(opts Options) *Factory { return &Factory{opts: opts} }

// Create implements topo.Factory: it returns NewConn with the factory's
// options and serverAddress as the agent address. cell is not used.
func (f *Factory) Create(cell, serverAddress, root string) (topo.Conn, error) {
	opts := f.opts
	if serverAddress != "" {
		opts.Address = serverAddress
	}
	return NewConn(opts, root)
}

func init() { topo.MustRegisterFactory(FactoryName, NewFactory(Options{})) }

// Conn is a topo.Conn on one Consul agent, rooted at a key prefix. It is
// safe for concurrent use. Create Conns with NewConn or through the
// "consul" factory.
type Conn struct {
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

	mu       sync.Mutex
	closed   bool
	shared   *session              // the long-lived session, nil until needed
	sessions map[*session]struct{} // every live session, destroyed by Close
	claims   map[string]*claim     // keys locked (or being locked) through this Conn
}

// NewConn returns a Conn on the agent at opts.Address whose files live
// under the key prefix root ("" or "/" for the whole KV store; "/a/b" and
// "a/b" are the same root). It does not contact the agent: an unreachable
// agent shows up as Unavailable errors on the first calls. It returns
// InvalidPath for a malformed root and InvalidArgument when the token file
// cannot be read or the TLS settings are unusable.
func NewConn(opts Options, root string) (*Conn, error) {
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
	// Blocking queries park connections; keep enough idle ones that
	// ordinary calls do not dial each time.
	cfg.Transport.MaxIdleConnsPerHost = 64
	client, err := api.NewClient(cfg)
	if err != nil {
		return nil, backendkit.Wrap(topo.InvalidArgument, cfg.Address, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Conn{
		client:    client,
		transport: cfg.Transport,
		kv:        client.KV(),
		root:      r,
		opts:      opts,
		ctx:       ctx,
		cancel:    cancel,
		sessions:  map[*session]struct{}{},
		claims:    map[string]*claim{},
	}, nil
}

// Client returns the Conn's consul api client, for callers that need
// Consul features beyond topo.Conn. It is safe for concurrent use.
func (c *Conn) Client() *api.Client { return c.client }

// Close implements topo.Conn.Close: it ends every watch (Interrupted),
// cancels leadership contexts, and destroys the Conn's sessions, which
// deletes the lock and election keys they hold (other clients may take them
// after the lock-delay). It waits for background goroutines and is
// idempotent.
func (c *Conn) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	sessions := make([]*session, 0, len(c.sessions))
	for s := range c.sessions {
		sessions = append(sessions, s)
	}
	c.sessions = map[*session]struct{}{}
	c.shared = nil
	c.mu.Unlock()

	c.cancel()
	// Destroy the sessions in parallel, giving up on an unreachable agent
	// after closeTimeout (Consul then expires them after their TTL).
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	var wg sync.WaitGroup
	for _, s := range sessions {
		s.markLost(errSessionClosed)
		wg.Go(func() { c.destroySessionCtx(ctx, s) })
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

// begin runs the last checks of backendkit's check order, once the
// arguments are validated: ctx is live (again: the first check of every
// method, before its path), then the Conn is open. path is used in the
// errors.
func (c *Conn) begin(ctx context.Context, path string) error {
	if err := backendkit.CheckContext(ctx, path); err != nil {
		return err
	}
	if c.isClosed() {
		return topo.NewError(topo.Closed, path)
	}
	return nil
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
// mode (Options.Reads).
func (c *Conn) queryOptions(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{RequireConsistent: c.opts.Reads != ReadDefault}).WithContext(ctx)
}

// blockingOptions returns options for a blocking query in the Conn's read
// mode, waiting for an index above index for at most
// Options.WatchPollDuration.
func (c *Conn) blockingOptions(ctx context.Context, index uint64) *api.QueryOptions {
	q := c.queryOptions(ctx)
	q.WaitIndex, q.WaitTime = index, c.opts.WatchPollDuration
	return q
}

// consistentOptions returns options for a consistent read, whatever the
// Conn's read mode: every lock and leadership decision is taken on one.
func (c *Conn) consistentOptions(ctx context.Context) *api.QueryOptions {
	return (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx)
}

// consistentBlocking is blockingOptions in consistent mode.
func (c *Conn) consistentBlocking(ctx context.Context, index uint64) *api.QueryOptions {
	q := c.consistentOptions(ctx)
	q.WaitIndex, q.WaitTime = index, c.opts.WatchPollDuration
	return q
}

// writeOptions returns options carrying ctx for a write.
func (c *Conn) writeOptions(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{}).WithContext(ctx)
}

// callCtx returns a context that ends when ctx ends or the Conn closes.
func (c *Conn) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	return cctx, func() { stop(); cancel() }
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
