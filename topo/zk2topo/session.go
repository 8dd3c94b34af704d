package zk2topo

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// zkSession is one ZooKeeper session, and the one *zk.Conn that carries it.
// The client library re-establishes a session transparently when the
// server expired the old one, and sends the requests it had queued on the
// new one; a zkSession never lets it: once its session is over (the server
// said it expired, the Conn gave it up, or the Conn closed) its dialer
// refuses every connection and its *zk.Conn is closed, so every request
// issued on it fails and none reaches the server on another session. The
// Conn then opens a new zkSession for later calls.
type zkSession struct {
	c   *Conn
	zk  *zk.Conn
	obs *sessionObserver

	lost chan struct{} // closed when the session is over
	// claims is the claims engine's view of the session: lose declares it
	// lost (claims.Session.Lost) just before lost is closed, so every
	// claim on the session (a lock's Done, the leadership contexts and
	// their terms' Done) ends within lose itself: whoever sees lost
	// closed (isLost, Check) sees every claim on the session ended too.
	claims   *claims.Session
	ready    chan struct{} // closed once zk is set (lose may run before)
	dead     atomic.Bool   // set (first) when the session is over: the dialer refuses
	loseOnce sync.Once

	// dialHold, when set (by tests only), is a channel that every dial
	// waits on until it is closed: a test that closes the session from
	// another connection holds the client's redials meanwhile.
	dialHold atomic.Pointer[chan struct{}]

	authMu   sync.Mutex
	authDone atomic.Bool
	synced   atomic.Bool // a sync ran on this session before its first read

	connected atomic.Bool // the library has the session on a live connection

	mu sync.Mutex
	// entries are the session's live lock and election entries, by
	// znode path (see entry.go).
	entries map[string]*entry
	creates map[string]uint64 // parent znode → entry creates started under it
	pending map[string]int
}

// newSessionAs starts a session (the servers are dialled in the
// background); with a non-zero id it asks the server to attach the
// existing session id (password passwd) instead of making a new one (see
// resumeFrame).
func (c *Conn) newSessionAs(id int64, passwd []byte) (*zkSession, error) {
	s := &zkSession{
		c:       c,
		lost:    make(chan struct{}),
		ready:   make(chan struct{}),
		entries: map[string]*entry{},
		creates: map[string]uint64{},
		pending: map[string]int{},
	}
	s.claims = claims.NewSession("", s)
	s.obs = newSessionObserver(c.opts.SessionTimeout)
	s.obs.resumeID, s.obs.resumePw = id, passwd
	zc, _, err := zk.Connect(c.opts.Servers, c.opts.SessionTimeout,
		zk.WithLogger(slogLogger{c.log}),
		zk.WithLogInfo(false),
		zk.WithDialer(s.dial),
		zk.WithHostProvider(&redialProvider{DNSHostProvider: zk.NewDNSHostProvider()}),
		zk.WithEventCallback(s.onEvent))
	s.zk = zc
	close(s.ready)
	if err != nil {
		return nil, err
	}
	c.bg.Add(1)
	go s.watchdog()
	return s, nil
}

// redialProvider is the client library's HostProvider: its
// DNSHostProvider, except for when the library pauses. The library sleeps
// one second before a dial whenever Next says retryStart. The
// DNSHostProvider says so on coming back round to the server of the last
// connection, so with one server the library waited a second before
// redialling it after every disconnection; and a session the server
// itself ended (closed by another connection or by an operator) is only
// reported, as StateExpired, on reconnecting: its locks' Done and every
// other loss signal closed about a second after the server ended it,
// whatever the session timeout. redialProvider lets every server be tried
// twice at once after a connection is lost (and at the start), and pauses
// only before each later round: twice, because the server that ends a
// session also drops the connection the client may just have re-opened to
// it (its handshake then fails, and the next one is answered "expired").
// A dead or quorum-less ensemble is still dialled twice a second per
// server, not in a busy loop.
type redialProvider struct {
	*zk.DNSHostProvider

	mu    sync.Mutex
	tries int // dials since the last connection or pause
}

