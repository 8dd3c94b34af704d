package test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// revisionOrder checks topo.WatchData.Revision along one channel: the
// non-zero ones never decrease, and a value of a change made after the
// previous value was received (fresh) carries a greater one, since every
// change up to the previous Revision had been delivered. A backend that
// reports no revision (0 throughout) passes.
type revisionOrder struct {
	t    *testing.T
	what string
	last int64
}

func (o *revisionOrder) see(wd *topo.WatchData, fresh bool) {
	o.t.Helper()
	if wd.Revision == 0 {
		return
	}
	if fresh && o.last != 0 {
		require.Greaterf(o.t, wd.Revision, o.last, "%s: the Revision of a later change", o.what)
	}
	require.GreaterOrEqualf(o.t, wd.Revision, o.last, "%s: Revision went back", o.what)
	o.last = wd.Revision
}

// testWatchRevision: a Watch's Revision grows with each new value (where
// the backend reports revisions).
func testWatchRevision(s *store) {
	t, ctx, c, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()

	mustCreate(t, ctx, c, "w/f", "v0")
	cur, ch := mustWatch(t, ctx, c, "w/f", "Watch(w/f)")
	o := &revisionOrder{t: t, what: "Watch(w/f)"}
	o.see(cur, true)
	for i := 1; i <= 3; i++ {
		want := fmt.Sprintf("v%d", i)
		mustUpdate(t, ctx, c2, "w/f", want, nil)
		o.see(waitWatchValue(t, ch, want, "Watch after an update"), true)
	}
}

// testWatchRecursiveRevision: WatchRecursive's Revision never goes back,
// and grows with each change made after the previous event was received
// (where the backend reports revisions), a deletion included.
func testWatchRecursiveRevision(s *store) {
	t, ctx, c, c2 := s.t, ctxFor(s.t), s.conn(), s.conn()

	mustCreate(t, ctx, c, "r/a", "a0")
	mustCreate(t, ctx, c, "r/b", "b0")
	init, ch := mustWatchRecursive(t, ctx, c, "r/", "WatchRecursive(r/)")
	o := &revisionOrder{t: t, what: "WatchRecursive(r/)"}
	for _, wd := range init {
		o.see(&wd.WatchData, false)
	}
	for i := 1; i <= 2; i++ {
		for _, p := range []string{"r/a", "r/b"} {
			want := fmt.Sprintf("%s%d", p, i)
			mustUpdate(t, ctx, c2, p, want, nil)
			wd := waitRecursive(t, ch, "r/", "update event", func(wd *topo.WatchDataRecursive) bool {
				if wd.Path == p && string(wd.Contents) == want {
					return true
				}
				o.see(&wd.WatchData, false)
				return false
			})
			o.see(&wd.WatchData, true)
		}
	}
	require.NoError(t, c2.Delete(ctx, "r/a", nil))
	wd := waitRecursive(t, ch, "r/", "delete event", func(wd *topo.WatchDataRecursive) bool {
		if wd.Path == "r/a" && topo.IsErrType(wd.Err, topo.NoNode) {
			return true
		}
		o.see(&wd.WatchData, false)
		return false
	})
	o.see(&wd.WatchData, true)
}
