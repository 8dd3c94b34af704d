package topo_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
)

// aclManagementToken is the management token of the agent startACLAgent
// starts.
const aclManagementToken = "topokit-test-management"

// startACLAgent starts a Consul dev agent with ACLs enabled and a default
// deny policy on free 127.0.0.1 ports, and returns its HTTP address and a
// token that may read every key (and use sessions) but write none. The
// agent is killed when the test ends.
func startACLAgent(t *testing.T) (addr, readOnlyToken string) {
	t.Helper()
	bin := consultest.Binary(t)
	ports := make([]int, 4)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		require.NoError(t, ln.Close())
	}
	dir := t.TempDir()
	logFile, err := os.Create(filepath.Join(dir, "consul.log"))
	require.NoError(t, err)
	cmd := exec.Command(bin, "agent", "-dev",
		"-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-http-port", strconv.Itoa(ports[0]),
		"-serf-lan-port", strconv.Itoa(ports[1]),
		"-serf-wan-port", strconv.Itoa(ports[2]),
		"-server-port", strconv.Itoa(ports[3]),
		"-dns-port=-1", "-grpc-port=-1",
		"-data-dir", filepath.Join(dir, "data"),
		"-node", "acl-"+strconv.Itoa(ports[0]),
		"-log-level", "warn",
		"-hcl", "disable_update_check = true",
		"-hcl", `acl { enabled = true default_policy = "deny" tokens { initial_management = "`+aclManagementToken+`" agent = "`+aclManagementToken+`" } }`,
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))

	cli, err := api.NewClient(&api.Config{Address: addr, Token: aclManagementToken})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		select {
		case <-exited:
			log, _ := os.ReadFile(logFile.Name())
			require.FailNow(t, "the Consul agent exited", "%s", log)
		default:
		}
		leader, err := cli.Status().Leader()
		if err != nil || leader == "" {
			return false
		}
		nodes, _, err := cli.Catalog().Nodes(nil)
		return err == nil && len(nodes) > 0
	}, 60*time.Second, 50*time.Millisecond, "the ACL agent did not come up")

	policy, _, err := cli.ACL().PolicyCreate(&api.ACLPolicy{
		Name: "read-only",
		Rules: `key_prefix "" { policy = "read" }
session_prefix "" { policy = "write" }
node_prefix "" { policy = "read" }`,
	}, nil)
	require.NoError(t, err)
	token, _, err := cli.ACL().TokenCreate(&api.ACLToken{Policies: []*api.ACLTokenPolicyLink{{ID: policy.ID}}}, nil)
	require.NoError(t, err)
	return addr, token.SecretID
}

// TestUpdateCellInfoFieldsConsulReadOnlyToken runs UpdateCellInfoFields
// through a real Consul agent with a read-only ACL token: the agent refuses
// every write. Whatever code the backend reports the refusal under
// (PermissionDenied, or a compare-and-set failure as consultopo used to), the
// call must not spin: it returns PermissionDenied at once, or backs off
// until its deadline. The record is left unchanged.
func TestUpdateCellInfoFieldsConsulReadOnlyToken(t *testing.T) {
	ctx := t.Context()
	addr, token := startACLAgent(t)
	admin, err := consultopo.NewConn(consultopo.Options{Address: addr, Token: aclManagementToken}, "srv/global")
	require.NoError(t, err)
	defer admin.Close()
	reader, err := consultopo.NewConn(consultopo.Options{Address: addr, Token: token}, "srv/global")
	require.NoError(t, err)
	ts := topo.NewServer(consultopo.NewFactory(consultopo.Options{Token: token}), reader)
	defer ts.Close()
	adminTS := topo.NewServer(consultopo.NewFactory(consultopo.Options{Token: aclManagementToken}), admin)
	defer adminTS.Close()
	require.NoError(t, adminTS.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: addr, Root: "srv/zone1"}))

	// The read-only token reads.
	ci, err := ts.GetCellInfo(ctx, "zone1")
	require.NoError(t, err)
	require.Equal(t, "srv/zone1", ci.GetRoot())

	for _, cell := range []string{"zone1", "zone2"} { // an existing record (Update), an absent one (Create)
		attempts := 0
		uctx, cancel := context.WithTimeout(ctx, time.Second)
		err = ts.UpdateCellInfoFields(uctx, cell, func(ci *topodatapb.CellInfo) error {
			attempts++
			ci.Root = "srv/changed"
			return nil
		})
		cancel()
		t.Logf("%s: %d attempts, %v", cell, attempts, err)
		require.Error(t, err, cell)
		require.Truef(t, topo.IsErrType(err, topo.PermissionDenied) || topo.IsErrType(err, topo.Timeout),
			"%s: want PermissionDenied or Timeout, got %v", cell, err)
		require.Less(t, attempts, 50, "%s: UpdateCellInfoFields spins on a refused write", cell)
	}
	ci, err = adminTS.GetCellInfo(ctx, "zone1")
	require.NoError(t, err)
	require.Equal(t, "srv/zone1", ci.GetRoot(), "a refused update changed the record")
	_, err = adminTS.GetCellInfo(ctx, "zone2")
	requireCodeT(t, err, topo.NoNode)
}
