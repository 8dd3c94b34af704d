package zk2topo

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// barrierDrop dials connections that, once armed, swallow the next read
// barrier (a multi) unsent, pass the request after it, and break the
// connection once that request's answer was read: the barrier then fails
// (connection closed) after the read it preceded succeeded, so the read is
// retried (see Conn.read) and answered twice.
type barrierDrop struct {
	armed atomic.Bool
	broke chan struct{} // closed once a connection was broken
	once  sync.Once
}

func (d *barrierDrop) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &barrierDropConn{Conn: nc, d: d, in: packetScanner{first: true}}, nil
}

type barrierDropConn struct {
	net.Conn
	d       *barrierDrop
	dropped bool         // a barrier was swallowed (written by the send side only)
	readXid atomic.Int32 // the request let through after it
	broken  atomic.Bool  // its answer was read: later reads fail
	in      packetScanner
}

func (c *barrierDropConn) Write(b []byte) (int, error) {
	if len(b) >= 12 {
		xid, op := int32(binary.BigEndian.Uint32(b[4:8])), int32(binary.BigEndian.Uint32(b[8:12]))
		switch {
		case xid > 0 && op == opMulti && !c.dropped && c.d.armed.CompareAndSwap(true, false):
			c.dropped = true
			return len(b), nil
		case xid > 0 && c.dropped && c.readXid.Load() == 0:
			c.readXid.Store(xid)
		}
	}
	return c.Conn.Write(b)
}

func (c *barrierDropConn) Read(b []byte) (int, error) {
	if c.broken.Load() {
		_ = c.Conn.Close()
		c.d.once.Do(func() { close(c.d.broke) })
		return 0, io.EOF
	}
	n, err := c.Conn.Read(b)
	c.in.scan(b[:n], func(xid int32) {
		if x := c.readXid.Load(); x != 0 && xid == x {
			c.broken.Store(true)
		}
	})
	return n, err
}

// TestGetAnswersWhenItsBarrierFailsAfterTheRead: a linearizable Get whose
// read succeeded but whose barrier failed with the connection is retried
// on the reconnected session, and its answer (read twice) is returned.
func TestGetAnswersWhenItsBarrierFailsAfterTheRead(t *testing.T) {
	root := freshRoot(t)
	w := openConn(t, []string{testServer}, root)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := w.Create(ctx, "f", []byte("value"))
	require.NoError(t, err)

	d := &barrierDrop{broke: make(chan struct{})}
	c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: 20 * time.Second, LinearizableReads: true, Dialer: d.dial}, root)
	require.NoError(t, err)
	_, _, err = c.Get(ctx, "f") // the session is up and its first read done
	require.NoError(t, err)

	d.armed.Store(true)
	data, _, err := c.Get(ctx, "f")
	require.NoError(t, err, "a Get retried after its barrier failed must return its answer")
	require.Equal(t, "value", string(data))
	select {
	case <-d.broke:
	default:
		t.Fatal("the connection was never broken: the scenario did not happen")
	}
	c.Close() // not deferred: a read stuck in a worker would hang Close
}
