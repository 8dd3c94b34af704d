package etcd2topo

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// nativePrefix returns a native election prefix no other test uses,
// outside every test root.
func nativePrefix() string { return fmt.Sprintf("/native%d", rootCount.Add(1)) }

// testCtx is a context that bounds a whole test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// etcdElection returns a concurrency.Election on prefix with a session of
// its own (TTL 5 s), closed at test end.
func etcdElection(t *testing.T, cli *clientv3.Client, prefix string) (*concurrency.Session, *concurrency.Election) {
	t.Helper()
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s, concurrency.NewElection(s, prefix)
}

// native opens a native participation through c, stopped at test end.
func native(t *testing.T, c *Conn, prefix, id string) topo.LeaderParticipation {
	t.Helper()
	p, err := c.NewNativeElection(prefix, id)
	require.NoError(t, err)
	t.Cleanup(p.Stop)
	return p
}

// waitKeys polls until prefix/ holds n keys.
func waitNativeKeys(t *testing.T, cli *clientv3.Client, prefix string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := cli.Get(context.Background(), prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == n
	}, time.Minute, time.Millisecond)
}

// nextLeader reads obs until it sends a Leader matching ok.
func nextLeader(t *testing.T, obs <-chan topo.Leader, ok func(topo.Leader) bool) topo.Leader {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, open := <-obs:
			require.True(t, open, "Observe closed")
			if ok(l) {
				return l
			}
		case <-timeout:
			t.Fatal("Observe did not send the expected leader")
		}
	}
}

// nextEtcdLeader reads a concurrency Observe channel until the leader
// value is want, and returns the leader's key. Observe sends
// GetResponse values with etcd client v3.6 and pointers with v3.7: R is
// either.
func nextEtcdLeader[R any](t *testing.T, obs <-chan R, want string) *mvccpb.KeyValue {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case r, open := <-obs:
			require.True(t, open, "concurrency Observe closed")
			if kvs := observedKvs(t, &r); len(kvs) > 0 && string(kvs[0].Value) == want {
				return kvs[0]
			}
		case <-timeout:
			t.Fatalf("concurrency Observe did not see %q", want)
		}
	}
}

// observedKvs returns the keys of what Observe sent, given a pointer to
// it.
func observedKvs(t *testing.T, p any) []*mvccpb.KeyValue {
	switch r := p.(type) {
	case *clientv3.GetResponse: // client v3.6
		return r.Kvs
	case **clientv3.GetResponse: // client v3.7
		return (*r).Kvs
	}
	t.Fatalf("concurrency Observe sent a %T", p)
	return nil
}

func hexID(id clientv3.LeaseID) string { return fmt.Sprintf("%x", int64(id)) }

// TestNativeTopokitLeadsEtcdWaits: topokit leads; a concurrency.Election
// campaigner waits, sees topokit's key and value through Leader and
// Observe, sees a Proclaim, and takes over when topokit resigns.
func TestNativeTopokitLeadsEtcdWaits(t *testing.T) {
	ctx := testCtx(t)
	c := openConn(t, serverAddr, newRoot())
	cli := rawClient(t, serverAddr)
	prefix := nativePrefix()
	p := native(t, c, prefix, "tk")

	lctx, err := p.Campaign(ctx, []byte("tk-1"))
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)
	me, err := p.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, []byte("tk-1"), me.Value)
	require.Equal(t, term.Token(), me.Token)

	// The layout: <prefix>/<lease hex> holding the value, on the lease.
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	kv := resp.Kvs[0]
	require.Equal(t, prefix+"/"+hexID(clientv3.LeaseID(kv.Lease)), string(kv.Key))
	require.Equal(t, "tk-1", string(kv.Value))
	require.Equal(t, me.ID, hexID(clientv3.LeaseID(kv.Lease)))
	require.Equal(t, kv.CreateRevision, term.Token())
	require.Contains(t, c.leaseIDs(), clientv3.LeaseID(kv.Lease))

	s2, e2 := etcdElection(t, cli, prefix)
	won := make(chan error, 1)
	go func() { won <- e2.Campaign(ctx, "etcd-1") }()
	waitNativeKeys(t, cli, prefix, 2)

	l, err := e2.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "tk-1", string(l.Kvs[0].Value))
	require.Equal(t, string(kv.Key), string(l.Kvs[0].Key))
	eobs := e2.Observe(ctx)
	nextEtcdLeader(t, eobs, "tk-1")

	require.NoError(t, p.Proclaim(ctx, []byte("tk-2")))
	r := nextEtcdLeader(t, eobs, "tk-2")
	require.Equal(t, term.Token(), r.CreateRevision, "Proclaim keeps the term")
	select {
	case err := <-won:
		t.Fatalf("concurrency.Election won (%v) while topokit leads", err)
	default:
	}
	require.NoError(t, lctx.Err())

	obs, err := p.Observe(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Resign(ctx))
	require.Error(t, lctx.Err(), "Resign ends the leadership context")
	require.NoError(t, <-won)
	require.Greater(t, e2.Rev(), term.Token())
	got := nextLeader(t, obs, func(l topo.Leader) bool { return l.ID != me.ID })
	require.Equal(t, topo.Leader{ID: hexID(s2.Lease()), Value: []byte("etcd-1"), Token: e2.Rev()}, got)
	id, err := p.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	require.Equal(t, hexID(s2.Lease()), id)
	_, err = p.Term()
	require.True(t, topo.IsErrType(err, topo.NotLeader), "%v", err)
	require.True(t, topo.IsErrType(p.Proclaim(ctx, []byte("x")), topo.NotLeader))
}

