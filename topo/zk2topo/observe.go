package zk2topo

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ZooKeeper request opcodes the observer recognises.
const (
	opCreate = 1
	opDelete = 2
)

// sendObserver watches the request frames the client library writes to the
// server, so that a Conn can pipeline requests: ZooKeeper executes one
// session's requests in the order it receives them, so a request queued
// after another's frame was written is executed after it, without waiting
// for the first answer. The library has no asynchronous API, hence this
// wrapper around its connection.
type sendObserver struct {
	block   atomic.Bool // tests: refuse new connections
	current atomic.Pointer[observedConn]
	n       atomic.Int32 // registered waiters; 0 skips parsing
	mu      sync.Mutex
	waiters map[sentKey][]chan struct{}
}

type sentKey struct {
	op   int32
	path string
}

func newSendObserver() *sendObserver {
	return &sendObserver{waiters: map[sentKey][]chan struct{}{}}
}

// dial is the client library's Dialer.
func (o *sendObserver) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	if o.block.Load() {
		return nil, errors.New("zk2topo: dialling blocked by a test")
	}
	nc, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	oc := &observedConn{Conn: nc, o: o}
	o.current.Store(oc)
	return oc, nil
}

// drop closes the current connection to the server (tests: a network
// failure).
func (o *sendObserver) drop() {
	if oc := o.current.Load(); oc != nil {
		_ = oc.Close()
	}
}

// expect returns a channel closed once a request with opcode op on path has
// been written, and a function that unregisters it.
func (o *sendObserver) expect(op int32, path string) (<-chan struct{}, func()) {
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

// written inspects one frame the library wrote: length, xid, opcode, then
// (for path requests) the path as a length-prefixed string.
func (o *sendObserver) written(b []byte) {
	if len(b) < 16 {
		return
	}
	if xid := int32(binary.BigEndian.Uint32(b[4:8])); xid <= 0 { // connect, ping, auth
		return
	}
	op := int32(binary.BigEndian.Uint32(b[8:12]))
	l := int32(binary.BigEndian.Uint32(b[12:16]))
	if l < 0 || 16+int(l) > len(b) {
		return
	}
	o.mu.Lock()
	k := sentKey{op, string(b[16 : 16+l])}
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

type observedConn struct {
	net.Conn
	o *sendObserver
}

func (oc *observedConn) Write(b []byte) (int, error) {
	n, err := oc.Conn.Write(b)
	if oc.o.n.Load() > 0 {
		oc.o.written(b)
	}
	return n, err
}
