package consultopo

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/freeport"
	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// hungAddr returns the address of a listener on 127.0.0.1 that accepts
// every connection and never reads from it nor answers (an agent process
// that hangs); the listener and its connections are closed when t ends.
func hungAddr(t *testing.T) string {
	t.Helper()
	addr, _ := hungListener(t)
	return addr
}

// hungListener is hungAddr, also returning a channel that receives a value
// each time the listener accepted a connection (buffered, so that an
// accept that comes before its reader is not lost; beyond the buffer,
// dropped).
func hungListener(t *testing.T) (string, <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan struct{}, 64)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String(), accepted
}

// requireCodeAt checks that err has code and names addr (as its path and
// in its text).
func requireCodeAt(t *testing.T, err error, code topo.ErrorCode, addr string) {
	t.Helper()
	requireCode(t, err, code)
	var te *topo.Error
	require.ErrorAs(t, err, &te)
	require.Equal(t, addr, te.Path, "the error names the address")
	require.Contains(t, err.Error(), addr)
}

// hangGuard is how long a call may take before the test reports it as
// hung: far beyond every bound the tests set, so it never fails a call
// that is merely slow on a loaded machine.
const hangGuard = 2 * time.Minute

// returns runs f and fails the test when f has not returned after
// hangGuard (the call hangs).
func returns(t *testing.T, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(hangGuard):
		t.Fatal("the call hangs")
		return nil
	}
}

// closeConn closes c when the open succeeded.
func closeConn(c topo.Conn, err error) error {
	if err == nil {
		c.Close()
	}
	return err
}

// TestDialHungAgent: NewConn, the Factory (Create and CreateContext) and
// OpenServerContext against an address that accepts TCP connections but
// never answers fail with Unavailable naming the address (bounded by
// DialTimeout, 500 ms here, well before the caller's minute); so does an
// address where nothing listens. A context cancelled first gives
// Interrupted, one whose deadline passes first Timeout.
func TestDialHungAgent(t *testing.T) {
	short := Options{DialTimeout: 500 * time.Millisecond}
	dead, err := freeport.Addrs(1) // nothing listens there
	require.NoError(t, err)
	for _, tc := range []struct{ name, addr string }{{"Hung", hungAddr(t)}, {"Dead", dead[0]}} {
		addr := tc.addr
		t.Run(tc.name+"/NewConn", func(t *testing.T) {
			opts := short
			opts.Address = addr
			err := returns(t, func() error { c, err := NewConn(opts, "r"); return closeConn(c, err) })
			requireCodeAt(t, err, topo.Unavailable, addr)
			if tc.name == "Hung" {
				var ue *topo.UnreachableError
				require.ErrorAs(t, err, &ue, "typed, not only worded: %v", err)
				require.Equal(t, []string{addr}, ue.Addrs)
			}
		})
		t.Run(tc.name+"/FactoryCreate", func(t *testing.T) {
			err := returns(t, func() error { return closeConn(NewFactory(short).Create("zone1", addr, "r")) })
			requireCodeAt(t, err, topo.Unavailable, addr)
		})
		t.Run(tc.name+"/OpenServerContext", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := returns(t, func() error {
				ts, err := topo.OpenServerContext(ctx, FactoryName, addr, "r", topo.WithFactory(NewFactory(short)))
				if err == nil {
					ts.Close()
				}
				return err
			})
			requireCodeAt(t, err, topo.Unavailable, addr)
			require.NoError(t, ctx.Err(), "the dial bound, not the caller's deadline, ended the open")
		})
	}
	hung := hungAddr(t)
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := NewConnContext(ctx, Options{Address: hung}, "r")
		requireCodeAt(t, err, topo.Interrupted, hung)
		err = closeConn(NewFactory(Options{}).CreateContext(ctx, "zone1", hung, "r"))
		requireCodeAt(t, err, topo.Interrupted, hung)
	})
	t.Run("CancelledDuringDial", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		c := make(chan error, 1)
		go func() { c <- closeConn(NewFactory(Options{}).CreateContext(ctx, "zone1", hung, "r")) }()
		cancel()
		err := returns(t, func() error { return <-c })
		requireCodeAt(t, err, topo.Interrupted, hung)
	})
	t.Run("OpenServerContextCancelledDuringDial", func(t *testing.T) {
		// Cancelled once the agent accepted the connection: the Server
		// gives up on the dial, whose failure must come back as no Conn
		// at all (the Server closes the Conn of an abandoned dial, and a
		// nil *Conn in a topo.Conn is not nil).
		addr, accepted := hungListener(t)
		for range 3 {
			ctx, cancel := context.WithCancel(context.Background())
			c := make(chan error, 1)
			go func() {
				ts, err := topo.OpenServerContext(ctx, FactoryName, addr, "r", topo.WithFactory(NewFactory(Options{})))
				if err == nil {
					ts.Close()
				}
				c <- err
			}()
			<-accepted
			cancel()
			err := returns(t, func() error { return <-c })
			requireCodeAt(t, err, topo.Interrupted, addr)
		}
	})
	t.Run("Deadline", func(t *testing.T) {
		// DialTimeout (default 5 s) is longer than ctx: ctx ends the dial.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := returns(t, func() error { return closeConn(NewFactory(Options{}).CreateContext(ctx, "zone1", hung, "r")) })
		requireCodeAt(t, err, topo.Timeout, hung)
	})
}

