package etcdtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/freeport"
)

func TestClusterConfigs(t *testing.T) {
	dir := t.TempDir()
	cfgs, err := clusterConfigs(3, memberConfig{TickMs: 10}, func(i int) string { return filepath.Join(dir, fmt.Sprint(i)) })
	require.NoError(t, err)
	require.Len(t, cfgs, 3)
	seen := map[string]bool{}
	for i, c := range cfgs {
		require.Equal(t, fmt.Sprintf("m%d", i), c.Name)
		require.Equal(t, uint(10), c.TickMs, "base settings are kept")
		require.Equal(t, filepath.Join(dir, fmt.Sprint(i)), c.Dir)
		for _, u := range []string{c.ClientURL, c.PeerURL} {
			require.True(t, strings.HasPrefix(u, "http://127.0.0.1:"), u)
			require.False(t, seen[u], "duplicate URL %s", u)
			seen[u] = true
		}
		require.Contains(t, c.InitialCluster, c.Name+"="+c.PeerURL)
		require.Equal(t, cfgs[0].InitialCluster, c.InitialCluster)
	}
}

// TestAddrInUse: a member whose client port is taken fails to start with
// errAddrInUse (what makes Start and StartCluster pick other ports and
// retry), the running member is the leader of its one-member cluster, and
// closing it twice is safe.
func TestAddrInUse(t *testing.T) {
	m := StartMember(t)
	require.True(t, m.IsLeader(), "a single member leads")
	other, err := freeport.Addrs(1)
	require.NoError(t, err)
	cfg := baseConfig()
	cfg.Name, cfg.Dir = "clash", t.TempDir()
	cfg.ClientURL, cfg.PeerURL = "http://"+m.ClientAddr(), "http://"+other[0]
	_, err = startMemberProcess(cfg)
	require.ErrorIs(t, err, errAddrInUse)
	m.Close()
	require.NotPanics(t, m.Close)
}

// TestServerConfigFields: the member program (server/main.go, built in a
// module of its own, so it cannot share the type) reads the JSON of
// memberConfig into a struct with the same fields, in the same order.
func TestServerConfigFields(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("server", "main.go"), nil, 0)
	require.NoError(t, err)
	var got []string
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "config" {
			for _, fld := range ts.Type.(*ast.StructType).Fields.List {
				for _, name := range fld.Names {
					got = append(got, name.Name+" "+fmt.Sprint(fld.Type))
				}
			}
		}
		return true
	})
	var want []string
	rt := reflect.TypeFor[memberConfig]()
	for i := range rt.NumField() {
		want = append(want, rt.Field(i).Name+" "+rt.Field(i).Type.String())
	}
	require.Equal(t, want, got)
}

// TestServerVersionChoice: TOPOKIT_ETCDTEST_SERVER picks one of the
// versions etcdtest has a go.mod for (with or without the "v"); any other
// is refused with an error naming them, and unset means the default.
func TestServerVersionChoice(t *testing.T) {
	for _, v := range ServerVersions() {
		_, err := serverSource.ReadFile("server/" + v + ".mod")
		require.NoError(t, err, "a go.mod for %s", v)
	}
	t.Setenv(ServerVersionEnv, "")
	v, err := ServerVersion()
	require.NoError(t, err)
	require.Equal(t, DefaultServerVersion, v)
	t.Setenv(ServerVersionEnv, "3.7.3")
	v, err = ServerVersion()
	require.NoError(t, err)
	require.Equal(t, "v3.7.3", v)
	t.Setenv(ServerVersionEnv, "v3.5.0")
	_, err = ServerVersion()
	require.ErrorContains(t, err, "v3.6.16 or v3.7.3")
}
