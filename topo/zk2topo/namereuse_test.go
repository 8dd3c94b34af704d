package zk2topo

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// readGate dials connections whose reads can be held: while held, what a
// read brought from the server is kept from the client until release
// (the client's writes go through). Once armed, the first request frame
// (positive xid) written closes sent.
type readGate struct {
	mu      sync.Mutex
	held    chan struct{} // nil when reads pass
	armed   atomic.Bool
	sent    chan struct{}
	sentOne sync.Once
}

func (g *readGate) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	nc, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &readGateConn{Conn: nc, g: g}, nil
}

func (g *readGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = make(chan struct{})
}

func (g *readGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held != nil {
		close(g.held)
		g.held = nil
	}
}

type readGateConn struct {
	net.Conn
	g *readGate
}

func (c *readGateConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.g.mu.Lock()
	ch := c.g.held
	c.g.mu.Unlock()
	if ch != nil {
		<-ch
	}
	return n, err
}

func (c *readGateConn) Write(b []byte) (int, error) {
	if len(b) >= 12 && int32(binary.BigEndian.Uint32(b[4:8])) > 0 && c.g.armed.Load() {
		c.g.sentOne.Do(func() { close(c.g.sent) })
	}
	return c.Conn.Write(b)
}

// TestGuardedWriteNameReusedEventInFlight: a holder's lock entry is
// deleted behind its back, the "locks" znode removed and created again,
// and another session's entry made with the holder's entry's name, while
// the event of the deletion has not reached the holder (its connection's
// reads are held). The holder's guarded write, sent meanwhile on its
// (live) session, must be refused: a multi's check of the name alone
// passes on the other session's entry.
func TestGuardedWriteNameReusedEventInFlight(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	g := &readGate{sent: make(chan struct{})}
	a, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: 20 * time.Second, Dialer: g.dial}, root)
	require.NoError(t, err)
	defer a.Close()
	raw := rawConn(t)
	other := rawConn(t) // the new contender's session
	_, err = a.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	locks := root + "/d/locks"
	la, err := a.Lock(ctx, "d", "a")
	require.NoError(t, err)
	entry := entryNode(la)

	g.hold()
	require.NoError(t, raw.Delete(entry, -1))
	deleteLocksZnode(t, raw, locks)
	_, err = raw.CreateContainer(locks, nil, zk.FlagContainer, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	name, err := other.Create(locks+"/", []byte("other"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	require.Equal(t, entry, name, "the test needs the name reused")

	g.armed.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := topo.GuardedUpdate(ctx, a, la, "d/f", []byte("misattributed"), nil)
		done <- err
	}()
	select {
	case <-g.sent: // the Txn's first request went out before the event came in
	case <-time.After(hangGuard):
		t.Fatal("the guarded write sent nothing")
	}
	g.release()
	err = <-done
	requireTxnErr(t, err, 0, topo.LockLost)
	data, _, err := raw.Get(root + "/d/f")
	require.NoError(t, err)
	require.Equal(t, "0", string(data), "the stale holder's write landed under another session's entry")
	requireClosed(t, la.Done(), "entry deleted")
}
