package consultopo

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestRootInsideClaimsLeavesEntries: a Conn rooted at a reserved place
// (<root>/elections, where an election's key is the plain path "name",
// or inside a "locks" directory, where a leader's value key and the
// queue entries are) cannot rewrite or delete a key held by a session,
// by any write: Update and Txn's UpdateOp find it there (NodeExists),
// Delete and DeleteOp find no file (NoNode), as memorytopo, etcd2topo and
// zk2topo answer, and the key keeps its value, session and ModifyIndex.
// The leader's context stays live and its term and the lock holder's
// Check stay OK. Keys without a session there stay writable files.
func TestRootInsideClaimsLeavesEntries(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	kv := rawClient(t).KV()

	t.Run("election", func(t *testing.T) {
		root := testRoot(t)
		h := newTestConn(t, root)
		p, err := h.NewLeaderParticipation("e", "leader-id")
		require.NoError(t, err)
		defer p.Stop()
		lctx, err := p.Campaign(ctx, []byte("the-value"))
		require.NoError(t, err)
		ek, _, err := kv.Get(root+"/elections/e", &api.QueryOptions{RequireConsistent: true})
		require.NoError(t, err)
		require.NotNil(t, ek)

		q := newTestConn(t, root+"/elections")
		claimWritesRefused(t, ctx, kv, q, root+"/elections", "e")
		qv := newTestConn(t, root+"/elections/e/locks")
		claimWritesRefused(t, ctx, kv, qv, root+"/elections/e/locks", ek.Session)
		// A Conn rooted at an ancestor names the election key with an
		// "elections" segment that is not the first, which the path rule
		// does not refuse.
		parent, rel, _ := strings.Cut(root, "/")
		anc := newTestConn(t, parent)
		claimWritesRefused(t, ctx, kv, anc, parent, rel+"/elections/e")
		plainFilesWritable(t, ctx, q)
		plainFilesWritable(t, ctx, qv)

		// A key with the lock flags and no session (a lock api.Lock
		// released) is no file either.
		_, err = kv.Put(&api.KVPair{Key: root + "/elections/released", Flags: api.LockFlagValue, Value: []byte("r")}, nil)
		require.NoError(t, err)
		_, err = q.Update(ctx, "released", []byte("x"), nil)
		requireCode(t, err, topo.NodeExists)
		requireCode(t, q.Delete(ctx, "released", nil), topo.NoNode)

		require.NoError(t, lctx.Err(), "the leader's context stays live")
		f, err := p.Term()
		require.NoError(t, err)
		require.NoError(t, f.Check(ctx), "the leader keeps its term")
		id, err := p.GetCurrentLeaderID(ctx)
		require.NoError(t, err)
		require.Equal(t, "leader-id", id)
		l, err := p.Leader(ctx)
		require.NoError(t, err)
		require.Equal(t, "the-value", string(l.Value))
		require.NoError(t, p.Resign(ctx))
	})

	t.Run("lock", func(t *testing.T) {
		root := testRoot(t)
		h, w := newTestConn(t, root), newTestConn(t, root)
		_, err := h.Create(ctx, "d/f", []byte("0"))
		require.NoError(t, err)
		l, err := h.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		// A second contender waits in the queue beside the lock.
		got := make(chan error, 1)
		var wl topo.LockDescriptor
		go func() {
			var err error
			wl, err = w.Lock(ctx, "d", "waiter")
			got <- err
		}()
		var entry string
		require.Eventually(t, func() bool {
			keys, _, err := kv.Keys(root+"/d/locks/queue/", "", &api.QueryOptions{RequireConsistent: true})
			if err != nil || len(keys) == 0 {
				return false
			}
			entry = strings.TrimPrefix(keys[0], root+"/d/locks/")
			return true
		}, waitFor, 10*time.Millisecond, "the waiter's queue entry")

		q := newTestConn(t, root+"/d/locks")
		claimWritesRefused(t, ctx, kv, q, root+"/d/locks", entry)
		// The queue's tail, held by the waiter's session.
		claimWritesRefused(t, ctx, kv, q, root+"/d/locks", "tail")
		plainFilesWritable(t, ctx, q)

		require.NoError(t, l.Check(ctx), "the holder keeps its lock")
		select {
		case err := <-got:
			t.Fatalf("the waiter got the lock while it was held: %v", err)
		default:
		}
		require.NoError(t, l.Unlock(ctx))
		require.NoError(t, <-got, "the waiter gets the lock in turn")
		require.NoError(t, wl.Check(ctx))
		require.NoError(t, wl.Unlock(ctx))
	})
}

