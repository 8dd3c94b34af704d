package zk2topo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// zkSession is one ZooKeeper session and the *zk.Conn that carries it
// (see the package doc, Sessions).
type zkSession struct {
	c   *Conn
	zk  *zk.Conn
	obs *sessionObserver

	lost     chan struct{}   // closed when the session is over, after claims.Lost
	claims   *claims.Session // the claims engine's view of the session
	ready    chan struct{}   // closed once zk is set (lose may run before)
	dead     atomic.Bool     // set (first) when the session is over: the dialer refuses
	loseOnce sync.Once

	// dialHold, set by tests only, holds every dial until it is closed.
	dialHold atomic.Pointer[chan struct{}]

	authMu   sync.Mutex
	authDone atomic.Bool
	synced   atomic.Bool // a sync ran on this session before its first read

	connected atomic.Bool // the library has the session on a live connection

	mu      sync.Mutex
	entries map[string]*entry // live lock and election entries, by znode (entry.go)
	creates map[string]uint64 // parent znode → entry creates started under it
	pending map[string]int    // parent znode → entry creates in flight under it
}

// newSessionAs starts a session (dialling in the background); a non-zero
// id asks for that existing session, password passwd (see resumeFrame).
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
	s.obs = &sessionObserver{timeout: c.opts.SessionTimeout, answered: make(chan struct{}), waiters: map[sentKey][]chan struct{}{},
		wantStat: map[string]int{}, created: map[string]*zk.Stat{},
		resumeID: id, resumePw: passwd, libraryPingsOnly: c.opts.libraryPingsOnly}
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
	c.goBG(s.watchdog) // not started once Close waits: the session is closed then
	return s, nil
}

// redialProvider is the library's DNSHostProvider, pausing less (why:
// docs/layout-zookeeper.md, Sessions): after a lost connection it tries
// every server twice at once (the server ending a session also drops the
// connection just re-opened to it), then pauses a second before each later
// round.
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

// dial is the client library's Dialer; it refuses once the session is over.
func (s *zkSession) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	if h := s.dialHold.Load(); h != nil {
		<-*h
	}
	if s.dead.Load() {
		return nil, errors.New("zk2topo: session over")
	}
	nc, err := s.c.opts.Dialer(network, address, timeout) // set by NewConnContext
	if err != nil {
		s.c.lastDialErr.Store(&err) // for NewConn's error: the library only logs it
		return nil, err
	}
	if s.dead.Load() {
		_ = nc.Close()
		return nil, errors.New("zk2topo: session over")
	}
	return s.obs.wrap(nc), nil
}

// onEvent runs in the library's goroutine (it must not block).
func (s *zkSession) onEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	switch ev.State {
	case zk.StateExpired:
		s.lose() // before the library can dial again
	case zk.StateHasSession:
		s.connected.Store(true)
	case zk.StateDisconnected, zk.StateConnecting, zk.StateAuthFailed:
		s.connected.Store(false)
		s.stepDown()
	}
}