// TestNativeEtcdLeadsTopokitWaits: a concurrency.Election leads; topokit's
// Campaign waits, its Leader and Observe report the native leader's key
// and value and its Proclaims; topokit takes over when it resigns, and a
// Campaign whose ctx ends withdraws.
func TestNativeEtcdLeadsTopokitWaits(t *testing.T) {
	ctx := testCtx(t)
	c := openConn(t, serverAddr, newRoot())
	cli := rawClient(t, serverAddr)
	prefix := nativePrefix()
	s1, e1 := etcdElection(t, cli, prefix)
	require.NoError(t, e1.Campaign(ctx, "etcd-a"))
	native1 := topo.Leader{ID: hexID(s1.Lease()), Value: []byte("etcd-a"), Token: e1.Rev()}

	p := native(t, c, prefix, "tk")
	l, err := p.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, native1, l)
	obs, err := p.Observe(ctx)
	require.NoError(t, err)
	require.Equal(t, native1, <-obs)

	// A Campaign whose ctx ends withdraws its key.
	cctx, cancel := context.WithCancel(ctx)
	failed := make(chan error, 1)
	go func() {
		_, err := p.Campaign(cctx, []byte("early"))
		failed <- err
	}()
	waitNativeKeys(t, cli, prefix, 2)
	cancel()
	require.True(t, topo.IsErrType(<-failed, topo.Interrupted))
	waitNativeKeys(t, cli, prefix, 1)

	type result struct {
		ctx context.Context
		err error
	}
	won := make(chan result, 1)
	go func() {
		lctx, err := p.Campaign(ctx, []byte("tk-1"))
		won <- result{lctx, err}
	}()
	waitNativeKeys(t, cli, prefix, 2)
	require.NoError(t, e1.Proclaim(ctx, "etcd-b"))
	got := nextLeader(t, obs, func(l topo.Leader) bool { return string(l.Value) == "etcd-b" })
	require.Equal(t, topo.Leader{ID: native1.ID, Value: []byte("etcd-b"), Token: native1.Token}, got)
	select {
	case r := <-won:
		t.Fatalf("topokit won (%v) while concurrency.Election leads", r.err)
	default:
	}
	_, err = p.Term()
	require.True(t, topo.IsErrType(err, topo.NotLeader))
	require.True(t, topo.IsErrType(p.Proclaim(ctx, []byte("x")), topo.NotLeader))

	eobs := e1.Observe(ctx)
	require.NoError(t, e1.Resign(ctx))
	r := <-won
	require.NoError(t, r.err)
	term, err := p.Term()
	require.NoError(t, err)
	require.Greater(t, term.Token(), native1.Token)
	got = nextLeader(t, obs, func(l topo.Leader) bool { return l.ID != native1.ID })
	require.Equal(t, []byte("tk-1"), got.Value)
	require.Equal(t, term.Token(), got.Token)
	nextEtcdLeader(t, eobs, "tk-1")
	require.NoError(t, p.Proclaim(ctx, []byte("tk-2")))
	er := nextEtcdLeader(t, eobs, "tk-2")
	require.Equal(t, term.Token(), er.CreateRevision)
	require.NoError(t, term.Check(ctx))
	require.NoError(t, r.ctx.Err())
}

