package consultopo

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/copy"
)

// recordingTransport records the method and path of the requests it
// sends, but for blocking queries and session renewals.
type recordingTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	reqs []string
}

func (r *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if blockingWait(req.URL.RawQuery) == 0 && !strings.HasPrefix(req.URL.Path, "/v1/session/renew/") {
		r.mu.Lock()
		r.reqs = append(r.reqs, req.Method+" "+req.URL.Path)
		r.mu.Unlock()
	}
	return r.base.RoundTrip(req)
}

// take returns the requests recorded since the last take.
func (r *recordingTransport) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

// withTransport has q send its requests through a RoundTripper made by
// wrap around q's own transport.
func withTransport(t *testing.T, q *Conn, rt http.RoundTripper) {
	t.Helper()
	client, err := api.NewClient(&api.Config{Address: agent.Addr(), HttpClient: &http.Client{Transport: rt}})
	require.NoError(t, err)
	q.client, q.kv = client, client.KV()
}

// TestGuardedRequestsOnlyAtReservedPlaces: file writes at ordinary places
// send exactly the requests they sent before the reserved-place guard
// (one transaction; a large value's PUT and read back), and a write is
// read first only where its full KV key has a "locks", "Lock" or
// "elections" segment: under a root at such a place, or at a path whose
// "elections" segment is not its first (the election key of a Conn
// rooted deeper).
func TestGuardedRequestsOnlyAtReservedPlaces(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	base := testRoot(t)
	for _, tc := range []struct {
		root, dir string
		guarded   bool
	}{
		{base, "d", false},
		{base, "d/election", false}, // "election", not "elections"
		{base, "d/mylocks", false},  // a segment is matched whole
		{base, "d/elections", true}, // an election key of a Conn at <base>/d
		{base + "/elections", "d", true},
		{base + "/x/locks", "d", true},
		{base + "/x/Lock", "d", true},
	} {
		t.Run(tc.root[len(base):]+"/"+tc.dir, func(t *testing.T) {
			q := newTestConn(t, tc.root)
			rec := &recordingTransport{base: q.transport}
			withTransport(t, q, rec)
			key := "/v1/kv/" + tc.root + "/" + tc.dir + "/f"
			read := []string{"GET " + key}
			if !tc.guarded {
				read = nil
			}
			txn := append(read, "PUT /v1/txn")
			p := tc.dir + "/f"

			v, err := q.Create(ctx, p, []byte("0"))
			require.NoError(t, err)
			require.Equal(t, []string{"PUT /v1/txn"}, rec.take(), "Create")
			_, err = q.Update(ctx, p, []byte("1"), v)
			require.NoError(t, err)
			require.Equal(t, txn, rec.take(), "Update with version")
			_, err = q.Update(ctx, p, []byte("2"), nil)
			require.NoError(t, err)
			require.Equal(t, txn, rec.take(), "Update")
			_, err = q.Txn(ctx, topo.UpdateOp(p, []byte("3"), nil))
			require.NoError(t, err)
			require.Equal(t, txn, rec.take(), "Txn")
			_, err = q.Update(ctx, p, make([]byte, maxTxnValue+1), nil)
			require.NoError(t, err)
			if tc.guarded {
				require.Equal(t, []string{"GET " + key, "PUT " + key, "GET " + key}, rec.take(), "large Update")
			} else {
				require.Equal(t, []string{"PUT " + key, "GET " + key}, rec.take(), "large Update")
			}
			require.NoError(t, q.Delete(ctx, p, nil))
			require.Equal(t, txn, rec.take(), "Delete")
			_, _, err = q.Get(ctx, p)
			requireCode(t, err, topo.NoNode)
			rec.take()
		})
	}
}

// heldKey has a session of its own acquire key with the lock flags and
// value "held"; the session is destroyed at the end of t.
func heldKey(t *testing.T, raw *api.Client, key string) string {
	t.Helper()
	sess, _, err := raw.Session().Create(&api.SessionEntry{Behavior: api.SessionBehaviorDelete, TTL: "60s"}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = raw.Session().Destroy(sess, nil) })
	ok, _, err := raw.KV().Acquire(&api.KVPair{Key: key, Value: []byte("held"), Flags: api.LockFlagValue, Session: sess}, nil)
	require.NoError(t, err)
	require.True(t, ok)
	return sess
}

