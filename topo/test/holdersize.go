package test

import (
	"fmt"
	"strings"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testHolderDescriptionSize: a lock's contents and a participant id of
// 300 KiB are taken by every lock call and by WaitForLeadership and
// Campaign; at topo.MaxValueSize they are taken, or refused with
// InvalidArgument (Consul: its transaction body limit) leaving nothing
// behind: no file, and nobody queued (another Conn's TryLock takes the
// lock at once, and its participant leads).
func testHolderDescriptionSize(s *store) {
	t, ctx, c, r := s.t, ctxFor(s.t), s.conn(), s.conn()
	mustCreate(t, ctx, c, "d/f", "x")
	before := takeSnapshot(t, ctx, r)
	for _, n := range []int{300 << 10, topo.MaxValueSize} {
		big := strings.Repeat("h", n)
		for _, k := range lockKinds {
			what := fmt.Sprintf("%s with %d bytes of contents", k.name, n)
			l, err := k.lock(ctx, c, "d", big)
			if err == nil {
				require.NoError(t, l.Unlock(ctx), what)
			} else {
				require.Lessf(t, 300<<10, n, "%s: %v", what, err)
				requireCode(t, err, topo.InvalidArgument, what)
			}
			l2, err := r.TryLock(ctx, "d", "probe")
			require.NoErrorf(t, err, "TryLock by another Conn after %s", what)
			require.NoError(t, l2.Unlock(ctx))
		}
		for _, campaign := range []bool{false, true} {
			what := fmt.Sprintf("a participant id of %d bytes (Campaign: %v)", n, campaign)
			p, err := c.NewLeaderParticipation("el", big)
			require.NoError(t, err, what)
			if campaign {
				_, err = p.Campaign(ctx, []byte("v"))
			} else {
				_, err = p.WaitForLeadership()
			}
			if err == nil {
				o, err := r.NewLeaderParticipation("el", "observer")
				require.NoError(t, err)
				id, err := o.GetCurrentLeaderID(ctx)
				require.NoError(t, err)
				require.Equal(t, big, id, what)
			} else {
				require.Lessf(t, 300<<10, n, "%s: %v", what, err)
				requireCode(t, err, topo.InvalidArgument, what)
			}
			p.Stop()
			o := participate(t, r, "el", "other")
			_, err = o.WaitForLeadership()
			require.NoErrorf(t, err, "another Conn's participant after %s", what)
			o.Stop()
		}
	}
	after := takeSnapshot(t, ctx, r)
	require.Equal(t, before.files, after.files, "large holder descriptions wrote files")
}