// TestNativeNeverTwoLeaders: two topokit participants (on two Conns) and
// two concurrency.Election campaigners campaign and resign in a loop; an
// in-process counter of leaders never exceeds one, and every term's token
// is greater than the one before.
func TestNativeNeverTwoLeaders(t *testing.T) {
	ctx := testCtx(t)
	cli := rawClient(t, serverAddr)
	prefix := nativePrefix()
	const rounds = 15
	var (
		owners atomic.Int32
		mu     sync.Mutex
		last   int64
		terms  int
	)
	enter := func(who string, token int64) {
		if n := owners.Add(1); n != 1 {
			t.Errorf("%s: %d leaders at once", who, n)
		}
		mu.Lock()
		if token <= last {
			t.Errorf("%s: token %d after %d", who, token, last)
		}
		last = token
		terms++
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := range 2 {
		c := openConn(t, serverAddr, newRoot())
		p := native(t, c, prefix, fmt.Sprintf("tk%d", i))
		wg.Go(func() {
			for j := range rounds {
				lctx, err := p.Campaign(ctx, fmt.Appendf(nil, "tk%d-%d", i, j))
				if err != nil {
					t.Errorf("topokit %d: %v", i, err)
					return
				}
				term, err := p.Term()
				if err != nil {
					t.Errorf("topokit %d: term: %v", i, err)
					return
				}
				enter("topokit", term.Token())
				if err := p.Proclaim(ctx, []byte("proclaimed")); err != nil {
					t.Errorf("topokit %d: proclaim: %v", i, err)
				}
				if lctx.Err() != nil {
					t.Errorf("topokit %d: leadership ended while held", i)
				}
				owners.Add(-1)
				if err := p.Resign(ctx); err != nil {
					t.Errorf("topokit %d: resign: %v", i, err)
					return
				}
			}
		})
	}
	for i := range 2 {
		_, e := etcdElection(t, cli, prefix)
		wg.Go(func() {
			for j := range rounds {
				if err := e.Campaign(ctx, fmt.Sprintf("etcd%d-%d", i, j)); err != nil {
					t.Errorf("etcd %d: %v", i, err)
					return
				}
				enter("etcd", e.Rev())
				if err := e.Proclaim(ctx, "proclaimed"); err != nil {
					t.Errorf("etcd %d: proclaim: %v", i, err)
				}
				owners.Add(-1)
				if err := e.Resign(ctx); err != nil {
					t.Errorf("etcd %d: resign: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, 4*rounds, terms)
}

// TestNativeLeaseLossHandsOver: the lease of a topokit leader is revoked
// behind its back; its leadership context ends, its term fails Check and
// Proclaim, and a concurrency.Election waiter takes over.
func TestNativeLeaseLossHandsOver(t *testing.T) {
	ctx := testCtx(t)
	c := openConn(t, serverAddr, newRoot())
	cli := rawClient(t, serverAddr)
	prefix := nativePrefix()
	p := native(t, c, prefix, "tk")
	lctx, err := p.Campaign(ctx, []byte("tk"))
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)

	_, e := etcdElection(t, cli, prefix)
	won := make(chan error, 1)
	go func() { won <- e.Campaign(ctx, "etcd") }()
	waitNativeKeys(t, cli, prefix, 2)

	expireSession(t, c)
	<-lctx.Done()
	<-term.Done()
	require.NoError(t, <-won)
	require.Greater(t, e.Rev(), term.Token())
	require.True(t, topo.IsErrType(term.Check(ctx), topo.LockLost), "%v", term.Check(ctx))
	require.True(t, topo.IsErrType(p.Proclaim(ctx, []byte("late")), topo.NotLeader))
	l, err := p.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, []byte("etcd"), l.Value)

	// Campaigning again queues behind the native leader, on a new lease.
	again := make(chan error, 1)
	go func() {
		_, err := p.Campaign(ctx, []byte("tk-again"))
		again <- err
	}()
	waitNativeKeys(t, cli, prefix, 2)
	require.NoError(t, e.Resign(ctx))
	require.NoError(t, <-again)
	term2, err := p.Term()
	require.NoError(t, err)
	require.Greater(t, term2.Token(), e.Rev())
}

// TestNativeResume: a new Conn takes back a leading native candidacy from
// its ResumeInfo, with the same term token; a waiting one keeps its
// place; gone or foreign infos are refused.
func TestNativeResume(t *testing.T) {
	ctx := testCtx(t)
	cli := rawClient(t, serverAddr)
	prefix := nativePrefix()
	old := openConn(t, serverAddr, newRoot())
	p := native(t, old, prefix, "tk")
	_, err := p.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)
	info, err := p.ResumeInfo()
	require.NoError(t, err)

	// A concurrency waiter behind it.
	_, e := etcdElection(t, cli, prefix)
	won := make(chan error, 1)
	go func() { won <- e.Campaign(ctx, "etcd") }()
	waitNativeKeys(t, cli, prefix, 2)

	fresh := openConn(t, serverAddr, newRoot())
	_, err = fresh.ResumeNativeElection(ctx, prefix, "other", info)
	require.True(t, topo.IsErrType(err, topo.InvalidArgument), "%v", err)
	_, err = fresh.ResumeNativeElection(ctx, prefix, "tk", []byte("{"))
	require.True(t, topo.IsErrType(err, topo.InvalidArgument), "%v", err)
	q, err := fresh.ResumeNativeElection(ctx, prefix, "tk", info)
	require.NoError(t, err)
	lctx, err := q.WaitForLeadership()
	require.NoError(t, err)
	term2, err := q.Term()
	require.NoError(t, err)
	require.Equal(t, term.Token(), term2.Token())
	l, err := q.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, []byte("v1"), l.Value, "WaitForLeadership keeps a resumed value")
	require.NoError(t, q.Proclaim(ctx, []byte("v2")))
	l, err = q.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, []byte("v2"), l.Value)

	// The resumed lease is kept alive by the fresh Conn.
	var r resumeInfo
	require.NoError(t, json.Unmarshal(info, &r))
	require.Contains(t, fresh.leaseIDs(), clientv3.LeaseID(r.Lease))

	require.NoError(t, q.Resign(ctx))
	require.Error(t, lctx.Err())
	require.NoError(t, <-won)
	_, err = fresh.ResumeNativeElection(ctx, prefix, "tk", info)
	require.True(t, topo.IsErrType(err, topo.LockLost), "%v", err)
}

// TestNativeResignCancelledContext: Resign with an already-cancelled ctx
// still removes the key.
func TestNativeResignCancelledContext(t *testing.T) {
	ctx := testCtx(t)
	c := openConn(t, serverAddr, newRoot())
	cli := rawClient(t, serverAddr)
	prefix := nativePrefix()
	p := native(t, c, prefix, "tk")
	lctx, err := p.WaitForLeadership()
	require.NoError(t, err)
	l, err := p.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, []byte("tk"), l.Value, "WaitForLeadership publishes the id")
	done, cancel := context.WithCancel(ctx)
	cancel()
	require.NoError(t, p.Resign(done))
	require.Error(t, lctx.Err())
	waitNativeKeys(t, cli, prefix, 0)
	require.NoError(t, p.Resign(ctx), "nothing to resign")
	_, err = p.Leader(ctx)
	require.True(t, topo.IsErrType(err, topo.NoLeader), "%v", err)
	// After Resign it joins again; after Stop it is Interrupted.
	_, err = p.Campaign(ctx, []byte("again"))
	require.NoError(t, err)
	p.Stop()
	waitNativeKeys(t, cli, prefix, 0)
	_, err = p.Campaign(ctx, []byte("x"))
	require.True(t, topo.IsErrType(err, topo.Interrupted), "%v", err)
	_, err = p.WaitForLeadership()
	require.True(t, topo.IsErrType(err, topo.Interrupted), "%v", err)
}

// TestNativePrefixes: prefixes overlapping the Conn's tree are refused.
func TestNativePrefixes(t *testing.T) {
	root := newRoot()
	c := openConn(t, serverAddr, root)
	for _, tc := range []struct {
		prefix string
		code   topo.ErrorCode
	}{
		{"", topo.InvalidArgument},
		{root, topo.InvalidArgument},              // <root>/ holds the whole tree
		{root + "/elections/x", topo.InvalidPath}, // reserved
		{root + "/a/locks", topo.InvalidPath},     // reserved
		{root + "/keyspaces", topo.InvalidPath},   // files of the Conn
	} {
		_, err := c.NewNativeElection(tc.prefix, "id")
		require.True(t, topo.IsErrType(err, tc.code), "%q: %v", tc.prefix, err)
	}
	for _, ok := range []string{"/", "/elsewhere", root + "x", root + "//a", "plain"} {
		_, err := c.NewNativeElection(ok, "id")
		require.NoError(t, err, "%q", ok)
	}
	_, err := c.NewNativeElection("/e", "")
	require.True(t, topo.IsErrType(err, topo.InvalidArgument))

	// With an empty root every canonical prefix is inside the tree.
	c0 := openConn(t, serverAddr, "")
	_, err = c0.NewNativeElection("plain", "id")
	require.True(t, topo.IsErrType(err, topo.InvalidPath), "%v", err)
	_, err = c0.NewNativeElection("elections", "id")
	require.True(t, topo.IsErrType(err, topo.InvalidPath), "%v", err)
	_, err = c0.NewNativeElection("/slash", "id")
	require.NoError(t, err)
}

// TestNativeHeldCompares: the compares a native term gives Txn (see
// guardOf) hold while it leads, across Proclaims (which move the
// key's ModRevision, so a ModRevision compare would not), and fail once
// it resigned.
func TestNativeHeldCompares(t *testing.T) {
	ctx := testCtx(t)
	c := openConn(t, serverAddr, newRoot())
	cli := rawClient(t, serverAddr)
	p := native(t, c, nativePrefix(), "tk")
	_, err := p.Campaign(ctx, []byte("v"))
	require.NoError(t, err)
	f, err := p.Term()
	require.NoError(t, err)
	_, ok := guardOf(f)
	require.True(t, ok)
	held := func() bool {
		g, _ := guardOf(f)
		require.Same(t, c, g.conn)
		require.NotZero(t, g.clusterID)
		resp, err := cli.Txn(ctx).If(g.cmps...).Else(clientv3.OpGet(g.key)).Commit()
		require.NoError(t, err)
		if !resp.Succeeded {
			kvs := resp.Responses[0].GetResponseRange().Kvs
			require.True(t, len(kvs) == 0 || g.gone(kvs[0]))
		}
		require.Equal(t, g.held, resp.Succeeded)
		return resp.Succeeded
	}
	require.True(t, held())
	require.NoError(t, p.Proclaim(ctx, []byte("w")))
	require.True(t, held())
	require.NoError(t, p.Resign(ctx))
	require.False(t, held())
}

// TestNativeObserveAcrossReconnect: Observe through a Conn behind a
// faultproxy keeps reporting leaders after the connection is cut and
// healed, and its last value is the current leader.
func TestNativeObserveAcrossReconnect(t *testing.T) {
	ctx := testCtx(t)
	proxy, err := faultproxy.New(serverAddr)
	require.NoError(t, err)
	t.Cleanup(func() { proxy.Close() })
	watcher := openConn(t, proxy.Addr(), newRoot())
	cli := rawClient(t, serverAddr)
	prefix := nativePrefix()
	w := native(t, watcher, prefix, "watcher")
	obs, err := w.Observe(ctx)
	require.NoError(t, err)
	require.Equal(t, topo.Leader{}, <-obs)

	_, e := etcdElection(t, cli, prefix)
	require.NoError(t, e.Campaign(ctx, "one"))
	nextLeader(t, obs, func(l topo.Leader) bool { return string(l.Value) == "one" })

	proxy.Blackhole()
	require.NoError(t, e.Proclaim(ctx, "two"))
	require.NoError(t, e.Resign(ctx))
	_, e2 := etcdElection(t, cli, prefix)
	require.NoError(t, e2.Campaign(ctx, "three"))
	proxy.Reset()
	proxy.Heal()
	got := nextLeader(t, obs, func(l topo.Leader) bool { return string(l.Value) == "three" })
	require.Equal(t, e2.Rev(), got.Token)
	require.NoError(t, e2.Resign(ctx))
	require.Equal(t, topo.Leader{}, nextLeader(t, obs, func(l topo.Leader) bool { return l.ID == "" }))
}

// TestNativeWaitForNewLeader: ids only, deduplicated, across a Proclaim.
func TestNativeWaitForNewLeader(t *testing.T) {
	ctx := testCtx(t)
	c := openConn(t, serverAddr, newRoot())
	cli := rawClient(t, serverAddr)
	prefix := nativePrefix()
	s, e := etcdElection(t, cli, prefix)
	require.NoError(t, e.Campaign(ctx, "a"))
	p := native(t, c, prefix, "tk")
	ids, err := p.WaitForNewLeader(ctx)
	require.NoError(t, err)
	require.Equal(t, hexID(s.Lease()), <-ids)
	require.NoError(t, e.Proclaim(ctx, "b"))
	won := make(chan error, 1)
	go func() {
		_, err := p.Campaign(ctx, []byte("tk"))
		won <- err
	}()
	waitNativeKeys(t, cli, prefix, 2)
	require.NoError(t, e.Resign(ctx))
	require.NoError(t, <-won)
	me, err := p.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, me.ID, <-ids, "the Proclaim sent nothing")
	require.NotEqual(t, hexID(s.Lease()), me.ID)

	// Observe and WaitForNewLeader close when the Conn closes.
	obs, err := p.Observe(ctx)
	require.NoError(t, err)
	c.Close()
	for range obs {
	}
	for range ids {
	}
	_, err = p.Observe(ctx)
	require.True(t, topo.IsErrType(err, topo.Closed), "%v", err)
}