// TestGuardedTxnMixed: a Txn mixing writes at a reserved place reports
// the first failing op (a refused lock key included) by its index and
// writes nothing; a versioned UpdateOp at the version the guard reads is
// made; and a transaction of plain files there returns the versions the
// keys have.
func TestGuardedTxnMixed(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	raw := rawClient(t)
	kv := raw.KV()
	root := testRoot(t) + "/elections"
	q := newTestConn(t, root)
	heldKey(t, raw, root+"/held")
	pv, err := q.Create(ctx, "plain", []byte("p"))
	require.NoError(t, err)

	state := func() map[string]string {
		pairs, _, err := kv.List(root+"/", &api.QueryOptions{RequireConsistent: true})
		require.NoError(t, err)
		out := map[string]string{}
		for _, p := range pairs {
			out[strings.TrimPrefix(p.Key, root+"/")] = fmt.Sprintf("%s@%d/%s", p.Value, p.ModifyIndex, p.Session)
		}
		return out
	}
	before := state()
	for _, tc := range []struct {
		name  string
		ops   []topo.TxnOp
		index int
		code  topo.ErrorCode
	}{
		{"delete held last", []topo.TxnOp{topo.CreateOp("new", []byte("n")), topo.UpdateOp("plain", []byte("x"), nil), topo.DeleteOp("held", nil)}, 2, topo.NoNode},
		{"update held first", []topo.TxnOp{topo.UpdateOp("held", []byte("x"), nil), topo.CreateOp("new", []byte("n")), topo.DeleteOp("plain", pv)}, 0, topo.NodeExists},
		{"versioned update held", []topo.TxnOp{topo.DeleteOp("plain", nil), topo.UpdateOp("held", []byte("x"), pv)}, 1, topo.NodeExists},
		{"delete absent after held", []topo.TxnOp{topo.IfPresent("held"), topo.UpdateOp("plain", []byte("x"), pv), topo.DeleteOp("absent", nil)}, 2, topo.NoNode},
		{"stale version before held", []topo.TxnOp{topo.UpdateOp("plain", []byte("x"), topo.NumericVersion(1)), topo.DeleteOp("held", nil)}, 0, topo.BadVersion},
		{"condition on held first", []topo.TxnOp{topo.DeleteOp("plain", nil), topo.IfAbsent("held"), topo.UpdateOp("held", []byte("x"), nil)}, 1, topo.NodeExists},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := q.Txn(ctx, tc.ops...)
			var te *topo.TxnError
			require.ErrorAs(t, err, &te)
			require.Equal(t, tc.index, te.Index, "%v", err)
			requireCode(t, err, tc.code)
			require.Equal(t, before, state(), "a refused transaction wrote")
		})
	}

	// At the version read: made.
	vs, err := q.Txn(ctx, topo.UpdateOp("plain", []byte("u"), pv), topo.CreateOp("new", []byte("n")), topo.UpdateOp("new2", []byte("n2"), nil))
	require.NoError(t, err)
	for i, p := range []string{"plain", "new", "new2"} {
		_, v, err := q.Get(ctx, p)
		require.NoError(t, err)
		require.Equal(t, v.String(), vs[i].String(), p)
	}
	_, err = q.Txn(ctx, topo.DeleteOp("plain", vs[0]), topo.DeleteOp("new", nil), topo.DeleteOp("new2", vs[2]))
	require.NoError(t, err)
	after := state()
	require.Equal(t, map[string]string{"held": before["held"]}, after)
}

// contendingTransport rewrites key through kv after each of the first
// limit consistent reads of it has been answered (before the answer is
// handed back), as a contending writer would; it counts the reads.
type contendingTransport struct {
	base  http.RoundTripper
	key   string
	kv    *api.KV
	limit int64
	reads atomic.Int64
}

