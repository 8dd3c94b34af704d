package etcdembed

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClusterConfigs(t *testing.T) {
	dir := t.TempDir()
	cfgs, err := ClusterConfigs(3, Config{TickMs: 10}, func(i int) string { return filepath.Join(dir, fmt.Sprint(i)) })
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

func TestStartErrors(t *testing.T) {
	_, err := Start(Config{})
	require.Error(t, err, "Dir, ClientURL and PeerURL are required")

	// A taken port is reported as ErrAddrInUse.
	addrs, err := FreeAddrs(2)
	require.NoError(t, err)
	m, err := Start(Config{Dir: t.TempDir(), ClientURL: "http://" + addrs[0], PeerURL: "http://" + addrs[1], TickMs: 10, ElectionMs: 100, NoFsync: true})
	require.NoError(t, err)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, m.WaitReady(ctx))
	require.Equal(t, addrs[0], m.ClientAddr())
	require.True(t, m.IsLeader(), "a single member leads")

	other, err := FreeAddrs(1)
	require.NoError(t, err)
	_, err = Start(Config{Dir: t.TempDir(), ClientURL: "http://" + addrs[0], PeerURL: "http://" + other[0]})
	require.ErrorIs(t, err, ErrAddrInUse)
}

func TestMemberCloseTwice(t *testing.T) {
	addrs, err := FreeAddrs(2)
	require.NoError(t, err)
	m, err := Start(Config{Name: "twice", Dir: t.TempDir(), ClientURL: "http://" + addrs[0], PeerURL: "http://" + addrs[1]})
	require.NoError(t, err)
	require.NoError(t, m.WaitReady(context.Background()))
	m.Close()
	require.NotPanics(t, m.Close)
}
