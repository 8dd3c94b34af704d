package etcd2topo

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/freeport"
	"github.com/topokit/topokit/internal/testpki"
	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// requireUnavailableAt checks that err is Unavailable and names addr.
func requireUnavailableAt(t *testing.T, err error, addr string) {
	t.Helper()
	require.ErrorIs(t, err, topo.Unavailable)
	var te *topo.Error
	require.ErrorAs(t, err, &te)
	require.Equal(t, addr, te.Path, "the error names the address")
	require.Contains(t, err.Error(), addr)
}

// TestDialDeadAddress: NewConn, the Factory and OpenServer against an
// address where nothing answers return Unavailable naming the address
// after the dial bound (DialTimeout 1 s), well before the caller's 10 s,
// and a cancelled or expired context gives Interrupted or Timeout.
func TestDialDeadAddress(t *testing.T) {
	free, err := freeport.Addrs(1) // nothing listens there
	require.NoError(t, err)
	addr := free[0]
	opts := Options{Endpoints: []string{addr}, DialTimeout: time.Second}
	within := func(t *testing.T, f func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("the dial of a dead address was not bounded by DialTimeout")
			return nil
		}
	}

	t.Run("NewConn", func(t *testing.T) {
		err := within(t, func() error {
			c, err := NewConn(opts, "/r")
			if err == nil {
				c.Close()
			}
			return err
		})
		requireUnavailableAt(t, err, addr)
	})
	t.Run("Factory", func(t *testing.T) {
		f := NewFactory(Options{DialTimeout: time.Second})
		err := within(t, func() error {
			c, err := f.Create("zone1", addr, "/r")
			if err == nil {
				c.Close()
			}
			return err
		})
		requireUnavailableAt(t, err, addr)
	})
	t.Run("OpenServerContext", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := within(t, func() error {
			ts, err := topo.OpenServerContext(ctx, FactoryName, addr, "/r",
				topo.WithFactory(NewFactory(Options{DialTimeout: time.Second})))
			if err == nil {
				ts.Close()
			}
			return err
		})
		requireUnavailableAt(t, err, addr)
	})
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := NewConnContext(ctx, Options{Endpoints: []string{addr}}, "/r")
		require.ErrorIs(t, err, topo.Interrupted)
	})
	t.Run("Deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		// DialTimeout (default 5 s) is longer than ctx: ctx ends the dial.
		_, err := Factory{}.CreateContext(ctx, "zone1", addr, "/r")
		require.ErrorIs(t, err, topo.Timeout)
	})
}

// TestFactoryOptions: a Factory's options reach every Conn it opens; the
// address given to Create replaces Endpoints.
func TestFactoryOptions(t *testing.T) {
	f := NewFactory(Options{Endpoints: []string{"unused:1"}, LockTTL: 7 * time.Second, NamedLockTTL: time.Hour})
	conn, err := f.Create("zone1", serverAddr, newRoot())
	require.NoError(t, err)
	defer conn.Close()
	c := conn.(*Conn)
	require.Equal(t, []string{serverAddr}, c.opts.Endpoints)
	require.Equal(t, 7*time.Second, c.opts.LockTTL)
	require.Equal(t, time.Hour, c.opts.NamedLockTTL)
	_, err = c.Create(t.Context(), "f", []byte("x"))
	require.NoError(t, err)
}