// Next returns the next server, and true (pause first) once every server
// was tried twice since the last connection or pause.
func (p *redialProvider) Next() (string, bool) {
	server, _ := p.DNSHostProvider.Next()
	p.mu.Lock()
	defer p.mu.Unlock()
	pause := p.tries >= 2*p.DNSHostProvider.Len()
	if pause {
		p.tries = 0
	}
	p.tries++
	return server, pause
}

// Connected records a connection (a session established on it).
func (p *redialProvider) Connected() {
	p.DNSHostProvider.Connected()
	p.mu.Lock()
	p.tries = 0
	p.mu.Unlock()
}

// dial is the client library's Dialer: it refuses once the session is
// over, so that the library cannot start a new session on this *zk.Conn.
func (s *zkSession) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	if h := s.dialHold.Load(); h != nil {
		<-*h
	}
	if s.dead.Load() {
		return nil, errors.New("zk2topo: session over")
	}
	d := s.c.opts.Dialer
	if d == nil {
		d = net.DialTimeout
	}
	nc, err := d(network, address, timeout)
	if err != nil {
		return nil, err
	}
	if s.dead.Load() {
		_ = nc.Close()
		return nil, errors.New("zk2topo: session over")
	}
	return s.obs.wrap(nc), nil
}

// onEvent runs in the client library's goroutine (it must not block).
func (s *zkSession) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	switch ev.State {
	case zk.StateExpired:
		// Synchronously, before the library can dial again: the dialer
		// refuses from now on.
		s.lose()
	case zk.StateHasSession:
		s.connected.Store(true)
	case zk.StateDisconnected, zk.StateConnecting, zk.StateAuthFailed:
		s.connected.Store(false)
		s.stepDown()
	}
}

// lose ends the session for good: the dialer refuses, the session is
// declared lost to the claims engine (every claim on it ends: a lock's
// Done closes, leadership contexts are cancelled, terms end, waiters
// return LockLost), then lost is closed, all before lose returns; the
// *zk.Conn is closed in the background (which fails every request issued
// on it).
func (s *zkSession) lose() {
	s.dead.Store(true)
	s.loseOnce.Do(func() {
		s.connected.Store(false)
		s.mu.Lock()
		clear(s.entries) // the server deletes them with the session
		s.mu.Unlock()
		s.claims.Lost() // the claims first: see claims
		close(s.lost)
		s.c.bg.Add(1)
		go func() {
			defer s.c.bg.Done()
			<-s.ready
			if s.zk != nil {
				s.zk.Close()
			}
		}()
	})
}

// isLost reports whether the session is over.
func (s *zkSession) isLost() bool {
	select {
	case <-s.lost:
		return true
	default:
		return false
	}
}

// safeUntil is the instant until which the session surely lives on the
// server: the send time of the latest request the server answered, plus
// the negotiated session timeout, minus the safety margin. Zero before the
// server first answered.
func (s *zkSession) safeUntil() time.Time {
	proof, timeout := s.obs.lastProof()
	if proof.IsZero() {
		return time.Time{}
	}
	return proof.Add(timeout - s.c.margin(timeout))
}

// provablyAlive reports whether the session is connected and within its
// safe window (see safeUntil).
func (s *zkSession) provablyAlive() bool {
	if s.isLost() || !s.connected.Load() {
		return false
	}
	return time.Now().Before(s.safeUntil())
}