// lose ends the session for good before it returns: the dialer refuses,
// every claim on it ends (claims.Session.Lost), then lost is closed; the
// *zk.Conn is closed in the background.
func (s *zkSession) lose() {
	s.dead.Store(true)
	s.loseOnce.Do(func() {
		s.connected.Store(false)
		s.mu.Lock()
		clear(s.entries) // the server deletes them with the session
		s.mu.Unlock()
		s.claims.Lost() // the claims first: see claims
		close(s.lost)
		closeZK := func() {
			<-s.ready
			if s.zk != nil {
				s.zk.Close()
			}
		}
		if !s.c.goBG(closeZK) {
			go closeZK() // Close waits no more; the client is closed all the same
		}
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
// server: the latest proof (see heard) + session timeout - safety margin;
// zero before the server first answered.
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

// watchdog gives the session up once it is past safeUntil. Its first
// deadline comes with the server's first answer, which tells the timeout
// granted (TestHolderCutEarlyInItsSessionGivesUpFirst).
func (s *zkSession) watchdog() {
	answered := s.obs.answered // nothing could be held before
	var deadline <-chan time.Time
	for {
		select {
		case <-s.lost:
			return
		case <-s.c.closing:
			return
		case <-answered:
			answered = nil
		case <-deadline:
		}
		if d := time.Until(s.safeUntil()); d > 0 {
			deadline = time.After(d)
			continue
		}
		s.c.log.Warn("zk2topo: no answer from ZooKeeper within the session timeout minus the safety margin: giving the session up",
			"session", s.zk.SessionID())
		s.lose()
		return
	}
}

// ensureAuth adds the configured credentials to the session once (the
// library re-sends them on reconnecting).
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

// ZooKeeper's opcodes and xids. A request frame is length, xid, opcode and
// body (a path request's starts with the length-prefixed path); an answer,
// length, reply header (xid, zxid, error code) and body.
const (
	opCreate          = 1
	opDelete          = 2
	opExists          = 3
	opSetData         = 5
	opGetChildren     = 8
	opSync            = 9
	opPing            = 11
	opGetChildren2    = 12
	opCheck           = 13
	opMulti           = 14
	opCreate2         = 15
	opCreateContainer = 19
	opCreateTTL       = 21
	opSetWatches      = 101 // re-sets the library's watches on a new connection

	pingXid = -2
	// frameKeep is how much of each frame's body the connection keeps:
	// enough for a create2 answer's header, path (up to 4 KiB) and Stat.
	frameKeep = 16 + 12 + 4096
)

// reqHeader returns a request frame's xid and opcode (zeros for a frame
// too short to have them).
func reqHeader(b []byte) (xid, op int32) {
	if len(b) < 12 {
		return 0, 0
	}
	return int32(binary.BigEndian.Uint32(b[4:8])), int32(binary.BigEndian.Uint32(b[8:12]))
}

// jString returns the length-prefixed string at b[at:] and the offset
// just after it; ok is false when b does not hold it whole.
func jString(b []byte, at int) (str []byte, end int, ok bool) {
	if len(b) < at+4 {
		return nil, 0, false
	}
	n := int(int32(binary.BigEndian.Uint32(b[at:])))
	if n < 0 || at+4+n > len(b) {
		return nil, 0, false
	}
	return b[at+4 : at+4+n], at + 4 + n, true
}

// sessionObserver watches the frames of one session's connections: the
// requests written (a request can be pipelined after another's frame: a
// session's requests run in order) and the answers read (see heard).
type sessionObserver struct {
	n atomic.Int32 // registered waiters; 0 skips matching

	mu       sync.Mutex
	waiters  map[sentKey][]chan struct{}
	proof    time.Time     // send time of the latest request proved (see heard)
	timeout  time.Duration // negotiated session timeout
	answered chan struct{} // closed when proof is first set
	passwd   []byte        // the session's password, from the connect response

	libraryPingsOnly bool // Options.libraryPingsOnly: no pinger

	resumeID int64  // with resumePw, the session to resume (0: none)
	resumePw []byte // (see resumeFrame)

	dials atomic.Int32 // the session's connections (tests wait on it)

	lastZxid  atomic.Int64                   // of the latest answer read (see hideZxid)
	writeHook atomic.Pointer[func(b []byte)] // tests only: sees every frame written

	// Creates sent as create2 (createWithStat): their count, the
	// registered ones by path, their answers' Stats by created path.
	nStat    atomic.Int32
	wantStat map[string]int
	created  map[string]*zk.Stat
}

type sentKey struct {
	op   int32
	path string
}

func (o *sessionObserver) wrap(nc net.Conn) net.Conn {
	o.dials.Add(1)
	return &observedConn{Conn: nc, o: o, sent: map[int32]time.Time{}, stat2: map[int32]bool{},
		rd: bufio.NewReaderSize(nc, readBuffer), closed: make(chan struct{}), watchZxid: o.lastZxid.Load()}
}

// lastProof returns the send time of the latest request proved and the
// negotiated session timeout.
func (o *sessionObserver) lastProof() (time.Time, time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.proof, o.timeout
}

func (o *sessionObserver) proved(at time.Time) {
	o.mu.Lock()
	if o.proof.IsZero() {
		close(o.answered)
	}
	if at.After(o.proof) {
		o.proof = at
	}
	o.mu.Unlock()
}

// expect returns a channel closed just before a request with opcode op on
// path is written, and a function that unregisters it. The library writes
// from one goroutine, so a request queued once it is closed goes out after
// that frame (closed after the write, it could come after the answer:
// TestPipelinedReadAfterLateWrite).
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
		if i := slices.Index(o.waiters[k], ch); i >= 0 {
			o.waiters[k] = slices.Delete(o.waiters[k], i, i+1)
			o.n.Add(-1)
		}
		if len(o.waiters[k]) == 0 {
			delete(o.waiters, k)
		}
	}
}

// observedConn is one connection of a session. The library writes one
// whole frame per Write call; it reads frames in pieces.
type observedConn struct {
	net.Conn
	o *sessionObserver

	wrmu      sync.Mutex    // orders ping writes (see pinger) with their records
	closed    chan struct{} // closed by Close: pinger returns
	closeOnce sync.Once

	wmu       sync.Mutex
	first     time.Time           // when the connect request was written
	sent      map[int32]time.Time // xid → send time, for requests awaiting an answer
	stat2     map[int32]bool      // xids of creates sent as create2
	pings     []time.Time         // send times of unanswered pings
	sends     []time.Time         // send times, at most one per sendGrain (see heard)
	handshake bool                // the connect response was read
	watchZxid int64               // lastZxid at dial, for set-watches (see withZxid)

	// read side, used only by the library's receive goroutine
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
	asked := len(b)
	oc.wrmu.Lock()
	defer oc.wrmu.Unlock()
	if isFirst {
		b = oc.o.resumeFrame(b)
		b = withZxid(b, connectReqZxid, oc.o.lastZxid.Load())
	} else {
		if bytes.Equal(b, pingFrame) {
			b = syncPing
		}
		if _, op := reqHeader(b); op == opSetWatches {
			b = withZxid(b, setWatchesZxid, oc.watchZxid)
		}
		if oc.o.nStat.Load() > 0 {
			b = oc.asCreate2(b)
		}
	}
	if h := oc.o.writeHook.Load(); h != nil {
		(*h)(b)
	}
	if oc.o.n.Load() > 0 {
		oc.o.written(b) // before the write: see expect
	}
	n, err := oc.Conn.Write(b)
	oc.record(b, now)
	return min(n, asked), err // a rewritten ping is longer than the library's
}

// sendGrain is how close two send times may be for only the earlier to
// be kept: a proof is at most that much older than it could be.
const sendGrain = 10 * time.Millisecond

// record records that request frame b was written at t: the connect
// request's time as first; every send time (see heard); a ping's or a
// throughLeader request's for its answer's proof.
func (oc *observedConn) record(b []byte, t time.Time) {
	oc.wmu.Lock()
	defer oc.wmu.Unlock()
	if n := len(oc.sends); n == 0 || t.Sub(oc.sends[n-1]) >= sendGrain {
		oc.sends = append(oc.sends, t)
	}
	switch xid, op := reqHeader(b); {
	case oc.first.IsZero():
		oc.first = t
	case xid == pingXid:
		if op != opSync {
			t = time.Time{} // a ping not sent as syncPing: its answer proves nothing
		}
		oc.pings = append(oc.pings, t)
	case xid >= 0 && throughLeader(op):
		oc.sent[xid] = t
	}
}

// ownPings is how many syncs of "/" per session timeout a connection
// sends on its own, besides the library's pings (3).
const ownPings = 12

// pinger writes syncPing every interval until the connection is closed or
// a write fails: an idle session's proof lags an interval behind
// (docs/layout-zookeeper.md, Sessions).
func (oc *observedConn) pinger(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-oc.closed:
			return
		case <-t.C:
		}
		oc.wrmu.Lock()
		now := time.Now()
		_, err := oc.Conn.Write(syncPing)
		if err == nil {
			oc.record(syncPing, now)
		}
		oc.wrmu.Unlock()
		if err != nil {
			return
		}
	}
}

