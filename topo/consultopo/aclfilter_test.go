package consultopo

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestListingsFilteredByACLs: Consul answers a listing of keys the token
// may not read with the readable keys only (the others filtered out,
// no error). A List, ListDir or WatchRecursive over keys the token cannot
// all read is PermissionDenied, as on etcd, not NoNode or a partial
// answer; and a WatchRecursive whose token loses read access mid-watch
// ends with PermissionDenied instead of reporting the files deleted.
func TestListingsFilteredByACLs(t *testing.T) {
	a, admin, _, root := aclSetup(t)
	ctx := t.Context()
	for _, p := range []string{"ok/f", "secret/f"} {
		_, err := admin.Create(ctx, p, []byte("x"))
		require.NoError(t, err)
	}
	cfg := api.DefaultConfig()
	cfg.Address, cfg.Token = a.Addr(), a.ManagementToken()
	mgmt, err := api.NewClient(cfg)
	require.NoError(t, err)
	r := strings.TrimPrefix(root, "/")
	rules := func(okPolicy string) string {
		return `key_prefix "` + r + `/ok/" { policy = "` + okPolicy + `" }` + "\n" +
			`key_prefix "` + r + `/secret/" { policy = "deny" }` + "\n" +
			`session_prefix "" { policy = "write" }` + "\n" + `node_prefix "" { policy = "read" }`
	}
	policy, _, err := mgmt.ACL().PolicyCreate(&api.ACLPolicy{Name: "filter-" + strconv.FormatInt(time.Now().UnixNano(), 36), Rules: rules("read")}, nil)
	require.NoError(t, err)
	tok, _, err := mgmt.ACL().TokenCreate(&api.ACLToken{Policies: []*api.ACLTokenPolicyLink{{ID: policy.ID}}}, nil)
	require.NoError(t, err)
	c, err := NewConn(Options{Address: a.Addr(), Token: tok.SecretID, WatchPollDuration: time.Second}, root)
	require.NoError(t, err)
	defer c.Close()

	_, err = c.List(ctx, "ok/")
	require.NoError(t, err, "a readable prefix lists")
	_, err = c.ListDir(ctx, "ok", true)
	require.NoError(t, err, "a readable directory lists")
	for _, dir := range []string{"secret", ""} {
		_, err = c.List(ctx, dir)
		requireCode(t, err, topo.PermissionDenied)
		_, err = c.ListDir(ctx, dir, true)
		requireCode(t, err, topo.PermissionDenied)
		_, _, err = c.WatchRecursive(ctx, dir)
		requireCode(t, err, topo.PermissionDenied)
	}

	initial, events, err := c.WatchRecursive(ctx, "ok/")
	require.NoError(t, err)
	require.Len(t, initial, 1)
	policy.Rules = rules("deny")
	_, _, err = mgmt.ACL().PolicyUpdate(policy, nil)
	require.NoError(t, err)
	select {
	case ev := <-events:
		require.NotNil(t, ev)
		requireCode(t, ev.Err, topo.PermissionDenied)
	case <-time.After(waitFor):
		t.Fatal("WatchRecursive kept running on a prefix its token can no longer read")
	}
	got, _, err := admin.Get(ctx, "ok/f")
	require.NoError(t, err)
	require.Equal(t, "x", string(got))
}