// watchdog gives the session up once it is past its safe window: the
// server may expire it from then on, and let another client take its locks
// and leadership, so its holders must have stepped down before.
func (s *zkSession) watchdog() {
	defer s.c.bg.Done()
	t := time.NewTimer(s.c.opts.SessionTimeout)
	defer t.Stop()
	for {
		select {
		case <-s.lost:
			return
		case <-s.c.closing:
			return
		case <-t.C:
		}
		until := s.safeUntil()
		if until.IsZero() {
			// Never answered yet: nothing can be held on it.
			t.Reset(s.c.opts.SessionTimeout / 4)
			continue
		}
		if d := time.Until(until); d > 0 {
			t.Reset(d)
			continue
		}
		s.c.log.Warn("zk2topo: no answer from ZooKeeper within the session timeout minus the safety margin: giving the session up",
			"session", s.zk.SessionID())
		s.lose()
		return
	}
}

// ensureAuth adds the configured credentials to the session once (the
// client library re-sends them after reconnecting within the session).
func (s *zkSession) ensureAuth(ctx context.Context, p string) error {
	c := s.c
	if c.authScheme == "" || s.authDone.Load() {
		return nil
	}
	s.authMu.Lock()
	defer s.authMu.Unlock()
	if s.authDone.Load() {
		return nil
	}
	err := c.do(ctx, p, func() error { return s.zk.AddAuth(c.authScheme, c.auth) })
	if err != nil {
		return c.convert(err, p)
	}
	s.authDone.Store(true)
	return nil
}

// margin returns the safety margin for a session timeout.
func (c *Conn) margin(timeout time.Duration) time.Duration {
	if c.opts.SafetyMargin > 0 {
		return min(c.opts.SafetyMargin, timeout/2)
	}
	return timeout / 5
}

// ZooKeeper request opcodes the observer recognises.
const (
	opCreate  = 1
	opDelete  = 2
	opExists  = 3
	opSync    = 9
	opCheck   = 13
	opMulti   = 14
	opCreate2 = 15
)

// sessionObserver watches the frames of one session's connections: the
// requests written (so that a request can be pipelined after another one's
// frame went out: ZooKeeper runs one session's requests in the order it
// receives them) and the answers read (each answer proves that the server
// heard from the session no earlier than the answered request was sent).
type sessionObserver struct {
	defTimeout time.Duration

	n atomic.Int32 // registered waiters; 0 skips matching

	mu      sync.Mutex
	waiters map[sentKey][]chan struct{}
	proof   time.Time     // send time of the latest answered request
	timeout time.Duration // negotiated session timeout
	passwd  []byte        // the session's password, from the connect response

	// resumeID and resumePw, when resumeID is not 0, are the identity of
	// an existing session that the first connect request adopts (see
	// Conn.ResumeLeaderParticipation). Set before the first dial.
	resumeID int64
	resumePw []byte

	// dials counts the session's connections. watches mirrors the keys
	// of the client library's table of watches (path and kind), kept from
	// the frames (see noteWatchRequest, noteAnswer, noteEvent), and
	// watchReqs the watch-setting requests awaiting their answers, by
	// xid: a reconnection re-sets the watches (see holdRequest).
	dials     atomic.Int32
	watches   map[watchKey]bool
	watchReqs map[int32]watchKey

	// Lock entry creates sent as create2 (see createWithStat): wantStat
	// counts the registered creates by path, created keeps the Stats
	// their answers carried, by created path; nStat counts registrations.
	nStat    atomic.Int32
	wantStat map[string]int
	created  map[string]*zk.Stat
}

type sentKey struct {
	op   int32
	path string
}

func newSessionObserver(def time.Duration) *sessionObserver {
	return &sessionObserver{defTimeout: def, timeout: def, waiters: map[sentKey][]chan struct{}{}, wantStat: map[string]int{}, created: map[string]*zk.Stat{},
		watches: map[watchKey]bool{}, watchReqs: map[int32]watchKey{}}
}