// Close closes the connection and stops its pinger.
func (oc *observedConn) Close() error {
	oc.closeOnce.Do(func() { close(oc.closed) })
	return oc.Conn.Close()
}

// heard returns what an answer through the leader to a request sent at t
// proves the leader heard of (caller holds wmu): the send time of the
// latest request written at least a quarter of the session timeout before
// t (zero when none), as a follower reports its sessions' activity every
// half tick, at most a quarter of the timeout
// (TestIdleHolderOnPartedFollowerGivesUpFirst).
func (oc *observedConn) heard(t time.Time) time.Time {
	oc.o.mu.Lock()
	timeout := oc.o.timeout
	oc.o.mu.Unlock()
	limit := t.Add(-timeout / 4)
	i := 0
	for i+1 < len(oc.sends) && !oc.sends[i+1].After(limit) {
		i++
	}
	if len(oc.sends) == 0 || oc.sends[i].After(limit) {
		return time.Time{}
	}
	oc.sends = oc.sends[i:] // later answers prove no earlier request
	return oc.sends[0]
}

// throughLeader reports whether a request of opcode op is answered only
// after it reached the leader, which decides expiry (writes, sync, multi);
// a follower answers reads and pings itself, also after it lost its leader
// (TestHolderOnPartedFollowerGivesUpFirst).
func throughLeader(op int32) bool {
	switch op {
	case opCreate, opDelete, opSetData, opSync, opCheck, opMulti, opCreate2, opCreateContainer, opCreateTTL:
		return true
	}
	return false
}

