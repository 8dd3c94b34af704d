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
// read does not wait for its answer before it is sent.
type rtCounter struct{ n atomic.Int64 }

func (r *rtCounter) load() int64 { return r.n.Load() }

// dial is a Dialer (Options.Dialer, zk.WithDialer) whose connections count.
func (r *rtCounter) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, r: r, first: true}, nil
}

// countingConn parses the packets written on a connection.
type countingConn struct {
	net.Conn
	r *rtCounter

	mu    sync.Mutex
	first bool    // the next packet is the connect request
	hdr   [8]byte // the length and xid of the packet being read
	nhdr  int     // bytes of hdr read
	left  int     // bytes of the current packet's body still to skip
}

const pingXid = -2

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	for b := p; len(b) > 0; {
		if c.left > 0 {
			k := min(c.left, len(b))
			c.left -= k
			b = b[k:]
			continue
		}
		k := copy(c.hdr[c.nhdr:], b)
		c.nhdr += k
		b = b[k:]
		if c.nhdr < 8 {
			continue
		}
		length := int(binary.BigEndian.Uint32(c.hdr[:4]))
		xid := int32(binary.BigEndian.Uint32(c.hdr[4:]))
		if c.first {
			c.first = false
		} else if xid != pingXid {
			c.r.n.Add(1)
		}
		c.nhdr, c.left = 0, max(length-4, 0)
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}