func (o *sessionObserver) wrap(nc net.Conn) net.Conn {
	reconnect := o.dials.Add(1) > 1
	o.mu.Lock()
	clear(o.watchReqs) // the library failed them with the connection
	rewatch := len(o.watches) > 0
	o.mu.Unlock()
	return &observedConn{Conn: nc, o: o, sent: map[int32]time.Time{}, stat2: map[int32]bool{},
		holding: reconnect && rewatch, rd: bufio.NewReaderSize(nc, readBuffer)}
}

// lastProof returns the send time of the latest answered request and the
// negotiated session timeout.
func (o *sessionObserver) lastProof() (time.Time, time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.proof, o.timeout
}

func (o *sessionObserver) proved(at time.Time) {
	o.mu.Lock()
	if at.After(o.proof) {
		o.proof = at
	}
	o.mu.Unlock()
}

// expect returns a channel closed once a request with opcode op on path has
// been written, and a function that unregisters it.
func (o *sessionObserver) expect(op int32, path string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	k := sentKey{op, path}
	o.mu.Lock()
	o.waiters[k] = append(o.waiters[k], ch)
	o.n.Add(1)
	o.mu.Unlock()
	return ch, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		ws := o.waiters[k]
		for i, w := range ws {
			if w == ch {
				ws = append(ws[:i], ws[i+1:]...)
				o.n.Add(-1)
				break
			}
		}
		if len(ws) == 0 {
			delete(o.waiters, k)
		} else {
			o.waiters[k] = ws
		}
	}
}

// observedConn is one connection of a session. The library writes one
// whole frame per Write call; it reads frames in pieces.
type observedConn struct {
	net.Conn
	o *sessionObserver

	wmu       sync.Mutex
	first     time.Time           // when the connect request was written
	sent      map[int32]time.Time // xid → send time, for requests awaiting an answer
	stat2     map[int32]bool      // xids of creates sent as create2
	n2        atomic.Int32        // len(stat2), read by the receive side
	pings     []time.Time         // send times of unanswered pings
	handshake bool                // the connect response was read

	// holding: requests are held back until the library's set-watches
	// request is written (see holdRequest); held are their frames, and
	// holdLimit writes them anyway after maxHold.
	holding   bool
	held      [][]byte
	holdLimit *time.Timer
	// closeXid is the xid of a close request sent while holding, whose
	// answer ends the connection instead (see Read).
	closeXid atomic.Int32
	ended    bool // read side: the connection ended at that answer

	// read side, used only by the library's receive goroutine: rd
	// buffers the connection (see Read)
	rd   *bufio.Reader
	hdr  [4]byte
	nhdr int
	body []byte // the first bytes of the current frame's body
	left int    // bytes of the current frame's body still to read
}

func (oc *observedConn) Write(b []byte) (int, error) {
	now := time.Now()
	oc.wmu.Lock()
	isFirst := oc.first.IsZero()
	oc.wmu.Unlock()
	if isFirst {
		b = oc.o.resumeFrame(b)
	} else if oc.o.nStat.Load() > 0 {
		b = oc.asCreate2(b)
	}
	if !isFirst {
		oc.o.noteWatchRequest(b)
	}
	if held, ok := oc.holdRequest(b); ok {
		return len(held), nil
	}
	n, err := oc.Conn.Write(b)
	oc.wmu.Lock()
	switch {
	case oc.first.IsZero():
		oc.first = now
	case len(b) >= 8:
		xid := int32(binary.BigEndian.Uint32(b[4:8]))
		switch {
		case xid == -2:
			oc.pings = append(oc.pings, now)
		case xid > 0:
			oc.sent[xid] = now
		}
	}
	oc.wmu.Unlock()
	if oc.o.n.Load() > 0 {
		oc.o.written(b)
	}
	return n, err
}

// opSetWatches is the opcode of the request by which the client library
// re-sets its watches on a new connection of a session, and opSetAuth the
// one by which it sends the session's credentials.
const (
	opSetWatches = 101
	opSetAuth    = 100
)