// startTLSMember starts an etcd member that serves clients over TLS only
// and requires client certificates signed by the CA it writes into dir
// (ca.pem, client.pem, client-key.pem), and returns its client address.
func startTLSMember(t *testing.T, dir string) string {
	t.Helper()
	ca, caKey := testpki.Write(t, dir, "ca", nil, nil)
	testpki.Write(t, dir, "server", ca, caKey)
	testpki.Write(t, dir, "client", ca, caKey)
	return etcdtest.StartTLS(t, filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"), filepath.Join(dir, "ca.pem"))
}

// TestServerOverTLS: topo.OpenServer with WithFactory(NewFactory(tlsOpts))
// opens the global cell of a TLS-only etcd requiring client certificates,
// and a cell from its CellInfo record, with no hand-written factory; the
// registered factory (no TLS options) fails fast there with Unavailable.
func TestServerOverTLS(t *testing.T) {
	dir := t.TempDir()
	addr := startTLSMember(t, dir)
	tlsOpts := Options{
		TLSCAFile:   filepath.Join(dir, "ca.pem"),
		TLSCertFile: filepath.Join(dir, "client.pem"),
		TLSKeyFile:  filepath.Join(dir, "client-key.pem"),
		DialTimeout: 10 * time.Second,
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ts, err := topo.OpenServerContext(ctx, FactoryName, addr, "/tls/global", topo.WithFactory(NewFactory(tlsOpts)))
	require.NoError(t, err)
	defer ts.Close()
	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: addr, Root: "/tls/zone1"}))
	cell, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	v, err := cell.Create(ctx, "f", []byte("over TLS"))
	require.NoError(t, err)
	got, gv, err := cell.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "over TLS", string(got))
	require.Equal(t, v, gv)
	ld, err := cell.Lock(ctx, "", "tls lock")
	require.NoError(t, err)
	require.NoError(t, ld.Check(ctx))
	require.NoError(t, ld.Unlock(ctx))

	// The cell's Conn is the factory's: its key is under the cell's root.
	direct, err := NewConn(Options{Endpoints: []string{addr}, TLSCAFile: tlsOpts.TLSCAFile,
		TLSCertFile: tlsOpts.TLSCertFile, TLSKeyFile: tlsOpts.TLSKeyFile}, "/tls")
	require.NoError(t, err)
	defer direct.Close()
	got, _, err = direct.Get(ctx, "zone1/f")
	require.NoError(t, err)
	require.Equal(t, "over TLS", string(got))

	// Without the TLS options nothing answers at the TLS-only address.
	_, err = topo.OpenServerContext(ctx, FactoryName, addr, "/tls/global",
		topo.WithFactory(NewFactory(Options{DialTimeout: time.Second})))
	requireUnavailableAt(t, err, addr)
}

// TestDialHungAddress: a member that accepts connections but answers
// nothing (a blackholed proxy) is Unavailable naming the address after
// DialTimeout; once healed, the same address dials.
func TestDialHungAddress(t *testing.T) {
	px, err := faultproxy.New(serverAddr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	px.Blackhole()
	opts := Options{Endpoints: []string{px.Addr()}, DialTimeout: time.Second}
	done := make(chan error, 1)
	go func() {
		c, err := NewConn(opts, newRoot())
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		requireUnavailableAt(t, err, px.Addr())
		var ue *topo.UnreachableError
		require.ErrorAs(t, err, &ue, "typed, not only worded: %v", err)
		require.Equal(t, []string{px.Addr()}, ue.Addrs)
	case <-time.After(10 * time.Second):
		t.Fatal("the dial of a hung address was not bounded by DialTimeout")
	}
	px.Heal()
	opts.DialTimeout = 30 * time.Second
	c, err := NewConn(opts, newRoot())
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Create(t.Context(), "f", []byte("x"))
	require.NoError(t, err)
}

// TestServerWithAuth: the credentials of NewFactory reach the global cell
// and a cell opened from its CellInfo on an etcd with auth enabled; wrong
// credentials are PermissionDenied from OpenServer, at once.
func TestServerWithAuth(t *testing.T) {
	am := etcdtest.StartWithAuth(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := newRoot()
	f := NewFactory(Options{Username: am.Root.Name, Password: am.Root.Password})
	ts, err := topo.OpenServerContext(ctx, FactoryName, am.Addr, root+"/global", topo.WithFactory(f))
	require.NoError(t, err)
	defer ts.Close()
	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: am.Addr, Root: root + "/zone1"}))
	cell, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, err = cell.Create(ctx, "f", []byte("authenticated"))
	require.NoError(t, err)

	_, err = topo.OpenServerContext(ctx, FactoryName, am.Addr, root+"/global",
		topo.WithFactory(NewFactory(Options{Username: am.Root.Name, Password: "wrong"})))
	require.ErrorIs(t, err, topo.PermissionDenied)
	require.NoError(t, ctx.Err())
}