// claimWritesRefused tries every write on the key root/name, held by a
// session, through q (a Conn rooted at root): each is refused, and the
// key keeps its value, flags, session and ModifyIndex.
func claimWritesRefused(t *testing.T, ctx context.Context, kv *api.KV, q *Conn, root, name string) {
	t.Helper()
	key := root + "/" + name
	before, _, err := kv.Get(key, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.NotNil(t, before, key)
	require.NotEmpty(t, before.Session, "%s is held by a session", key)
	_, v, err := q.Get(ctx, name)
	require.NoError(t, err, "a held key reads as a file")

	_, err = q.Update(ctx, name, []byte("x"), nil)
	requireCode(t, err, topo.NodeExists)
	_, err = q.Update(ctx, name, []byte("x"), v)
	requireCode(t, err, topo.NodeExists)
	_, err = q.Update(ctx, name, make([]byte, maxTxnValue+1), nil)
	requireCode(t, err, topo.NodeExists)
	_, err = q.Update(ctx, name, make([]byte, maxTxnValue+1), v)
	requireCode(t, err, topo.NodeExists)
	_, err = q.Create(ctx, name, []byte("x"))
	requireCode(t, err, topo.NodeExists)
	requireCode(t, q.Delete(ctx, name, nil), topo.NoNode)
	requireCode(t, q.Delete(ctx, name, v), topo.NoNode)
	for _, op := range []topo.TxnOp{topo.UpdateOp(name, []byte("x"), nil), topo.UpdateOp(name, []byte("x"), v)} {
		_, err = q.Txn(ctx, topo.IfPresent(name), op)
		var te *topo.TxnError
		require.ErrorAs(t, err, &te, "Txn UpdateOp")
		require.Equal(t, 1, te.Index)
		requireCode(t, err, topo.NodeExists)
	}
	for _, op := range []topo.TxnOp{topo.DeleteOp(name, nil), topo.DeleteOp(name, v)} {
		_, err = q.Txn(ctx, op)
		var te *topo.TxnError
		require.ErrorAs(t, err, &te, "Txn DeleteOp")
		require.Equal(t, 0, te.Index)
		requireCode(t, err, topo.NoNode)
	}
	// An earlier failing condition is still the one reported.
	_, err = q.Txn(ctx, topo.IfAbsent(name), topo.DeleteOp(name, nil))
	var te *topo.TxnError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 0, te.Index)
	requireCode(t, err, topo.NodeExists)

	after, _, err := kv.Get(key, &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.NotNil(t, after, "%s was deleted", key)
	require.Equal(t, string(before.Value), string(after.Value), "%s was rewritten", key)
	require.Equal(t, before.Session, after.Session)
	require.Equal(t, before.Flags, after.Flags)
	require.Equal(t, before.ModifyIndex, after.ModifyIndex, "%s was written", key)
}

// plainFilesWritable checks that files (keys without a session) under q's
// root are written as anywhere else.
func plainFilesWritable(t *testing.T, ctx context.Context, q *Conn) {
	t.Helper()
	fv, err := q.Create(ctx, "file", []byte("1"))
	require.NoError(t, err)
	fv, err = q.Update(ctx, "file", []byte("2"), fv)
	require.NoError(t, err)
	_, err = q.Update(ctx, "file", []byte("3"), nil)
	require.NoError(t, err)
	_, err = q.Update(ctx, "file", make([]byte, maxTxnValue+1), nil)
	require.NoError(t, err)
	_, err = q.Txn(ctx, topo.UpdateOp("file", []byte("4"), nil))
	require.NoError(t, err)
	requireCode(t, q.Delete(ctx, "file", fv), topo.BadVersion)
	_, err = q.Update(ctx, "file", []byte("5"), fv)
	requireCode(t, err, topo.BadVersion)
	_, err = q.Update(ctx, "new", []byte("n"), nil)
	require.NoError(t, err, "an unconditional Update creates an absent file")
	_, err = q.Txn(ctx, topo.DeleteOp("new", nil), topo.UpdateOp("new2", []byte("n"), nil))
	require.NoError(t, err)
	require.NoError(t, q.Delete(ctx, "new2", nil))
	require.NoError(t, q.Delete(ctx, "file", nil))
	requireCode(t, q.Delete(ctx, "file", nil), topo.NoNode)
	_, err = q.Update(ctx, "file", []byte("6"), fv)
	requireCode(t, err, topo.NoNode)
}

// acquireAfterRead is a RoundTripper that, once the first consistent read
// of key has been answered, has another session acquire key before it
// hands the answer back: the guarded write then works from a read that
// no longer holds.
type acquireAfterRead struct {
	base    http.RoundTripper
	key     string
	acquire func()
	fired   atomic.Bool
}

func (a *acquireAfterRead) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.base.RoundTrip(r)
	if err == nil && r.Method == http.MethodGet && r.URL.Path == "/v1/kv/"+a.key && a.fired.CompareAndSwap(false, true) {
		a.acquire()
	}
	return resp, err
}

