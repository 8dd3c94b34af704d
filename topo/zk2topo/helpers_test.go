package zk2topo

import (
	"fmt"
	"os"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// testServer is the package's shared standalone ZooKeeper, started by
// TestMain (JVM start-up is slow); every test uses a fresh root on it.
var testServer string

// testServerCPU returns the CPU time the shared server's JVM has used so
// far (0 when it cannot be read).
var testServerCPU func() time.Duration

// rootSeq numbers the roots handed out to tests.
var rootSeq atomic.Int64

func TestMain(m *testing.M) {
	s, err := zktest.Launch()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testServer = s.Addr()
	testServerCPU = func() time.Duration {
		d, _ := s.CPUTime()
		return d
	}
	code := m.Run()
	s.Stop()
	os.Exit(code)
}

// testSessionTimeout keeps session-bound tests short.
const testSessionTimeout = 4 * time.Second

// freshRoot returns a root no other test uses.
func freshRoot(t testing.TB) string {
	return fmt.Sprintf("/t%d-%d", os.Getpid(), rootSeq.Add(1))
}

// openConn opens a Conn on servers at root, closed when t ends.
func openConn(t testing.TB, servers []string, root string) *Conn {
	t.Helper()
	c, err := NewConn(Options{Servers: servers, SessionTimeout: testSessionTimeout}, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// sessionPassword reads the client's session password, which the library
// does not export. A request first makes the read happen after the library
// stored it.
func sessionPassword(t testing.TB, zc *zk.Conn) (int64, []byte) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, _, err := zc.Exists("/")
		return err == nil
	}, 30*time.Second, 10*time.Millisecond)
	v := reflect.ValueOf(zc).Elem().FieldByName("passwd")
	pw := reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem().Interface().([]byte)
	return zc.SessionID(), append([]byte(nil), pw...)
}

// expireSession expires conn's session on the server at addr and waits
// until conn has noticed (its leadership contexts are then cancelled). It
// takes the session over with a second connection, which makes the server
// drop conn's connection (conn sees the disconnection first, as before a
// real expiry), and closes it. conn's redials are held meanwhile (the
// Conn redials at once, and would take its session back in between).
func expireSession(t testing.TB, conn topo.Conn, addr string) {
	t.Helper()
	c := conn.(*Conn)
	old, err := c.session("")
	require.NoError(t, err)
	id, pw := sessionPassword(t, old.zk)
	hold := make(chan struct{})
	old.dialHold.Store(&hold)
	taken, err := zktest.TakeOverSession(addr, id, pw)
	if err == nil { // else already gone on the server: conn learns it on reconnecting
		require.Eventually(t, func() bool { return !old.connected.Load() || old.isLost() }, 30*time.Second, time.Millisecond)
		require.NoError(t, taken.Close())
	}
	old.dialHold.Store(nil)
	close(hold)
	select {
	case <-old.lost:
	case <-time.After(hangGuard):
		t.Fatal("the Conn did not notice its session expired")
	}
}

// entryNode returns the znode of the lock or election entry behind f.
func entryNode(f topo.Fence) string {
	g, ok := claims.FenceGuard(f)
	if !ok {
		panic("not a claim of the engine")
	}
	return g.Entry().Key
}

// zkConn returns the current session's client connection (for tests).
func (c *Conn) zkConn() *zk.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur.zk
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
