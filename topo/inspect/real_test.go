package inspect_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/connect"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/inspect"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// On each real server, a second client names the lock's holder and the
// election's leader, and the store's metadata of a file carries its key;
// then it sees a held lock's token and two waiters in order, and an
// election's three candidates with the leader first (checkQueues).
func TestRealBackends(t *testing.T) {
	for _, tc := range []struct {
		impl, root, keyField string
		start                func(testing.TB) string
		queues               queueStore
	}{
		{"etcd2", "/inspect", "key", etcdtest.Start, queueStore{sessions: true, waiterContents: true, ttl: true, nested: true}},
		{"zk2", "/inspect", "znode", zktest.Start, queueStore{sessions: true, waiterContents: true, since: true}},
		{"consul", "inspect", "key", consultest.Start, queueStore{sessions: true, nested: true}},
	} {
		t.Run(tc.impl, func(t *testing.T) {
			t.Parallel()
			addr := tc.start(t)
			var s connect.Settings
			open := func() topo.Conn {
				srv, err := s.Open(t.Context(), tc.impl, addr, tc.root)
				require.NoError(t, err)
				t.Cleanup(srv.Close)
				return srv.GlobalCell()
			}
			holder, other := open(), open()
			_, err := holder.Create(t.Context(), "ks/f", []byte("x"))
			require.NoError(t, err)

			_, err = inspect.LockHolder(t.Context(), other, "ks")
			assert.True(t, topo.IsErrType(err, topo.NoNode), "nobody holds it yet: %v", err)
			ld, err := holder.Lock(t.Context(), "ks", "holder on "+tc.impl)
			require.NoError(t, err)
			h, err := inspect.LockHolder(t.Context(), other, "ks")
			require.NoError(t, err)
			assert.Equal(t, "holder on "+tc.impl, h)
			locks, err := inspect.Locks(t.Context(), other, "")
			require.NoError(t, err)
			require.Len(t, locks, 1)
			assert.Equal(t, "ks", locks[0].Dir)
			assert.Equal(t, "holder on "+tc.impl, locks[0].Holder)
			assert.Equal(t, ld.Token(), locks[0].Token)
			require.NoError(t, ld.Unlock(t.Context()))
			checkHolderWithWaiter(t, holder, open(), other, other)

			lp, err := holder.NewLeaderParticipation("primary", "candidate-"+tc.impl)
			require.NoError(t, err)
			defer lp.Stop()
			_, err = lp.WaitForLeadership()
			require.NoError(t, err)
			l, err := inspect.Leader(t.Context(), other, "primary")
			require.NoError(t, err)
			assert.Equal(t, "candidate-"+tc.impl, l.ID)
			es, err := inspect.Elections(t.Context(), other)
			require.NoError(t, err)
			require.Len(t, es, 1)
			assert.Equal(t, "primary", es[0].Name)
			assert.Equal(t, "candidate-"+tc.impl, es[0].Leader.ID)

			meta, err := inspect.StoreMeta(t.Context(), other, "ks/f")
			require.NoError(t, err)
			require.NotEmpty(t, meta)
			assert.Equal(t, tc.keyField, meta[0].Name)
			assert.Contains(t, meta[0].Value, "ks/f")
			meta, err = inspect.StoreMeta(t.Context(), other, "ks/absent")
			require.NoError(t, err)
			assert.Nil(t, meta, "no key, no metadata")

			checkQueues(t, open, tc.queues)
			checkNestedElections(t, open(), open(), open(), tc.queues.nested)
		})
	}
}

// checkHolderWithWaiter checks that LockHolder through other names the
// holder, not a contender queued behind it, also when the holder's
// description is empty (queues: a Conn whose LockOf shows the waiter).
func checkHolderWithWaiter(t *testing.T, holder, waiter, queues, other topo.Conn) {
	t.Helper()
	for _, contents := range []string{"the holder", ""} {
		ld, err := holder.Lock(t.Context(), "ks", contents)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			l, err := waiter.Lock(ctx, "ks", "a waiter")
			if err == nil {
				err = l.Unlock(context.WithoutCancel(ctx))
			}
			done <- err
		}()
		require.Eventually(t, func() bool {
			l, err := inspect.LockOf(t.Context(), queues, "ks")
			return err == nil && len(l.Waiters) == 1
		}, 30*time.Second, 5*time.Millisecond, "the waiter queues")
		h, err := inspect.LockHolder(t.Context(), other, "ks")
		require.NoError(t, err)
		assert.Equal(t, contents, h, "LockHolder names the holder, not the waiter")
		cancel()
		require.Error(t, <-done, "the waiter gave up")
		require.NoError(t, ld.Unlock(t.Context()))
	}
}

// checkNestedElections checks that Elections finds elections with nested
// names ("grp/primary", "svc/a" beside "svc") with their leaders and
// candidates (where the backend's ListDir shows them: nested), and lists
// no entry of the layout as an election.
func checkNestedElections(t *testing.T, leader, waiter, other topo.Conn, nested bool) {
	t.Helper()
	lead := func(c topo.Conn, name, id string) topo.LeaderParticipation {
		lp, err := c.NewLeaderParticipation(name, id)
		require.NoError(t, err)
		t.Cleanup(lp.Stop)
		_, err = lp.Campaign(t.Context(), []byte("v-"+id))
		require.NoError(t, err)
		return lp
	}
	lead(leader, "grp/primary", "p1")
	lead(leader, "svc", "s1")
	lead(leader, "svc/a", "a1")
	w, err := waiter.NewLeaderParticipation("svc", "s2")
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	go func() { _, _ = w.WaitForLeadership() }()
	leaders := func() map[string]string {
		es, err := inspect.Elections(t.Context(), other)
		require.NoError(t, err)
		m := map[string]string{}
		for _, e := range es {
			m[e.Name] = fmt.Sprintf("%s/%d", e.Leader.ID, len(e.Candidates))
		}
		return m
	}
	require.Eventually(t, func() bool { return leaders()["svc"] == "s1/2" }, 30*time.Second, 5*time.Millisecond, "the waiter queues")
	got := leaders()
	if nested {
		assert.Equal(t, "p1/1", got["grp/primary"], "%v", got)
		assert.Equal(t, "a1/1", got["svc/a"], "%v", got)
	}
	for name, l := range got {
		switch name {
		case "grp", "grp/primary", "svc", "svc/a", "primary", "queued":
		default:
			t.Errorf("%s listed as an election (%s): %v", name, l, got)
		}
	}
}