func (c *contendingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil && r.Method == http.MethodGet && r.URL.Path == "/v1/kv/"+c.key {
		if n := c.reads.Add(1); n <= c.limit {
			if _, perr := c.kv.Put(&api.KVPair{Key: c.key, Value: fmt.Appendf(nil, "contender-%d", n)}, nil); perr != nil {
				panic(perr)
			}
		}
	}
	return resp, err
}

// TestGuardedWriteContention: a guarded write whose key changes after
// every read gives up after guardedAttempts reads with ResourceExhausted,
// having written nothing (the key holds the contender's last value); one
// whose key stops changing is made at the next attempt.
func TestGuardedWriteContention(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	kv := rawClient(t).KV()
	root := testRoot(t) + "/elections"
	writes := []struct {
		name  string
		write func(q *Conn, name string) error
	}{
		{"update", func(q *Conn, name string) error { _, err := q.Update(ctx, name, []byte("mine"), nil); return err }},
		{"large-update", func(q *Conn, name string) error {
			_, err := q.Update(ctx, name, append([]byte("mine"), make([]byte, maxTxnValue)...), nil)
			return err
		}},
		{"txn", func(q *Conn, name string) error {
			_, err := q.Txn(ctx, topo.CreateOp(name+"-other", []byte("o")), topo.UpdateOp(name, []byte("mine"), nil))
			return err
		}},
		{"delete", func(q *Conn, name string) error { return q.Delete(ctx, name, nil) }},
	}
	for _, w := range writes {
		for _, limit := range []int64{guardedAttempts, 3} {
			t.Run(fmt.Sprintf("%s/%d", w.name, limit), func(t *testing.T) {
				name := fmt.Sprintf("%s-%d", w.name, limit)
				key := root + "/" + name
				_, err := kv.Put(&api.KVPair{Key: key, Value: []byte("first")}, nil)
				require.NoError(t, err)
				q := newTestConn(t, root)
				tr := &contendingTransport{base: q.transport, key: key, kv: kv, limit: limit}
				withTransport(t, q, tr)
				err = w.write(q, name)
				pair, _, gerr := kv.Get(key, &api.QueryOptions{RequireConsistent: true})
				require.NoError(t, gerr)
				if limit >= guardedAttempts {
					requireCode(t, err, topo.ResourceExhausted)
					require.EqualValues(t, guardedAttempts, tr.reads.Load())
					require.NotNil(t, pair)
					require.Equal(t, fmt.Sprintf("contender-%d", guardedAttempts), string(pair.Value), "the write was made")
					other, _, gerr := kv.Get(key+"-other", nil)
					require.NoError(t, gerr)
					require.Nil(t, other, "a given-up transaction wrote its other op")
					return
				}
				require.NoError(t, err)
				reads := limit + 1
				if w.name == "large-update" {
					reads++ // its read back of the value written
				}
				require.EqualValues(t, reads, tr.reads.Load())
				if w.name == "delete" {
					require.Nil(t, pair)
				} else {
					require.NotNil(t, pair)
					require.True(t, strings.HasPrefix(string(pair.Value), "mine"))
				}
			})
		}
	}
}

