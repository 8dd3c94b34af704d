package test

import (
	"context"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testDeadContextClaims: claim calls given an ended context return its
// code and change nothing: Campaign of a participant that does not lead
// queues nothing (another Conn's participant leads at once), Proclaim of
// the leader leaves its value, Leader, Observe and
// ResumeLeaderParticipation write nothing, a lock's Check says the
// context's code and the lock stays held.
func testDeadContextClaims(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c, r := s.conn(), s.conn()
	mustCreate(t, ctx, c, "d/f", "x")
	for _, dc := range []struct {
		ctx  context.Context
		code topo.ErrorCode
	}{{cancelledCtx(t), topo.Interrupted}, {expiredCtx(t), topo.Timeout}} {
		dead, code := dc.ctx, dc.code
		before := takeSnapshot(t, ctx, r)
		p := participate(t, c, "el", "id")
		_, err := p.Campaign(dead, []byte("v"))
		requireCode(t, err, code, "Campaign with an ended context")
		o := participate(t, r, "el", "other")
		_, err = o.Campaign(shortCtx(t, longWait), []byte("o1"))
		require.NoError(t, err, "another participant after a Campaign with an ended context")
		requireCode(t, o.Proclaim(dead, []byte("o2")), code, "Proclaim with an ended context")
		ld, err := p.Leader(ctx)
		require.NoError(t, err)
		require.Equal(t, "o1", string(ld.Value), "the value after a Proclaim with an ended context")
		_, err = p.Leader(dead)
		requireCode(t, err, code, "Leader with an ended context")
		if ch, err := p.Observe(dead); err != nil {
			requireCode(t, err, code, "Observe with an ended context")
		} else {
			requireClosedEventually(t, ch, "Observe with an ended context")
		}
		info, err := o.ResumeInfo()
		require.NoError(t, err)
		_, err = s.conn().ResumeLeaderParticipation(dead, "el", "other", info)
		requireCode(t, err, code, "ResumeLeaderParticipation with an ended context")
		ld, err = p.Leader(ctx)
		require.NoError(t, err)
		require.Equal(t, "other", ld.ID)
		o.Stop()
		p.Stop()

		l := mustLock(t, ctx, c, "d", "h")
		requireCode(t, l.Check(dead), code, "Check with an ended context")
		require.NoError(t, l.Check(ctx))
		_, err = r.TryLock(ctx, "d", "probe")
		requireCode(t, err, topo.NodeExists, "TryLock while held")
		require.NoError(t, l.Unlock(ctx))
		after := takeSnapshot(t, ctx, r)
		require.Equal(t, before.files, after.files)
	}
}
