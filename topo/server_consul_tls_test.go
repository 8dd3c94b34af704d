package topo_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
)

// TestServerOverTLSConsul: a Server opened with the configured Consul
// factory (CA, client certificate and key) talks to an agent that serves
// its API only over TLS and requires client certificates, and opens a cell
// from its CellInfo record with the same options, with no hand-written
// factory; the registered factory (no TLS) cannot use that agent.
func TestServerOverTLSConsul(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	addr := consultest.StartTLSAgent(t, dir)

	f := consultopo.NewFactory(consultopo.Options{
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "client.pem"),
		KeyFile:  filepath.Join(dir, "client-key.pem"),
	})
	ts, err := topo.OpenServerContext(ctx, consultopo.FactoryName, addr, "tls/global", topo.WithFactory(f))
	require.NoError(t, err)
	defer ts.Close()
	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: addr, Root: "tls/zone1"}))
	cell, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, err = cell.Create(ctx, "d/f", []byte("cell over TLS"))
	require.NoError(t, err)
	ld, err := cell.Lock(ctx, "d", "cell lock over TLS")
	require.NoError(t, err)
	require.NoError(t, ld.Unlock(ctx))

	// The registered factory, without TLS, is refused by that agent.
	// consultopo contacts the agent when it opens, so the open fails.
	_, err = topo.OpenServerContext(ctx, consultopo.FactoryName, addr, "tls/global")
	requireCodeT(t, err, topo.Unavailable)
	require.Contains(t, err.Error(), addr)

	// The record and the cell's file are in the store, read over TLS.
	raw, err := f.Create("zone1", addr, "tls/zone1")
	require.NoError(t, err)
	defer raw.Close()
	got, _, err := raw.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "cell over TLS", string(got))
}
