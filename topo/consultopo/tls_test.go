package consultopo

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/freeport"
	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// TestDialTLSAgent: on an agent serving its API only over TLS and
// requiring client certificates, a Server opened with the TLS factory
// opens (the first request goes over TLS), and so does a cell from its
// CellInfo; without TLS options, or without the client certificate, the
// open fails with Unavailable naming the address.
func TestDialTLSAgent(t *testing.T) {
	dir := t.TempDir()
	addr := consultest.StartTLSAgent(t, dir)
	ctx := t.Context()
	tlsOpts := Options{
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "client.pem"),
		KeyFile:  filepath.Join(dir, "client-key.pem"),
	}
	root := testRoot(t)
	ts, err := topo.OpenServerContext(ctx, FactoryName, addr, root+"/global", topo.WithFactory(NewFactory(tlsOpts)))
	require.NoError(t, err)
	defer ts.Close()
	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: addr, Root: root + "/zone1"}))
	cell, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, err = cell.Create(ctx, "f", []byte("over TLS"))
	require.NoError(t, err)

	_, err = topo.OpenServerContext(ctx, FactoryName, addr, root+"/global")
	t.Log(err)
	requireCodeAt(t, err, topo.Unavailable, addr)
	noCert := tlsOpts
	noCert.CertFile, noCert.KeyFile = "", ""
	noCert.Address, noCert.DialTimeout = addr, time.Second
	_, err = NewConn(noCert, root)
	t.Log(err)
	requireCodeAt(t, err, topo.Unavailable, addr)
}

// TestDialUnusableAgentTyped: an open that finds no usable agent (nothing
// listens at the address; the agent refuses the TLS handshake; plain HTTP
// on its HTTPS port) carries a *topo.UnreachableError naming the address,
// as etcd2topo's and zk2topo's do, not only words.
func TestDialUnusableAgentTyped(t *testing.T) {
	dir := t.TempDir()
	addr := consultest.StartTLSAgent(t, dir)
	free, err := freeport.Addrs(1) // nothing listens there
	require.NoError(t, err)
	tlsOpts := Options{CAFile: filepath.Join(dir, "ca.pem"), DialTimeout: time.Minute}
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"refused", Options{Address: free[0], DialTimeout: time.Minute}},
		{"no client certificate", func() Options { o := tlsOpts; o.Address = addr; return o }()},
		{"plain HTTP", Options{Address: addr, DialTimeout: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewConn(tc.opts, testRoot(t))
			requireCodeAt(t, err, topo.Unavailable, tc.opts.Address)
			var ue *topo.UnreachableError
			require.ErrorAs(t, err, &ue, "typed, not only worded: %v", err)
			require.Equal(t, []string{tc.opts.Address}, ue.Addrs)
		})
	}
}

// TestShortDialTimeoutSparesReconnects: a DialTimeout short enough to
// fail fast at open (1 s) does not bound the TLS handshakes of later
// connections: a reconnection whose handshake takes longer (every chunk of
// bytes delayed 700 ms by a proxy, two chunks at least) still serves the
// request, within the 5 s bound of later handshakes. It failed with
// "net/http: TLS handshake timeout".
func TestShortDialTimeoutSparesReconnects(t *testing.T) {
	dir := t.TempDir()
	addr := consultest.StartTLSAgent(t, dir)
	px, err := faultproxy.New(addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	opts := Options{
		Address:  px.Addr(),
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "client.pem"),
		KeyFile:  filepath.Join(dir, "client-key.pem"),
	}
	c, err := NewConnContext(t.Context(), opts, testRoot(t))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Create(t.Context(), "f", []byte("x"))
	require.NoError(t, err)

	short := opts
	short.DialTimeout = time.Second
	c2, err := NewConnContext(t.Context(), short, c.root)
	require.NoError(t, err)
	defer c2.Close()
	px.SetDelay(700 * time.Millisecond)
	px.Reset()
	c2.transport.CloseIdleConnections()
	got, _, err := c2.Get(t.Context(), "f")
	require.NoError(t, err, "a reconnection's TLS handshake bounded by the open's DialTimeout")
	require.Equal(t, "x", string(got))
}