// holdRequest keeps a request frame b back while the connection holds
// requests, and reports whether it did; it writes the held frames behind
// the set-watches request when that comes.
//
// Why: go-zookeeper v1.0.4 reads its last seen zxid to build the
// set-watches request of a reconnection while its receive goroutine
// already records the zxids of answers, with no synchronisation between
// the two (upstream go-zookeeper/zk PR #35, unmerged): requests queued
// while the session was disconnected are sent first and their answers
// race with that read, which the race detector reports in every program
// that uses zk2topo. The value either side sees is one whole int64 and
// either is right for the server, so the race is harmless but for the
// detector; holding those requests until the set-watches request is
// written (after the read) and matching every answer under wmu (frame),
// orders the read before every write. A connection holds only when the
// library has watches to re-set (as the session observer's mirror of its
// table says: otherwise it reads nothing, and sends no set-watches
// request), and only the requests of a reconnection (a first connection
// has no watch yet). The requests keep their order; pings and
// authentication requests (which the library re-sends, each awaiting its
// answer, before any other request of a new connection) are not held, and
// a request closing the session releases the held ones.
func (oc *observedConn) holdRequest(b []byte) ([]byte, bool) {
	oc.wmu.Lock()
	defer oc.wmu.Unlock()
	if !oc.holding || len(b) < 12 || int32(binary.BigEndian.Uint32(b[4:8])) <= 0 {
		return nil, false
	}
	op := int32(binary.BigEndian.Uint32(b[8:12]))
	if op == opSetAuth && len(oc.held) == 0 {
		// The library re-sends the session's credentials first, with
		// xids of their own, and awaits each answer before it sends
		// anything else: held, they would never be answered. Their
		// answers carry no zxid (the server answers 0), so they do not
		// race with the set-watches request's read. (A later AddAuth
		// behind held requests is held, keeping its place.)
		return nil, false
	}
	switch op {
	case opSetWatches:
		oc.release(b)
		return b, true
	case opCloseSession:
		// The session's end goes at once, the held requests before it:
		// once closing, the library sends no set-watches request, and
		// the close must reach the server now (the server then deletes
		// the session's entries), not with the session's expiry. Its
		// answer is not passed on (see Read): recording its zxid would
		// race with the set-watches read.
		oc.held = append(oc.held, append([]byte(nil), b...))
		oc.closeXid.Store(int32(binary.BigEndian.Uint32(b[4:8])))
		oc.release(nil)
		return b, true
	default:
		if len(oc.held) == 0 {
			oc.holdLimit = time.AfterFunc(maxHold, func() {
				oc.wmu.Lock()
				defer oc.wmu.Unlock()
				if oc.holding {
					oc.release(nil)
				}
			})
		}
		oc.held = append(oc.held, append([]byte(nil), b...))
		return b, true
	}
}

// maxHold bounds how long a connection holds requests back for a
// set-watches request that does not come (were the mirror of the
// library's watches ever wrong): then they go without it.
const maxHold = 2 * time.Second

// watchKey is a key of the client library's table of watches: a path and
// a kind of watch.
type watchKey struct {
	path string
	kind int8
}

// The kinds of watches, as the client library files them.
const (
	watchData int8 = iota
	watchExist
	watchChild
)

// Opcodes of the requests that may set a watch, and ZooKeeper's event
// types, as the client library numbers them.
const (
	opGetData      = 4
	opGetChildren  = 8
	opGetChildren2 = 12

	eventCreated         = 1
	eventDeleted         = 2
	eventDataChanged     = 3
	eventChildrenChanged = 4

	errNoNodeCode = -101

	opCloseSession = -11

	watchEventXid = -1
	// eventKeep is how much of a watch event's body the connection keeps:
	// the reply header, the type, the state and a path of up to 4 KiB.
	eventKeep = 16 + 12 + 4096
)

