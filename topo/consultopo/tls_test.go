package consultopo

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
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