// TestGuardedWritesRaceAcquires: guarded Updates and Deletes racing a
// session that keeps acquiring, releasing and deleting the key never
// change or delete it while it is held (each acquire reads its own value
// back before releasing), whatever they answer.
func TestGuardedWritesRaceAcquires(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	raw := rawClient(t)
	kv := raw.KV()
	root := testRoot(t) + "/elections"
	key := root + "/k"
	sess, _, err := raw.Session().Create(&api.SessionEntry{Behavior: api.SessionBehaviorDelete, TTL: "60s", LockDelay: time.Nanosecond}, nil)
	require.NoError(t, err)
	defer raw.Session().Destroy(sess, nil)

	var done atomic.Bool
	var wg sync.WaitGroup
	var made atomic.Int64
	for i := range 2 {
		q := newTestConn(t, root)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() {
				var err error
				if i == 0 {
					_, err = q.Update(ctx, "k", []byte("writer"), nil)
				} else {
					err = q.Delete(ctx, "k", nil)
				}
				switch {
				case err == nil:
					made.Add(1)
				case topo.IsErrType(err, topo.NodeExists), topo.IsErrType(err, topo.NoNode), topo.IsErrType(err, topo.ResourceExhausted):
				default:
					t.Errorf("writer %d: %v", i, err)
					return
				}
			}
		}()
	}
	for n := range 150 {
		value := fmt.Appendf(nil, "held-%d", n)
		ok, _, err := kv.Acquire(&api.KVPair{Key: key, Value: value, Flags: api.LockFlagValue, Session: sess}, nil)
		require.NoError(t, err)
		require.True(t, ok)
		pair, _, err := kv.Get(key, &api.QueryOptions{RequireConsistent: true})
		require.NoError(t, err)
		require.NotNil(t, pair, "a held key was deleted")
		require.Equal(t, string(value), string(pair.Value), "a held key was rewritten")
		require.Equal(t, sess, pair.Session)
		ok, _, err = kv.DeleteCAS(&api.KVPair{Key: key, ModifyIndex: pair.ModifyIndex}, nil)
		require.NoError(t, err)
		require.True(t, ok, "a held key was written")
	}
	done.Store(true)
	wg.Wait()
	t.Logf("guarded writes made between acquires: %d", made.Load())
}

// TestClaimsThroughReservedRoot: a Conn rooted at a reserved place keeps
// its own claims working through their APIs (Lock, LockName, an
// election with Proclaim, a semaphore), and its files beside them stay
// writable.
func TestClaimsThroughReservedRoot(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c := newTestConn(t, testRoot(t)+"/x/locks")
	v, err := c.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	v, err = c.Update(ctx, "d/f", []byte("1"), v)
	require.NoError(t, err)
	_, err = c.Txn(ctx, topo.IfHeld(l), topo.UpdateOp("d/f", []byte("2"), v))
	require.NoError(t, err)
	require.NoError(t, l.Check(ctx))
	require.NoError(t, l.Unlock(ctx))

	nl, err := c.LockName(ctx, "n", "named")
	require.NoError(t, err)
	require.NoError(t, nl.Check(ctx))
	require.NoError(t, nl.Unlock(ctx))

	p, err := c.NewLeaderParticipation("e", "me")
	require.NoError(t, err)
	defer p.Stop()
	lctx, err := p.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	require.NoError(t, p.Proclaim(ctx, []byte("v2")))
	got, err := p.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "v2", string(got.Value))
	require.NoError(t, lctx.Err())
	require.NoError(t, p.Resign(ctx))

	// A semaphore of capacity 2 (its record and contender files are
	// guarded writes there).
	sem, err := semaphore.New(c, "sem", 2, semaphore.Options{})
	require.NoError(t, err)
	a, err := sem.Acquire(ctx)
	require.NoError(t, err)
	b, err := sem.Acquire(ctx)
	require.NoError(t, err)
	_, err = sem.TryAcquire(ctx)
	require.Error(t, err, "a third permit of a semaphore of capacity 2")
	holders, err := sem.Holders(ctx)
	require.NoError(t, err)
	require.Len(t, holders, 2)
	require.NoError(t, a.Unlock(ctx))
	d, err := sem.TryAcquire(ctx)
	require.NoError(t, err)
	require.NoError(t, b.Unlock(ctx))
	require.NoError(t, d.Unlock(ctx))

	require.NoError(t, c.Delete(ctx, "d/f", nil))
}