// noteWatchRequest records a request frame b (length, xid, opcode, path,
// then the watch flag) that asks for a watch.
func (o *sessionObserver) noteWatchRequest(b []byte) {
	if len(b) < 16 {
		return
	}
	xid, op := int32(binary.BigEndian.Uint32(b[4:8])), int32(binary.BigEndian.Uint32(b[8:12]))
	if xid <= 0 || (op != opExists && op != opGetData && op != opGetChildren && op != opGetChildren2) {
		return
	}
	n := int(int32(binary.BigEndian.Uint32(b[12:16])))
	if n < 0 || 16+n >= len(b) || b[16+n] == 0 {
		return // no watch asked for
	}
	// The kind until the answer comes: an exists is filed as watchExist
	// here, and as a data watch if its file exists (noteAnswer).
	k := watchKey{path: string(b[16 : 16+n]), kind: watchData}
	switch op {
	case opExists:
		k.kind = watchExist
	case opGetChildren, opGetChildren2:
		k.kind = watchChild
	}
	o.mu.Lock()
	o.watchReqs[xid] = k
	o.mu.Unlock()
}

// noteAnswer records the answer (xid, error code) to a request: the
// library files a watch as its answer comes, as go-zookeeper's ExistsW,
// GetW and ChildrenW do (an exists answered NoNode files an exists watch).
func (o *sessionObserver) noteAnswer(xid, code int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k, ok := o.watchReqs[xid]
	if !ok {
		return
	}
	delete(o.watchReqs, xid)
	switch {
	case code == 0:
		if k.kind == watchExist {
			k.kind = watchData // an exists of a file that exists
		}
		o.watches[k] = true
	case code == errNoNodeCode && k.kind == watchExist:
		// An exists answered NoNode: the library files an exists watch (a
		// get answered NoNode files none, and the server set none).
		o.watches[k] = true
	}
}

// noteEvent records a watch event (its body after the reply header: type,
// state, path): the library drops the watches it fires, as
// go-zookeeper's notifyWatches does.
func (o *sessionObserver) noteEvent(ev []byte) {
	if len(ev) < 12 {
		return
	}
	typ := int32(binary.BigEndian.Uint32(ev[0:4]))
	n := int(int32(binary.BigEndian.Uint32(ev[8:12])))
	if n < 0 || 12+n > len(ev) {
		return
	}
	path := string(ev[12 : 12+n])
	var kinds []int8
	switch typ {
	case eventCreated:
		kinds = []int8{watchExist}
	case eventDataChanged:
		kinds = []int8{watchExist, watchData}
	case eventChildrenChanged:
		kinds = []int8{watchChild}
	case eventDeleted:
		kinds = []int8{watchExist, watchData, watchChild}
	}
	o.mu.Lock()
	for _, k := range kinds {
		delete(o.watches, watchKey{path, k})
	}
	o.mu.Unlock()
}

// forgetWatches records a session's end: the library clears its table.
func (o *sessionObserver) forgetWatches() {
	o.mu.Lock()
	clear(o.watches)
	clear(o.watchReqs)
	o.mu.Unlock()
}

// release ends the holding: it writes first (the set-watches request, or
// nil) and then the held requests, in order. The caller holds wmu, so an
// answer to any of them is matched (frame) after this.
func (oc *observedConn) release(first []byte) {
	oc.holding = false
	if oc.holdLimit != nil {
		oc.holdLimit.Stop()
	}
	frames := oc.held
	if first != nil {
		frames = append([][]byte{first}, frames...)
	}
	oc.held = nil
	now := time.Now()
	for _, f := range frames {
		if _, err := oc.Conn.Write(f); err != nil {
			break // the library sees the connection fail on its next read
		}
		oc.sent[int32(binary.BigEndian.Uint32(f[4:8]))] = now
	}
	if oc.o.n.Load() > 0 {
		for _, f := range frames {
			oc.o.written(f)
		}
	}
}

