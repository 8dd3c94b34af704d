package zk2topo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestAbandonedCampaignGoneOnReturn: a Campaign whose context ends while
// its candidate's create is answering returns only once its candidate
// and its value znode are gone from the server (the other Conn leads, so
// the candidate would wait): neither the next candidate nor a reader of
// the values meets a candidacy nobody owns. (A regression test of
// createEntryWith's wait: it passes on the code before it too, where the
// Campaign's own reads held it until the answer came.)
func TestAbandonedCampaignGoneOnReturn(t *testing.T) {
	ctx, root, px, slow, other, raw := slowAndOther(t, time.Minute)
	lead, err := other.NewLeaderParticipation("e", "leader")
	require.NoError(t, err)
	_, err = lead.Campaign(ctx, []byte("v0"))
	require.NoError(t, err)
	defer func() { _ = lead.Resign(context.Background()) }()
	dir := root + "/" + electionsDir + "/e"
	count := func() (cands, vals int) {
		names, _, err := raw.Children(dir)
		require.NoError(t, err)
		for _, n := range names {
			if n != valuesDir {
				cands++
			}
		}
		vs, _, err := raw.Children(dir + "/" + valuesDir)
		require.NoError(t, err)
		return cands, len(vs)
	}
	c0, v0 := count()

	slowp, err := slow.NewLeaderParticipation("e", "abandoned")
	require.NoError(t, err)
	px.SetDelay(500 * time.Millisecond)
	defer px.SetDelay(0)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := slowp.Campaign(cctx, []byte("v1"))
		errc <- err
	}()
	require.Eventually(t, func() bool {
		c, v := count()
		return c == c0+1 && v == v0+1
	}, 30*time.Second, 5*time.Millisecond, "the slow Campaign's candidate never showed")
	px.Blackhole()
	cancel()
	var err2 error
	select {
	case err2 = <-errc:
	case <-time.After(200 * time.Millisecond):
		px.SetDelay(100 * time.Millisecond)
		px.Heal()
		err2 = <-errc
	}
	require.Error(t, err2)
	require.True(t, topo.IsErrType(err2, topo.Interrupted) || topo.IsErrType(err2, topo.Timeout), "%v", err2)
	c, v := count()
	require.Equal(t, c0, c, "the abandoned Campaign returned before its candidate left the server")
	require.Equal(t, v0, v, "the abandoned Campaign left its value znode")
}