// TestDialTokens: on an agent with ACLs (default deny) the read-only token
// opens a Conn and a Server, and reads through them; the management token
// and no token at all open too; a token Consul does not know is
// PermissionDenied naming the address, from NewConn and OpenServerContext.
func TestDialTokens(t *testing.T) {
	a := consultest.StartAgentWithOptions(t, consultest.AgentOptions{ACL: true})
	ctx := t.Context()
	root := testRoot(t)
	admin, err := NewConn(Options{Address: a.Addr(), Token: a.ManagementToken()}, root)
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)

	ro := a.ReadOnlyToken(t)
	c, err := NewConn(Options{Address: a.Addr(), Token: ro}, root)
	require.NoError(t, err, "a read-only token opens")
	defer c.Close()
	got, _, err := c.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "x", string(got))

	ts, err := topo.OpenServerContext(ctx, FactoryName, a.Addr(), root, topo.WithFactory(NewFactory(Options{Token: ro})))
	require.NoError(t, err, "a read-only token opens a Server")
	defer ts.Close()
	got, _, err = ts.GlobalCell().Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, "x", string(got))

	anon, err := NewConn(Options{Address: a.Addr()}, root)
	require.NoError(t, err, "no token opens (the anonymous token is refused only when used)")
	anon.Close()

	const unknown = "00000000-1111-2222-3333-444444444444"
	_, err = NewConn(Options{Address: a.Addr(), Token: unknown}, root)
	requireCodeAt(t, err, topo.PermissionDenied, a.Addr())
	_, err = topo.OpenServerContext(ctx, FactoryName, a.Addr(), root, topo.WithFactory(NewFactory(Options{Token: unknown})))
	requireCodeAt(t, err, topo.PermissionDenied, a.Addr())
}

// TestRequestTimeoutHungAgent: once a Conn is open, its agent hanging (a
// blackholed proxy) makes calls given no deadline fail with Unavailable
// naming the agent's address (bounded by RequestTimeout, 500 ms here)
// instead of hanging; healed, the Conn works again.
func TestRequestTimeoutHungAgent(t *testing.T) {
	px, err := faultproxy.New(agent.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	opts := testOptions()
	opts.Address, opts.RequestTimeout = px.Addr(), 500*time.Millisecond
	c, err := NewConn(opts, testRoot(t))
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	_, err = c.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)

	px.Blackhole()
	err = returns(t, func() error { _, _, err := c.Get(ctx, "f"); return err })
	requireCode(t, err, topo.Unavailable)
	require.Contains(t, err.Error(), px.Addr(), "the error names the agent")
	err = returns(t, func() error { _, err := c.Update(ctx, "f", []byte("y"), nil); return err })
	requireCode(t, err, topo.Unavailable)
	err = returns(t, func() error { _, err := c.ListDir(ctx, "", false); return err })
	requireCode(t, err, topo.Unavailable)

	px.Heal()
	got, _, err := c.Get(ctx, "f")
	require.NoError(t, err)
	require.Contains(t, []string{"x", "y"}, string(got), "the timed-out Update may have been applied")
}