func (oc *observedConn) Read(b []byte) (int, error) {
	if oc.ended {
		return 0, io.ErrUnexpectedEOF
	}
	// The library reads a frame's length and then its body, each with
	// its own reads (a read at the start of a body begins with the xid),
	// through rd: one read of the connection takes what has come, often
	// several frames, rather than two reads or more per frame.
	x := oc.closeXid.Load()
	bodyStart := oc.handshake && oc.left > 0 && len(oc.body) == 0
	var n int
	var err error
	if x != 0 && bodyStart && len(b) >= 4 {
		n, err = io.ReadAtLeast(oc.rd, b, 4) // the xid whole
	} else {
		n, err = oc.rd.Read(b)
	}
	if x != 0 && n >= 4 && bodyStart && int32(binary.BigEndian.Uint32(b[:4])) == x {
		oc.ended = true // the session is closed; the server ends the connection
		return 0, io.ErrUnexpectedEOF
	}
	oc.scan(b[:n])
	return n, err
}

// readBuffer is the size of a connection's read buffer: a few answers
// and events of lock and election queues (a children read of a queue of
// 300 entries is about 4 KiB); a larger frame is read through it.
const readBuffer = 16 << 10

// scan follows the frames read: 4 bytes of length, then the body, whose
// first 16 bytes (the connect response's version, timeout and session id;
// or a reply header's xid) are kept.
func (oc *observedConn) scan(b []byte) {
	for len(b) > 0 {
		if oc.left == 0 {
			k := copy(oc.hdr[oc.nhdr:], b)
			oc.nhdr += k
			b = b[k:]
			if oc.nhdr < 4 {
				return
			}
			oc.nhdr = 0
			oc.left = int(binary.BigEndian.Uint32(oc.hdr[:]))
			oc.body = oc.body[:0]
			if oc.left == 0 {
				oc.frame()
			}
			continue
		}
		k := min(len(b), oc.left)
		keep := 16
		if !oc.handshake {
			keep = connectRespKeep
		} else if oc.n2.Load() > 0 {
			keep = create2Keep
		}
		if oc.handshake && keep < eventKeep {
			// A watch event (xid -1) is kept whole: its path says which
			// watches the library drops (noteEvent).
			var x [4]byte
			m := copy(x[:], oc.body)
			if m < 4 {
				m += copy(x[m:], b[:k])
			}
			if m == 4 && int32(binary.BigEndian.Uint32(x[:])) == watchEventXid {
				keep = eventKeep
			}
		}
		if need := keep - len(oc.body); need > 0 {
			oc.body = append(oc.body, b[:min(k, need)]...)
		}
		b = b[k:]
		oc.left -= k
		if oc.left == 0 {
			oc.frame()
		}
	}
}

// frame handles the start of one complete frame read.
func (oc *observedConn) frame() {
	oc.wmu.Lock()
	var at time.Time
	if !oc.handshake {
		oc.handshake = true
		if len(oc.body) >= 16 && binary.BigEndian.Uint64(oc.body[8:16]) == 0 {
			oc.o.forgetWatches() // expired: the library drops its watches
		}
		if len(oc.body) >= 16 && binary.BigEndian.Uint64(oc.body[8:16]) != 0 {
			at = oc.first
			oc.o.mu.Lock()
			if ms := int32(binary.BigEndian.Uint32(oc.body[4:8])); ms > 0 {
				oc.o.timeout = time.Duration(ms) * time.Millisecond
			}
			if len(oc.body) >= connectRespKeep && binary.BigEndian.Uint32(oc.body[16:20]) == passwdLen {
				oc.o.passwd = append([]byte(nil), oc.body[20:20+passwdLen]...)
			}
			oc.o.mu.Unlock()
		}
	} else if len(oc.body) >= 4 {
		xid := int32(binary.BigEndian.Uint32(oc.body[:4]))
		switch {
		case xid == -2 && len(oc.pings) > 0:
			at = oc.pings[0]
			oc.pings = oc.pings[1:]
		case xid == watchEventXid && len(oc.body) >= 16:
			oc.o.noteEvent(oc.body[16:])
		case xid > 0:
			if t, ok := oc.sent[xid]; ok {
				at = t
				delete(oc.sent, xid)
			}
			if len(oc.body) >= 16 {
				oc.o.noteAnswer(xid, int32(binary.BigEndian.Uint32(oc.body[12:16])))
			}
			if oc.stat2[xid] {
				delete(oc.stat2, xid)
				oc.n2.Add(-1)
				oc.o.noteCreated(oc.body)
			}
		}
	}
	oc.wmu.Unlock()
	if !at.IsZero() {
		oc.o.proved(at)
	}
}

