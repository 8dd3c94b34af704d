package zk2topo

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// rtCounter counts the requests a ZooKeeper client sends: the client
// writes each request as a length-prefixed packet whose header starts with
// its xid; the counter parses the stream of every connection it dialed and
// counts the packets, except the session's connect request (the first
// packet of a connection) and pings (xid -2). The benchmarks report them
// per operation ("rt/op" for zk2, "raw-rt/op" for the raw client). A
// pipelined sync before a read counts as a request of its own, though the
// read does not wait for its answer before it is sent. It also counts the
// watch events the server sends (packets of xid -1 read back, after the
// connect response).
type rtCounter struct{ n, events atomic.Int64 }

func (r *rtCounter) load() int64 { return r.n.Load() }

// loadEvents returns the watch events read so far.
func (r *rtCounter) loadEvents() int64 { return r.events.Load() }

// dial is a Dialer (Options.Dialer, zk.WithDialer) whose connections count.
func (r *rtCounter) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, r: r, out: packetScanner{first: true}, in: packetScanner{first: true}}, nil
}

// countingConn parses the packets written and read on a connection.
type countingConn struct {
	net.Conn
	r *rtCounter

	wmu, rmu sync.Mutex
	out, in  packetScanner
}

const watchXid = -1

// packetScanner follows a stream of length-prefixed ZooKeeper packets
// whose first 4 bytes after the length are an xid, except the first
// packet's (the connect request or response).
type packetScanner struct {
	first bool    // the next packet is the connect request or response
	hdr   [8]byte // the length and xid of the packet being read
	nhdr  int     // bytes of hdr read
	left  int     // bytes of the current packet's body still to skip
}

// scan consumes b and calls xid for each packet's xid but the first's.
func (s *packetScanner) scan(b []byte, xid func(int32)) {
	for len(b) > 0 {
		if s.left > 0 {
			k := min(s.left, len(b))
			s.left -= k
			b = b[k:]
			continue
		}
		k := copy(s.hdr[s.nhdr:], b)
		s.nhdr += k
		b = b[k:]
		if s.nhdr < 8 {
			continue
		}
		length := int(binary.BigEndian.Uint32(s.hdr[:4]))
		if s.first {
			s.first = false
		} else {
			xid(int32(binary.BigEndian.Uint32(s.hdr[4:])))
		}
		s.nhdr, s.left = 0, max(length-4, 0)
	}
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	c.out.scan(p, func(xid int32) {
		if xid != pingXid {
			c.r.n.Add(1)
		}
	})
	c.wmu.Unlock()
	return c.Conn.Write(p)
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.rmu.Lock()
	c.in.scan(p[:n], func(xid int32) {
		if xid == watchXid {
			c.r.events.Add(1)
		}
	})
	c.rmu.Unlock()
	return n, err
}
