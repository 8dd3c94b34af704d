package zk2topo

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

func TestFactoryRegistered(t *testing.T) {
	f, err := topo.GetFactory("zk2")
	require.NoError(t, err)
	root := freshRoot(t)
	conn, err := f.Create("cell", " "+testServer+" ,", root)
	require.NoError(t, err)
	defer conn.Close()
	ctx := t.Context()
	_, err = conn.Create(ctx, "a/b", []byte("x"))
	require.NoError(t, err)

	// The file is the znode <root>/a/b, as in Vitess.
	raw, _, err := zk.Connect([]string{testServer}, testSessionTimeout, zk.WithLogInfo(false))
	require.NoError(t, err)
	defer raw.Close()
	data, _, err := raw.Get(root + "/a/b")
	require.NoError(t, err)
	require.Equal(t, "x", string(data))

	_, err = f.Create("cell", "", root)
	require.ErrorIs(t, err, topo.InvalidArgument)
	_, err = f.Create("cell", testServer, "bad//root")
	require.ErrorIs(t, err, topo.InvalidPath)

	s, err := topo.OpenServer("zk2", testServer, root)
	require.NoError(t, err)
	defer s.Close()
	got, _, err := s.GlobalCell().Get(ctx, "a/b")
	require.NoError(t, err)
	require.Equal(t, "x", string(got))
}

// TestDigestAuthAndACL: nodes created with an auth-only ACL can be read
// only by a session with the same digest credentials, given as an option or
// in a file.
func TestDigestAuthAndACL(t *testing.T) {
	root := freshRoot(t)
	ctx := t.Context()
	owner, err := NewConn(Options{Servers: []string{testServer}, Auth: "digest:alice:secret", ACL: zk.AuthACL(zk.PermAll)}, root)
	require.NoError(t, err)
	defer owner.Close()
	_, err = owner.Create(ctx, "private/f", []byte("x"))
	require.NoError(t, err)
	got, _, err := owner.Get(ctx, "private/f")
	require.NoError(t, err)
	require.Equal(t, "x", string(got))

	file := filepath.Join(t.TempDir(), "auth")
	require.NoError(t, os.WriteFile(file, []byte("digest:alice:secret\n"), 0o600))
	same, err := NewConn(Options{Servers: []string{testServer}, AuthFile: file}, root)
	require.NoError(t, err)
	defer same.Close()
	got, _, err = same.Get(ctx, "private/f")
	require.NoError(t, err)
	require.Equal(t, "x", string(got))

	for _, auth := range []string{"", "digest:mallory:guess"} {
		other, err := NewConn(Options{Servers: []string{testServer}, Auth: auth}, root)
		require.NoError(t, err)
		_, _, err = other.Get(ctx, "private/f")
		require.ErrorIs(t, err, topo.PermissionDenied, "a read without the credentials must be refused")
		_, err = other.Update(ctx, "private/f", []byte("y"), nil)
		require.ErrorIs(t, err, topo.PermissionDenied, "a write without the credentials must be refused")
		other.Close()
	}

	_, err = NewConn(Options{Servers: []string{testServer}, Auth: "nocolon"}, root)
	require.ErrorIs(t, err, topo.InvalidArgument)
	_, err = NewConn(Options{Servers: []string{testServer}, AuthFile: filepath.Join(t.TempDir(), "missing")}, root)
	require.ErrorIs(t, err, topo.InvalidArgument)
	big := filepath.Join(t.TempDir(), "big")
	require.NoError(t, os.WriteFile(big, []byte("digest:user:"+strings.Repeat("x", backendkit.MaxSecretFileSize)), 0o600))
	_, err = NewConn(Options{Servers: []string{testServer}, AuthFile: big}, root)
	require.ErrorIs(t, err, topo.InvalidArgument, "not a scheme:auth: read bounded, refused")
}