// The connect request and response, as go-zookeeper v1.0.4 writes and
// ZooKeeper answers them: request = length, protocolVersion (4),
// lastZxidSeen (8), timeOut (4), sessionId (8), passwd (4-byte length,
// then 16 bytes); response = protocolVersion (4), timeOut (4),
// sessionId (8), passwd (length, 16 bytes), readOnly (1).
const (
	passwdLen       = 16
	connectReqSID   = 4 + 4 + 8 + 4 // offset of sessionId in the framed request
	connectReqLen   = connectReqSID + 8 + 4 + passwdLen
	connectRespKeep = 4 + 4 + 8 + 4 + passwdLen
)

// resumeFrame returns the connect request b, rewritten to ask for the
// session being resumed when there is one and the library asks for a new
// session (sessionId 0, as before its first session). The library then
// adopts whatever the server answers: the resumed session, or, when it
// has ended, sessionId 0, which the library reports as expired.
func (o *sessionObserver) resumeFrame(b []byte) []byte {
	if o.resumeID == 0 || len(b) < connectReqLen ||
		binary.BigEndian.Uint64(b[connectReqSID:]) != 0 ||
		binary.BigEndian.Uint32(b[connectReqSID+8:]) != passwdLen || len(o.resumePw) != passwdLen {
		return b
	}
	nb := append([]byte(nil), b...)
	binary.BigEndian.PutUint64(nb[connectReqSID:], uint64(o.resumeID))
	copy(nb[connectReqSID+12:], o.resumePw)
	return nb
}

// password returns the session's password (nil before the server first
// answered).
func (o *sessionObserver) password() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]byte(nil), o.passwd...)
}

// written matches one written frame (length, xid, opcode, then for path
// requests the path as a length-prefixed string) against the waiters.
func (o *sessionObserver) written(b []byte) {
	if len(b) < 16 {
		return
	}
	if xid := int32(binary.BigEndian.Uint32(b[4:8])); xid <= 0 { // connect, ping, auth
		return
	}
	op := int32(binary.BigEndian.Uint32(b[8:12]))
	if op == opCreate2 {
		op = opCreate // a lock entry's create (see asCreate2)
	}
	at := 12 // offset of the path's length
	if op == opMulti {
		// A multi is matched by its first op when that is a check: the
		// op's header (type, done, err: 4+1+4 bytes), then its path.
		if len(b) < 25 || int32(binary.BigEndian.Uint32(b[12:16])) != opCheck {
			return
		}
		at = 21
	}
	l := int32(binary.BigEndian.Uint32(b[at : at+4]))
	if l < 0 || at+4+int(l) > len(b) {
		return
	}
	o.mu.Lock()
	k := sentKey{op, string(b[at+4 : at+4+int(l)])}
	ws := o.waiters[k]
	if len(ws) > 0 {
		delete(o.waiters, k)
		o.n.Add(-int32(len(ws)))
	}
	o.mu.Unlock()
	for _, w := range ws {
		close(w)
	}
}

// errSessionOver is the error of a request that was not sent because the
// session it was issued on is over.
var errSessionOver = backendkit.Wrap(topo.Unavailable, "", errors.New("zk2topo: the ZooKeeper session ended"))
