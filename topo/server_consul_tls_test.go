package topo_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/freeport"
	"github.com/topokit/topokit/internal/testpki"
	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
)

// startConsulHTTPS runs a Consul dev agent (consultest's binary) whose
// HTTP API is served over TLS at the returned address, requiring a client
// certificate signed by dir/ca.pem; its plain HTTP port serves only the
// readiness check. The agent is killed when the test ends.
func startConsulHTTPS(t *testing.T, dir string) string {
	t.Helper()
	bin := consultest.Binary(t)
	addrs, err := freeport.Addrs(5)
	require.NoError(t, err)
	port := func(i int) string { _, p, _ := net.SplitHostPort(addrs[i]); return p }
	hcl := fmt.Sprintf("tls {\n defaults {\n  ca_file = %q\n  cert_file = %q\n  key_file = %q\n  verify_incoming = true\n }\n}",
		filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem"))
	cmd := exec.Command(bin, "agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-http-port", port(0), "-https-port", port(1),
		"-serf-lan-port", port(2), "-serf-wan-port", port(3), "-server-port", port(4),
		"-dns-port=-1", "-grpc-port=-1", "-data-dir", filepath.Join(dir, "data"), "-node", "tls-"+port(0),
		"-log-level", "warn", "-hcl", "disable_update_check = true",
		"-hcl", fmt.Sprintf("session_ttl_min = %q", consultest.SessionTTLMin.String()), "-hcl", hcl)
	logPath := filepath.Join(dir, "consul.log")
	logf, err := os.Create(logPath)
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = logf, logf
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	client := &http.Client{Timeout: 2 * time.Second}
	ready := func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		resp, err := client.Get("http://" + addrs[0] + "/v1/catalog/nodes")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var nodes []json.RawMessage
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&nodes) == nil && len(nodes) > 0
	}
	require.Eventually(t, ready, 2*time.Minute, 50*time.Millisecond)
	select {
	case <-exited:
		log, _ := os.ReadFile(logPath)
		require.FailNow(t, "the consul agent exited", "%s", log)
	default:
	}
	return addrs[1]
}

// TestServerOverTLSConsul: a Server opened with the configured Consul
// factory (CA, client certificate and key) talks to an agent that serves
// its API only over TLS and requires client certificates, and opens a cell
// from its CellInfo record with the same options, with no hand-written
// factory; the registered factory (no TLS) cannot use that agent.
func TestServerOverTLSConsul(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	ca, caKey := testpki.Write(t, dir, "ca", nil, nil)
	testpki.Write(t, dir, "server", ca, caKey)
	testpki.Write(t, dir, "client", ca, caKey)
	addr := startConsulHTTPS(t, dir)

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