// TestNativePartitionedLeaderGivesUpFirst: a topokit leader whose client
// is cut off from etcd has ended its leadership (context, Done, Check)
// by the time a concurrency.Election waiter wins on the lease's expiry,
// and its Proclaim after the partition heals is refused.
func TestNativePartitionedLeaderGivesUpFirst(t *testing.T) {
	ctx := testCtx(t)
	px, err := faultproxy.New(serverAddr)
	require.NoError(t, err)
	c := openConn(t, px.Addr(), newRoot())
	t.Cleanup(func() {
		px.Heal()
		px.Close()
	})
	cli := rawClient(t, serverAddr)
	prefix := nativePrefix()
	p := native(t, c, prefix, "tk")
	lctx, err := p.Campaign(ctx, []byte("old"))
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)

	_, e := etcdElection(t, cli, prefix)
	type result struct {
		err      error
		oldCtx   error
		oldDone  bool
		oldCheck error
	}
	won := make(chan result, 1)
	go func() {
		err := e.Campaign(ctx, "new")
		// The moment the native waiter wins: look at the old leader at once.
		done := false
		select {
		case <-term.Done():
			done = true
		default:
		}
		won <- result{err, lctx.Err(), done, term.Check(ctx)}
	}()
	waitNativeKeys(t, cli, prefix, 2)
	px.Blackhole()
	r := <-won
	require.NoError(t, r.err)
	require.Error(t, r.oldCtx, "the old leader still led when the native waiter won")
	require.True(t, r.oldDone, "the old term's Done was open when the native waiter won")
	require.ErrorIs(t, r.oldCheck, topo.LockLost)
	px.Heal()
	require.True(t, topo.IsErrType(p.Proclaim(ctx, []byte("late")), topo.NotLeader))
	l, err := e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "new", string(l.Kvs[0].Value))
}

// TestNativeForeignKeyCounts: a key under the prefix that no campaigner
// wrote (no lease, deeper name) counts as a candidate, as it does for
// concurrency.Election: it leads while it is the oldest, and topokit
// waits behind it.
func TestNativeForeignKeyCounts(t *testing.T) {
	ctx := testCtx(t)
	c := openConn(t, serverAddr, newRoot())
	cli := rawClient(t, serverAddr)
	prefix := nativePrefix()
	put, err := cli.Put(ctx, prefix+"/by/hand", "manual")
	require.NoError(t, err)
	p := native(t, c, prefix, "tk")
	l, err := p.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, topo.Leader{ID: "by/hand", Value: []byte("manual"), Token: put.Header.Revision}, l)
	won := make(chan error, 1)
	go func() {
		_, err := p.Campaign(ctx, []byte("tk"))
		won <- err
	}()
	waitNativeKeys(t, cli, prefix, 2)
	select {
	case err := <-won:
		t.Fatalf("topokit won (%v) behind an older key", err)
	default:
	}
	_, err = cli.Delete(ctx, prefix+"/by/hand")
	require.NoError(t, err)
	require.NoError(t, <-won)
}