// pingFrame is the library's ping request; syncPing, written in its
// place, is a sync of "/" with the ping's xid (-2), answered through the
// leader, and ignored by the library as every answer with xid -2 is.
var (
	pingFrame = []byte{0, 0, 0, 8, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, opPing}
	syncPing  = []byte{0, 0, 0, 13, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, opSync, 0, 0, 0, 1, '/'}
)

func (oc *observedConn) Read(b []byte) (int, error) {
	// Buffered: the library reads length and body separately.
	n, err := oc.rd.Read(b)
	oc.scan(b[:n])
	return n, err
}

// Offsets of the zxids in an answer's body, a connect request and a
// set-watches request.
const (
	replyZxid      = 4
	connectReqZxid = 8
	setWatchesZxid = 12
)

// hideZxid zeroes the zxid of an answer to a request as the library reads
// it (b: a piece of the answer's body from offset at; the library records
// no zero zxid); frame records it as lastZxid instead. go-zookeeper v1.0.4
// writes answers' zxids in its receive goroutine and reads the last one,
// unsynchronised, in its connection goroutine for a set-watches request
// (upstream PR #35, unmerged; TestRequestsQueuedDuringDisconnection,
// TestSessionGivenUpWhileReconnecting under -race). It reads it only for
// that and the connect request, and withZxid writes the session's into
// both; callers never see a zxid. Xids wrap modulo 2^31: xid 0 is an
// answer too (TestAnswerToRequestZeroHidden).
func (oc *observedConn) hideZxid(b []byte, at int) {
	if !oc.handshake || len(oc.body) < 4 || int32(binary.BigEndian.Uint32(oc.body[:4])) < 0 {
		return // the connect response, or not an answer to a request
	}
	for i := max(at, replyZxid); i < min(at+len(b), replyZxid+8); i++ {
		b[i-at] = 0
	}
}

// withZxid returns the request frame b with zxid at offset at (a copy
// when it differs; the library's is always 0, see hideZxid). A connect
// request carries the session's last zxid (a server behind it refuses the
// client: reads stay monotonic); a set-watches request the one at its
// connection's dial, so that changes made while disconnected are reported
// (TestChangeReportedAfterQueuedAnswers).
func withZxid(b []byte, at int, zxid int64) []byte {
	if zxid <= 0 || len(b) < at+8 || int64(binary.BigEndian.Uint64(b[at:])) == zxid {
		return b
	}
	nb := append([]byte(nil), b...)
	binary.BigEndian.PutUint64(nb[at:], uint64(zxid))
	return nb
}

