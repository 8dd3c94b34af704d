package zk2topo

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"
)

// TestPipelinedReadAfterLateWrite: the children read that Lock pipelines
// behind its entry's create is sent even when the create's answer comes
// back before the goroutine that wrote the create's frame runs on (a
// loaded machine): the frame is announced to the pipeline (expect) as it
// is written, not once the write returned. Here the connection's Write
// returns only once Lock has stopped the pipeline (the create was
// answered). The read used to be lost then, and Lock sent an exists of
// its entry and a children read of its own instead: one request more
// than docs/roundtrips.md's row (TestRequestCounts failed so under load).
func TestPipelinedReadAfterLateWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var late atomic.Pointer[sessionObserver]
	// A create2 frame's Write returns, while late is set, only once late
	// has no registered waiter (the pipeline behind the create was
	// stopped, or its waiter already matched).
	wrote := func(b []byte) {
		if o := late.Load(); o != nil {
			if _, op := reqHeader(b); op == opCreate2 {
				for deadline := time.Now().Add(hangGuard); o.n.Load() > 0 && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
			}
		}
	}
	c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, Dialer: afterWriteDialer(wrote)}, freshRoot(t))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	_, err = c.Create(ctx, "l/a", nil)
	require.NoError(t, err)
	// A persistent locks znode, which the server never reaps: a Lock
	// after the session's first one there pipelines its read.
	_, err = rawConn(t).Create(c.zkPath("l/locks"), nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "l", "x")
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	s, err := c.session("")
	require.NoError(t, err)

	var mu sync.Mutex
	var ops []int32
	hook := func(b []byte) {
		if xid, op := reqHeader(b); xid > 0 {
			mu.Lock()
			ops = append(ops, op)
			mu.Unlock()
		}
	}
	s.obs.writeHook.Store(&hook)
	late.Store(s.obs)
	l, err = c.Lock(ctx, "l", "x")
	require.NoError(t, err)
	late.Store(nil)
	s.obs.writeHook.Store(nil)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int32{opCreate2, opGetChildren2}, ops, "Lock's requests: the create and the read pipelined behind it")
	require.NoError(t, l.Unlock(ctx))
}

// afterWriteDialer returns a Dialer (Options.Dialer) whose connections
// call wrote with each frame once it was written, before Write returns.
func afterWriteDialer(wrote func(b []byte)) func(network, address string, timeout time.Duration) (net.Conn, error) {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		nc, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return &afterWriteConn{Conn: nc, wrote: wrote}, nil
	}
}

type afterWriteConn struct {
	net.Conn
	wrote func(b []byte)
}

func (c *afterWriteConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err == nil {
		c.wrote(b)
	}
	return n, err
}
