package test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TermEnd ends, behind a leader's back, the term it holds in election on
// c (through a raw client of the store, never through c): DeleteTerm
// deletes the term's key, LoseSession ends the session or lease the term
// is on. Neither waits for c to notice.
type TermEnd struct {
	DeleteTerm  func(t *testing.T, c topo.Conn, election string)
	LoseSession func(t *testing.T, c topo.Conn, election string)
}

// termLook is a leader's first look at its leadership context (or term):
// it returns once that look shows the term ended, failing t if it never
// does.
type termLook func(t *testing.T, lctx context.Context, p topo.LeaderParticipation, c topo.Conn, file string)

// termLooks are the first looks a leader may take at a term that already
// ended in the store: each must see the end (a driver that watches a term
// only once it is looked at must start that watch on any of them).
var termLooks = map[string]termLook{
	"Done": func(t *testing.T, lctx context.Context, _ topo.LeaderParticipation, _ topo.Conn, _ string) {
		requireClosed(t, lctx.Done(), "Done")
	},
	"Err": func(t *testing.T, lctx context.Context, _ topo.LeaderParticipation, _ topo.Conn, _ string) {
		require.True(t, eventually(func() bool { return lctx.Err() != nil }), "Err stays nil")
	},
	"Cause": func(t *testing.T, lctx context.Context, _ topo.LeaderParticipation, _ topo.Conn, _ string) {
		require.True(t, eventually(func() bool { return context.Cause(lctx) != nil }), "Cause stays nil")
	},
	"WithCancel": func(t *testing.T, lctx context.Context, _ topo.LeaderParticipation, _ topo.Conn, _ string) {
		d, cancel := context.WithCancel(lctx)
		defer cancel()
		requireClosed(t, d.Done(), "a derived context's Done")
	},
	"AfterFunc": func(t *testing.T, lctx context.Context, _ topo.LeaderParticipation, _ topo.Conn, _ string) {
		ran := make(chan struct{})
		context.AfterFunc(lctx, func() { close(ran) })
		requireClosed(t, ran, "AfterFunc")
	},
	"Term and guarded write": func(t *testing.T, lctx context.Context, p topo.LeaderParticipation, c topo.Conn, file string) {
		f, err := p.Term()
		if err == nil {
			_, err = topo.GuardedUpdate(t.Context(), c, f, file, []byte("stale"), nil)
			requireOneOf(t, err, "a guarded write by an ended term", topo.LockLost, topo.Interrupted)
			requireClosed(t, f.Done(), "the term's Done")
		} else {
			requireOneOf(t, err, "Term of an ended term", topo.NotLeader)
		}
		requireDone(t, lctx, "the leadership context after Term")
	},
	"Proclaim": func(t *testing.T, lctx context.Context, p topo.LeaderParticipation, _ topo.Conn, _ string) {
		requireOneOf(t, p.Proclaim(t.Context(), []byte("stale")), "Proclaim of an ended term", topo.NotLeader)
		requireDone(t, lctx, "the leadership context after Proclaim")
	},
}

// TermEndedBeforeFirstLook: a term ends (its key deleted behind the
// leader, its session lost, Stop; with or without a successor granted
// meanwhile) before its leader ever used its leadership context or term;
// whatever the leader's first look (Done, Err, Cause, a derived context,
// AfterFunc, Term and a guarded write, Proclaim; Campaign with a new
// value, which gets a new term publishing it), it sees the term ended:
// the context ends, a guarded write by the term is refused and none is
// applied, and a successor's context stays live and its guarded write
// applies. For backends whose driver watches a term only once it is
// looked at (claims.Monitor); newConn opens a Conn closed at test end.
func TermEndedBeforeFirstLook(t *testing.T, newConn func(t *testing.T) topo.Conn, end TermEnd) {
	ends := map[string]func(t *testing.T, c topo.Conn, p topo.LeaderParticipation, election string){
		"key deleted": func(t *testing.T, c topo.Conn, _ topo.LeaderParticipation, election string) {
			end.DeleteTerm(t, c, election)
		},
		"session lost": func(t *testing.T, c topo.Conn, _ topo.LeaderParticipation, election string) {
			end.LoseSession(t, c, election)
		},
		"Stop": func(_ *testing.T, _ topo.Conn, p topo.LeaderParticipation, _ string) { p.Stop() },
	}
	n := 0
	for endName, endTerm := range ends {
		for _, successor := range []bool{false, true} {
			for lookName, look := range termLooks {
				n++
				name := fmt.Sprintf("%s/successor=%v/%s", endName, successor, lookName)
				election := fmt.Sprintf("look%d", n)
				t.Run(name, func(t *testing.T) {
					ctx := t.Context()
					old, next := newConn(t), newConn(t)
					file := election + "-f"
					v := mustCreate(t, ctx, old, file, "0")
					p := participate(t, old, election, "old")
					lctx, err := p.WaitForLeadership()
					require.NoError(t, err)
					endTerm(t, old, p, election)
					var lctx2 context.Context
					var p2 topo.LeaderParticipation
					if successor {
						p2 = participate(t, next, election, "next")
						lctx2, err = p2.WaitForLeadership()
						require.NoError(t, err)
					}
					look(t, lctx, p, old, file)
					require.Error(t, lctx.Err(), "the ended term's context")
					_, err = p.Term()
					requireCode(t, err, topo.NotLeader, "Term once the end was seen")
					requireFile(t, ctx, old, file, "0", v)
					if successor {
						require.NoError(t, lctx2.Err(), "the successor's context")
						f2, err := p2.Term()
						require.NoError(t, err)
						_, err = topo.GuardedUpdate(ctx, next, f2, file, []byte("next"), v)
						require.NoError(t, err, "the successor's guarded write")
					}
				})
			}
		}
	}
	// Campaign as the first look: a leader that campaigns again, with a
	// new value, on a term the store took away gets a new term that
	// publishes the value, never the ended term's context as a success.
	for _, endName := range []string{"key deleted", "session lost"} {
		n++
		election := fmt.Sprintf("look%d", n)
		t.Run(endName+"/Campaign", func(t *testing.T) {
			ctx := t.Context()
			c := newConn(t)
			p := participate(t, c, election, "old")
			lctx, err := p.Campaign(ctx, []byte("v1"))
			require.NoError(t, err)
			ends[endName](t, c, p, election)
			lctx2, err := p.Campaign(ctx, []byte("v2"))
			require.NoError(t, err)
			require.Error(t, lctx.Err(), "the ended term's context after Campaign")
			require.NoError(t, lctx2.Err(), "Campaign returned an ended context")
			l, err := p.Leader(ctx)
			require.NoError(t, err)
			require.Equal(t, "old", l.ID)
			require.Equal(t, "v2", string(l.Value), "the value Campaign published")
		})
	}
}
