package zk2topo

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/freeport"
	"github.com/topokit/topokit/topo"
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

// within runs f and fails the test when it does not return within 10 s.
func within(t *testing.T, f func() error) error {
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

// TestDialDeadAddress: NewConn, the Factory and OpenServerContext against
// an address where nothing answers return Unavailable naming the address
// after the dial bound (DialTimeout 1 s), well before the caller's
// deadline, and a cancelled or expired context gives Interrupted or
// Timeout.
func TestDialDeadAddress(t *testing.T) {
	free, err := freeport.Addrs(1) // nothing listens there
	require.NoError(t, err)
	addr := free[0]
	t.Run("NewConn", func(t *testing.T) {
		err := within(t, func() error {
			c, err := NewConn(Options{Servers: []string{addr}, DialTimeout: time.Second}, "/r")
			if err == nil {
				c.Close()
			}
			return err
		})
		requireUnavailableAt(t, err, addr)
	})
	t.Run("Factory", func(t *testing.T) {
		err := within(t, func() error {
			c, err := NewFactory(Options{DialTimeout: time.Second}).Create("zone1", addr, "/r")
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
		_, err := NewConnContext(ctx, Options{Servers: []string{addr}}, "/r")
		require.ErrorIs(t, err, topo.Interrupted)
	})
	t.Run("Deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		// DialTimeout (default 5 s) is longer than ctx: ctx ends the wait.
		_, err := Factory{}.CreateContext(ctx, "zone1", addr, "/r")
		require.ErrorIs(t, err, topo.Timeout)
	})
}

// TestNewFactoryOptions: NewFactory's options reach every Conn it opens,
// the address replaces Servers, and the first session is there when
// Create returns.
func TestNewFactoryOptions(t *testing.T) {
	f := NewFactory(Options{Servers: []string{"unused:1"}, SessionTimeout: testSessionTimeout, DialTimeout: 30 * time.Second, LinearizableReads: true})
	conn, err := f.CreateContext(t.Context(), "zone1", testServer, freshRoot(t))
	require.NoError(t, err)
	defer conn.Close()
	c := conn.(*Conn)
	require.Equal(t, []string{testServer}, c.opts.Servers)
	require.True(t, c.opts.LinearizableReads)
	require.Equal(t, 30*time.Second, c.opts.DialTimeout)
	require.Equal(t, zk.StateHasSession, c.zkConn().State())
}

// TestDialHungAddress: a server that accepts connections but answers
// nothing (a blackholed proxy) is Unavailable naming the address after
// DialTimeout; once healed, the same address gives a session.
func TestDialHungAddress(t *testing.T) {
	px, err := faultproxy.New(testServer)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	px.Blackhole()
	opts := Options{Servers: []string{px.Addr()}, SessionTimeout: testSessionTimeout, DialTimeout: time.Second}
	err = within(t, func() error {
		c, err := NewConn(opts, freshRoot(t))
		if err == nil {
			c.Close()
		}
		return err
	})
	requireUnavailableAt(t, err, px.Addr())
	var ue *topo.UnreachableError
	require.ErrorAs(t, err, &ue, "typed, not only worded: %v", err)
	require.Equal(t, []string{px.Addr()}, ue.Addrs)
	px.Heal()
	opts.DialTimeout = 30 * time.Second
	c, err := NewConn(opts, freshRoot(t))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Create(t.Context(), "f", []byte("x"))
	require.NoError(t, err)
}
