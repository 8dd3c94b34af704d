package zk2topo

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestElectionsDirEphemeralOnlyWhileRunning: ZooKeeper keeps the
// top-level elections directory (persistent, as Vitess creates it) after
// its last candidate left. A full ListDir marks it Ephemeral while a
// candidate runs below it, as every backend does, and not once none does:
// it is then a plain directory that stays. Before, `topoctl ls -l /`
// showed it as "directory ephemeral" for good after `elect` ended.
func TestElectionsDirEphemeralOnlyWhileRunning(t *testing.T) {
	ctx := valuesCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	_, err := c.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
	elections := func() *topo.DirEntry {
		entries, err := c.ListDir(ctx, "", true)
		require.NoError(t, err)
		for i := range entries {
			if entries[i].Name == "elections" {
				return &entries[i]
			}
		}
		return nil
	}

	p, err := c.NewLeaderParticipation("elec", "id-1")
	require.NoError(t, err)
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	e := elections()
	require.NotNil(t, e, "listed while a candidate runs")
	require.Equal(t, topo.TypeDirectory, e.Type)
	require.True(t, e.Ephemeral, "Ephemeral while a candidate runs")

	p.Stop()
	if e := elections(); e != nil {
		require.Equal(t, topo.TypeDirectory, e.Type)
		require.False(t, e.Ephemeral, "no candidate runs: a persistent directory is not Ephemeral")
	}
}