// TestGuardedWriteAtIndexRead: a key acquired by a session between a
// guarded write's read (which showed it absent, or a plain file) and its
// write is left alone: the write, made at the index read, fails, reads
// again and refuses the key (Update NodeExists, Delete NoNode). A plain
// set or delete after the read would have rewritten or deleted the held
// key.
func TestGuardedWriteAtIndexRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	raw := rawClient(t)
	kv := raw.KV()
	root := testRoot(t) + "/elections"
	sess, _, err := raw.Session().Create(&api.SessionEntry{Behavior: api.SessionBehaviorDelete, TTL: "60s"}, nil)
	require.NoError(t, err)
	defer raw.Session().Destroy(sess, nil)

	for _, tc := range []struct {
		name  string
		plain bool // a plain file there before the read
		write func(q *Conn, name string) error
		code  topo.ErrorCode
	}{
		{"update absent", false, func(q *Conn, name string) error { _, err := q.Update(ctx, name, []byte("x"), nil); return err }, topo.NodeExists},
		{"update file", true, func(q *Conn, name string) error { _, err := q.Update(ctx, name, []byte("x"), nil); return err }, topo.NodeExists},
		{"txn update", true, func(q *Conn, name string) error {
			_, err := q.Txn(ctx, topo.UpdateOp(name, []byte("x"), nil))
			return err
		}, topo.NodeExists},
		{"large update", true, func(q *Conn, name string) error {
			_, err := q.Update(ctx, name, make([]byte, maxTxnValue+1), nil)
			return err
		}, topo.NodeExists},
		{"delete file", true, func(q *Conn, name string) error { return q.Delete(ctx, name, nil) }, topo.NoNode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			key := root + "/" + name
			if tc.plain {
				_, err := kv.Put(&api.KVPair{Key: key, Value: []byte("file")}, nil)
				require.NoError(t, err)
			}
			q := newTestConn(t, root)
			tr := &acquireAfterRead{base: q.transport, key: key, acquire: func() {
				ok, _, err := kv.Acquire(&api.KVPair{Key: key, Value: []byte("held"), Flags: api.LockFlagValue, Session: sess}, nil)
				require.NoError(t, err)
				require.True(t, ok)
			}}
			client, err := api.NewClient(&api.Config{Address: agent.Addr(), HttpClient: &http.Client{Transport: tr}})
			require.NoError(t, err)
			q.client, q.kv = client, client.KV()

			requireCode(t, tc.write(q, name), tc.code)
			require.True(t, tr.fired.Load(), "the write read the key")
			pair, _, err := kv.Get(key, &api.QueryOptions{RequireConsistent: true})
			require.NoError(t, err)
			require.NotNil(t, pair, "the held key was deleted")
			require.Equal(t, "held", string(pair.Value), "the held key was rewritten")
			require.Equal(t, sess, pair.Session)
		})
	}
}