// TestRequestTimeoutSparesBlockingQueries: a blocking query whose wait
// time (3 s) is above RequestTimeout (1 s) runs its whole wait and returns
// the unchanged index (the bound of a blocking query adds its wait time),
// and a Watch whose blocking query ran that long delivers a change.
func TestRequestTimeoutSparesBlockingQueries(t *testing.T) {
	opts := testOptions()
	opts.WatchPollDuration, opts.RequestTimeout = 3*time.Second, time.Second
	c, err := NewConn(opts, testRoot(t))
	require.NoError(t, err)
	defer c.Close()
	ctx := t.Context()
	_, err = c.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
	_, meta, err := c.kv.Get(c.key("f"), c.queryOptions(ctx))
	require.NoError(t, err)
	_, m, err := c.kv.Get(c.key("f"), c.blocking(c.queryOptions(ctx), meta.LastIndex))
	require.NoError(t, err, "a blocking query within its wait time failed")
	require.Equal(t, meta.LastIndex, m.LastIndex, "the key did not change")

	_, ch, err := c.Watch(ctx, "f")
	require.NoError(t, err)
	// Let the watch's blocking query run past RequestTimeout (a blocking
	// query of the test's own, as above, takes one wait time).
	_, _, err = c.kv.Get(c.key("f"), c.blocking(c.queryOptions(ctx), meta.LastIndex))
	require.NoError(t, err)
	v, err := c.Update(ctx, "f", []byte("y"), nil)
	require.NoError(t, err)
	select {
	case wd := <-ch:
		require.NoError(t, wd.Err)
		require.Equal(t, "y", string(wd.Contents))
		require.Equal(t, v, wd.Version)
	case <-time.After(hangGuard):
		t.Fatal("the watch did not deliver the change")
	}
}

// TestBlockingWait: the bound blockingWait adds for a request's query.
func TestBlockingWait(t *testing.T) {
	for q, want := range map[string]time.Duration{
		"":                                0,
		"consistent=":                     0,
		"index=0&wait=30000ms":            0,
		"wait=30000ms":                    0,
		"index=12&wait=32000ms":           34 * time.Second,
		"consistent=&index=7&wait=1600ms": 1700 * time.Millisecond,
		"index=12":                        consulDefaultQueryTime + consulDefaultQueryTime/16,
		"index=12&wait=1h":                consulMaxQueryTime + consulMaxQueryTime/16,
	} {
		require.Equal(t, want, blockingWait(q), q)
	}
}

// TestDialOptions: DialTimeout and RequestTimeout defaults, and a negative
// RequestTimeout removes the bound.
func TestDialOptions(t *testing.T) {
	o := Options{}.normalized()
	require.Equal(t, DefaultDialTimeout, o.DialTimeout)
	require.Equal(t, DefaultRequestTimeout, o.RequestTimeout)
	o = Options{DialTimeout: -1, RequestTimeout: -1}.normalized()
	require.Equal(t, DefaultDialTimeout, o.DialTimeout)
	require.Equal(t, time.Duration(0), o.RequestTimeout)

	opts := testOptions()
	opts.RequestTimeout = -1
	c, err := NewConn(opts, testRoot(t))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Create(t.Context(), "f", []byte("x"))
	require.NoError(t, err)
}

// TestConnForCellHungAddress: a cell whose CellInfo names a hung address
// fails ConnForCell with Unavailable naming that address (the Server's
// factory's DialTimeout, 500 ms, applies to cells opened from CellInfo),
// and nothing is cached: once the record names the agent, the cell opens.
func TestConnForCellHungAddress(t *testing.T) {
	ctx := t.Context()
	root := testRoot(t)
	f := NewFactory(Options{DialTimeout: 500 * time.Millisecond})
	ts, err := topo.OpenServerContext(ctx, FactoryName, agent.Addr(), root+"/global", topo.WithFactory(f))
	require.NoError(t, err)
	defer ts.Close()
	hung := hungAddr(t)
	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: hung, Root: root + "/zone1"}))
	err = returns(t, func() error { _, err := ts.ConnForCell(ctx, "zone1"); return err })
	requireCode(t, err, topo.Unavailable)
	require.Contains(t, err.Error(), hung, "the error names the cell's address")

	require.NoError(t, ts.UpdateCellInfoFields(ctx, "zone1", func(ci *topodatapb.CellInfo) error {
		ci.ServerAddress = agent.Addr()
		return nil
	}))
	cell, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, err = cell.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
}