// TestContextHonoured: calls return Timeout or Interrupted when their
// context ends although the server never answers (it is paused), and
// abandoned requests stay within MaxConcurrency.
func TestContextHonoured(t *testing.T) {
	s, err := zktest.Launch()
	require.NoError(t, err)
	defer s.Stop()
	c, err := NewConn(Options{Servers: []string{s.Addr()}, SessionTimeout: 30 * time.Second, MaxConcurrency: 2}, "/ctx")
	require.NoError(t, err)
	defer c.Close()
	ctx := t.Context()
	_, err = c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "holder")
	require.NoError(t, err)

	require.NoError(t, s.Pause())
	resumed := false
	defer func() {
		if !resumed {
			_ = s.Resume()
		}
	}()
	calls := map[string]func(ctx context.Context) error{
		"Get":    func(ctx context.Context) error { _, _, err := c.Get(ctx, "d/f"); return err },
		"Update": func(ctx context.Context) error { _, err := c.Update(ctx, "d/f", []byte("y"), nil); return err },
		"Create": func(ctx context.Context) error { _, err := c.Create(ctx, "d/g", nil); return err },
		"Delete": func(ctx context.Context) error { return c.Delete(ctx, "d/f", nil) },
		"List":   func(ctx context.Context) error { _, err := c.List(ctx, "d"); return err },
		"ListDir": func(ctx context.Context) error {
			_, err := c.ListDir(ctx, "d", true)
			return err
		},
		"Lock":  func(ctx context.Context) error { _, err := c.Lock(ctx, "d", "x"); return err },
		"Watch": func(ctx context.Context) error { _, _, err := c.Watch(ctx, "d/f"); return err },
		"WatchRecursive": func(ctx context.Context) error {
			_, _, err := c.WatchRecursive(ctx, "d/")
			return err
		},
		"Check": func(ctx context.Context) error { return l.Check(ctx) },
	}
	for name, call := range calls {
		tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := call(tctx)
		cancel()
		require.ErrorIsf(t, err, topo.Timeout, "%s while the server hangs", name)

		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		err = call(cctx)
		require.ErrorIsf(t, err, topo.Interrupted, "%s cancelled while the server hangs", name)
	}
	require.LessOrEqual(t, len(c.sem), 2, "abandoned requests beyond MaxConcurrency")

	require.NoError(t, s.Resume())
	resumed = true
	require.Eventually(t, func() bool { return len(c.sem) == 0 }, time.Minute, 10*time.Millisecond)
	require.NoError(t, l.Check(ctx))
	// (Abandoned writes may or may not have been applied: a write whose
	// context ended after it was sent is not undone.)
	_, err = c.Update(ctx, "e/f", []byte("z"), nil)
	require.NoError(t, err)
	got, _, err := c.Get(ctx, "e/f")
	require.NoError(t, err)
	require.Equal(t, "z", string(got))
}

// TestNoOrphanEntries: a lock entry whose create outcome the caller never
// saw (its context ended with the create in flight, or the connection
// dropped before the answer) does not stay behind to block other lockers.
func TestNoOrphanEntries(t *testing.T) {
	s, err := zktest.Launch()
	require.NoError(t, err)
	defer s.Stop()
	root := "/orphans"
	open := func() *Conn {
		c, err := NewConn(Options{Servers: []string{s.Addr()}, SessionTimeout: 30 * time.Second}, root)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	c, other := open(), open()
	ctx := t.Context()
	_, err = c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	free := func() bool {
		l, err := other.TryLock(ctx, "d", "probe")
		if err != nil {
			return false
		}
		require.NoError(t, l.Unlock(ctx))
		return true
	}
	require.True(t, free())

	// The context ends while the create waits for a hung server.
	require.NoError(t, s.Pause())
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = c.Lock(tctx, "d", "late")
	cancel()
	require.ErrorIs(t, err, topo.Timeout)
	require.NoError(t, s.Resume())
	require.Eventually(t, free, time.Minute, 10*time.Millisecond, "an abandoned create left its entry")

	// The connection drops right after the create was sent.
	var ps proxies
	var addrs []string
	for range 3 {
		p, err := faultproxy.New(s.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		ps = append(ps, p)
		addrs = append(addrs, p.Addr())
	}
	sent := make(chan struct{})
	var sentOnce sync.Once
	wrote := func(b []byte) { // after the write: the frame left
		if _, op := reqHeader(b); op == opCreate2 {
			sentOnce.Do(func() { close(sent) })
		}
	}
	fresh, err := NewConn(Options{Servers: addrs, SessionTimeout: 30 * time.Second, Dialer: afterWriteDialer(wrote)}, root)
	require.NoError(t, err)
	t.Cleanup(fresh.Close)
	_, _, err = fresh.Get(ctx, "d/f") // connected
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := fresh.Lock(ctx, "d", "cut off")
		done <- err
	}()
	<-sent
	ps.Blackhole()
	ps.Reset()
	ps.Heal()
	err = <-done
	if err != nil {
		require.ErrorIs(t, err, topo.Unavailable)
		require.Eventually(t, free, time.Minute, 10*time.Millisecond, "a create that lost its answer left its entry")
	} // else the answer arrived before the drop: the lock is simply held.
}

// TestFactoryOptions: the options of a Factory (here LinearizableReads)
// reach every Conn it opens; the server address replaces Options.Servers.
func TestFactoryOptions(t *testing.T) {
	f := Factory{Options: Options{Servers: []string{"unused:1"}, SessionTimeout: testSessionTimeout, LinearizableReads: true}}
	root := freshRoot(t)
	conn, err := f.Create("cell", testServer, root)
	require.NoError(t, err)
	defer conn.Close()
	c := conn.(*Conn)
	require.True(t, c.opts.LinearizableReads)
	require.Equal(t, []string{testServer}, c.opts.Servers)
	ctx := t.Context()
	_, err = c.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
	got, _, err := c.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "x", string(got))
}

// TestNewConnErrorNamesTheLastDialError: when no server gives a session
// within DialTimeout, NewConn's error wraps the latest dial error (the
// client library only logs it), the custom Dialer's included.
func TestNewConnErrorNamesTheLastDialError(t *testing.T) {
	refused := errors.New("dial refused by the test")
	dial := func(network, address string, timeout time.Duration) (net.Conn, error) { return nil, refused }
	_, err := NewConn(Options{Servers: []string{"127.0.0.1:1"}, DialTimeout: 300 * time.Millisecond, Dialer: dial}, freshRoot(t))
	require.ErrorIs(t, err, refused)
	require.ErrorContains(t, err, "last dial")
}