// TestDeleteTreeLeavesClaims: rm -R (copy.DeleteTree, batched and one by
// one) of a tree holding a lock and an election, through a Conn rooted
// at an ancestor (where the election's key is a path like any other),
// deletes the files and leaves the held lock and election keys alone,
// even when the list of files names the election key: the lock stays
// held and the leader keeps its term.
func TestDeleteTreeLeavesClaims(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	kv := rawClient(t).KV()
	for _, batch := range []int{1, 10} {
		t.Run(fmt.Sprint("batch", batch), func(t *testing.T) {
			root := testRoot(t)
			h := newTestConn(t, root)
			for _, p := range []string{"d/a", "d/b", "d/e/c"} {
				_, err := h.Create(ctx, p, []byte(p))
				require.NoError(t, err)
			}
			l, err := h.Lock(ctx, "d", "holder")
			require.NoError(t, err)
			p, err := h.NewLeaderParticipation("e", "leader")
			require.NoError(t, err)
			defer p.Stop()
			lctx, err := p.Campaign(ctx, []byte("v"))
			require.NoError(t, err)

			parent, rel, _ := strings.Cut(root, "/")
			anc := newTestConn(t, parent)
			files, err := anc.List(ctx, rel+"/")
			require.NoError(t, err)
			require.Len(t, files, 3, "List lists a claims key")
			files = append(files, topo.KVInfo{Path: rel + "/elections/e"})
			n, err := copy.DeleteTree(ctx, anc, files, copy.ExecOptions{Batch: batch})
			require.NoError(t, err)
			require.Equal(t, 3, n)
			_, err = anc.List(ctx, rel+"/")
			requireCode(t, err, topo.NoNode) // no file left
			for _, key := range []string{root + "/d/Lock", root + "/elections/e"} {
				pair, _, err := kv.Get(key, &api.QueryOptions{RequireConsistent: true})
				require.NoError(t, err)
				require.NotNil(t, pair, "%s was deleted", key)
				require.NotEmpty(t, pair.Session, key)
			}
			require.NoError(t, l.Check(ctx))
			require.NoError(t, lctx.Err())
			f, err := p.Term()
			require.NoError(t, err)
			require.NoError(t, f.Check(ctx))
			require.NoError(t, l.Unlock(ctx))
			require.NoError(t, p.Resign(ctx))
		})
	}
}

// TestGuardedWriteSizes: guarded writes of values at the size limits (the
// largest a transaction carries, the smallest that goes through the plain
// KV endpoint, topo.MaxValueSize) are made and read back whole, with the
// version the key has, on a plain file at a reserved place; on a held
// key they are refused and leave it alone; a value above
// topo.MaxValueSize is InvalidArgument before any request.
func TestGuardedWriteSizes(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	raw := rawClient(t)
	root := testRoot(t) + "/elections"
	q := newTestConn(t, root)
	heldKey(t, raw, root+"/held")
	before, _, err := raw.KV().Get(root+"/held", &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	for _, size := range []int{maxTxnValue, maxTxnValue + 1, topo.MaxValueSize} {
		value := make([]byte, size)
		for i := range value {
			value[i] = byte('a' + size%26 + i%7)
		}
		for _, txn := range []bool{false, true} {
			if txn && size > maxTxnValue {
				continue
			}
			t.Run(fmt.Sprint(size, "/txn=", txn), func(t *testing.T) {
				write := func(p string, version topo.Version) (topo.Version, error) {
					if !txn {
						return q.Update(ctx, p, value, version)
					}
					vs, err := q.Txn(ctx, topo.UpdateOp(p, value, version))
					if err != nil {
						return nil, err
					}
					return vs[0], nil
				}
				p := fmt.Sprint("f", size, txn)
				v, err := write(p, nil)
				require.NoError(t, err)
				v, err = write(p, v) // at the version the guard reads
				require.NoError(t, err)
				got, gv, err := q.Get(ctx, p)
				require.NoError(t, err)
				require.Equal(t, v.String(), gv.String())
				require.Equal(t, value, got)
				_, err = write("held", nil)
				requireCode(t, err, topo.NodeExists)
				require.NoError(t, q.Delete(ctx, p, v))
			})
		}
	}
	_, err = q.Update(ctx, "f", make([]byte, topo.MaxValueSize+1), nil)
	requireCode(t, err, topo.InvalidArgument)
	after, _, err := raw.KV().Get(root+"/held", &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.Equal(t, before.ModifyIndex, after.ModifyIndex, "the held key was written")
}