// readBuffer is a connection's read buffer size (a children read of a
// 300-entry queue is about 4 KiB).
const readBuffer = 16 << 10

// scan follows the frames read: 4 bytes of length, then the body, whose
// first frameKeep bytes are kept.
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
		if need := frameKeep - len(oc.body); need > 0 {
			at := len(oc.body)
			oc.body = append(oc.body, b[:min(k, need)]...)
			if at < replyZxid+8 {
				oc.hideZxid(b[:k], at)
			}
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
			oc.o.lastZxid.Store(0) // expired: as the library clears its own
		} else if len(oc.body) >= 16 {
			at = oc.first
			oc.o.mu.Lock()
			if ms := int32(binary.BigEndian.Uint32(oc.body[4:8])); ms > 0 {
				oc.o.timeout = time.Duration(ms) * time.Millisecond
			}
			if oc.o.timeout > 0 && !oc.o.libraryPingsOnly {
				go oc.pinger(oc.o.timeout / ownPings)
			}
			if len(oc.body) >= connectRespKeep && binary.BigEndian.Uint32(oc.body[16:20]) == passwdLen {
				oc.o.passwd = append([]byte(nil), oc.body[20:20+passwdLen]...)
			}
			oc.o.mu.Unlock()
		}
	} else if len(oc.body) >= 4 {
		xid := int32(binary.BigEndian.Uint32(oc.body[:4]))
		// Only an answer without error proves: a follower answers some
		// errors itself (TestDeniedWritesOnPartedFollowerProveNothing).
		ok := len(oc.body) >= 16 && binary.BigEndian.Uint32(oc.body[12:16]) == 0
		switch {
		case xid == pingXid && len(oc.pings) > 0:
			if ok {
				at = oc.heard(oc.pings[0])
			}
			oc.pings = oc.pings[1:]
		case xid >= 0: // an answer (xid 0: see hideZxid)
			if len(oc.body) >= replyZxid+8 {
				if z := int64(binary.BigEndian.Uint64(oc.body[replyZxid:])); z > 0 {
					oc.o.lastZxid.Store(z) // as the library would (see hideZxid)
				}
			}
			if t, sent := oc.sent[xid]; sent {
				if ok {
					at = oc.heard(t)
				}
				delete(oc.sent, xid)
			}
			if oc.stat2[xid] {
				delete(oc.stat2, xid)
				oc.o.noteCreated(oc.body)
			}
		}
	}
	oc.wmu.Unlock()
	if !at.IsZero() {
		oc.o.proved(at)
	}
}

// The connect request: length, protocolVersion (4), lastZxidSeen (8),
// timeOut (4), sessionId (8), passwd (4-byte length, 16 bytes); the
// response: protocolVersion, timeOut, sessionId, passwd, readOnly (1).
const (
	passwdLen       = 16
	connectReqSID   = 4 + 4 + 8 + 4 // offset of sessionId in the framed request
	connectReqLen   = connectReqSID + 8 + 4 + passwdLen
	connectRespKeep = 4 + 4 + 8 + 4 + passwdLen
)

// resumeFrame returns the connect request b rewritten to ask for the
// session being resumed, when there is one and b asks for a new session.
// The library adopts the answer: that session, or expiry.
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

// written matches one written request frame against the waiters.
func (o *sessionObserver) written(b []byte) {
	xid, op := reqHeader(b)
	if xid <= 0 { // connect, ping, auth
		return
	}
	at := 12 // the path
	switch op {
	case opCreate2:
		op = opCreate // a lock entry's create (see asCreate2)
	case opMulti:
		// Matched by the path of its first op (after its 9-byte header):
		// a check, a delete, a set-data or a create, each starting with
		// its path.
		if len(b) < 25 {
			return
		}
		switch int32(binary.BigEndian.Uint32(b[12:16])) {
		case opCheck, opDelete, opSetData, opCreate:
		default:
			return
		}
		at = 21
	}
	path, _, ok := jString(b, at)
	if !ok {
		return
	}
	o.mu.Lock()
	k := sentKey{op, string(path)}
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
