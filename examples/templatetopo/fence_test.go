package templatetopo_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/examples/templatetopo"
	"github.com/topokit/topokit/topo"
)

// newConns returns n Conns on one fresh store, rooted at /r, closed when
// the test ends.
func newConns(t testing.TB, n int) (*templatetopo.Store, []*templatetopo.Conn) {
	t.Helper()
	s := templatetopo.NewStore()
	out := make([]*templatetopo.Conn, n)
	for i := range out {
		c, err := s.NewConn("/r")
		require.NoError(t, err)
		t.Cleanup(c.Close)
		out[i] = c
	}
	return s, out
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// requireTxnErr fails t unless err is a *topo.TxnError for op index with
// code.
func requireTxnErr(t *testing.T, err error, index int, code topo.ErrorCode, what string) {
	t.Helper()
	var te *topo.TxnError
	require.Truef(t, errors.As(err, &te), "%s: want a *topo.TxnError, got %v (%T)", what, err, err)
	require.Equalf(t, index, te.Index, "%s: failing op index (%v)", what, err)
	require.Truef(t, errors.Is(err, code), "%s: want %q, got %v", what, code, err)
}

// TestTxn: every op kind, each failure code with the index of the first
// failing op, and nothing written when a transaction fails.
func TestTxn(t *testing.T) {
	ctx := testCtx(t)
	_, cs := newConns(t, 1)
	c := cs[0]
	va, err := c.Create(ctx, "a", []byte("a1"))
	require.NoError(t, err)
	vb, err := c.Create(ctx, "b", []byte("b1"))
	require.NoError(t, err)

	vs, err := c.Txn(ctx,
		topo.IfVersion("a", va), topo.IfPresent("b"), topo.IfAbsent("c"),
		topo.CreateOp("c/d", []byte("new")), topo.UpdateOp("a", []byte("a2"), va),
		topo.UpdateOp("z", []byte("upsert"), nil), topo.DeleteOp("b", vb))
	require.NoError(t, err)
	require.Len(t, vs, 7)
	for _, i := range []int{0, 1, 2, 6} {
		require.Nilf(t, vs[i], "op %d writes nothing and has no version", i)
	}
	require.NotNil(t, vs[3])
	for path, want := range map[string]topo.Version{"c/d": vs[3], "a": vs[4], "z": vs[5]} {
		_, v, err := c.Get(ctx, path)
		require.NoError(t, err)
		require.Equal(t, want.String(), v.String(), "the version Txn returned for %s", path)
	}
	_, _, err = c.Get(ctx, "b")
	require.ErrorIs(t, err, topo.NoNode, "the Txn deleted b")

	// Conditions see the store as it was before the transaction.
	_, err = c.Txn(ctx, topo.CreateOp("e", []byte("e")), topo.IfPresent("e"))
	requireTxnErr(t, err, 1, topo.NoNode, "a condition does not see an earlier op's write")
	_, _, err = c.Get(ctx, "e")
	require.ErrorIs(t, err, topo.NoNode, "nothing written")
	_, err = c.Txn(ctx, topo.CreateOp("e", []byte("e")), topo.IfAbsent("e"))
	require.NoError(t, err)

	snapshot := func() []string {
		kvs, err := c.List(ctx, "")
		require.NoError(t, err)
		var out []string
		for _, kv := range kvs {
			out = append(out, fmt.Sprintf("%s=%s@%s", kv.Path, kv.Value, kv.Version))
		}
		return out
	}
	// z's version from the first Txn is stale once z is written again (a
	// stale version of the same file, so that the cases below hold for
	// per-file versions as for store revisions).
	stale := vs[5]
	_, err = c.Update(ctx, "z", []byte("z2"), nil)
	require.NoError(t, err)
	before := snapshot()
	w := topo.UpdateOp("a", []byte("must not be written"), nil)
	for _, tc := range []struct {
		name  string
		ops   []topo.TxnOp
		index int
		code  topo.ErrorCode
	}{
		{"if-version of an absent file", []topo.TxnOp{w, topo.IfVersion("nope", va)}, 1, topo.NoNode},
		{"if-version stale", []topo.TxnOp{w, topo.IfVersion("z", stale)}, 1, topo.BadVersion},
		{"if-absent of a present file", []topo.TxnOp{topo.IfAbsent("z"), w}, 0, topo.NodeExists},
		{"if-present of an absent file", []topo.TxnOp{w, topo.IfPresent("b")}, 1, topo.NoNode},
		{"create of a present file", []topo.TxnOp{w, topo.CreateOp("z", nil)}, 1, topo.NodeExists},
		{"versioned update of an absent file", []topo.TxnOp{w, topo.UpdateOp("nope", nil, va)}, 1, topo.NoNode},
		{"versioned update stale", []topo.TxnOp{w, topo.UpdateOp("z", nil, stale)}, 1, topo.BadVersion},
		{"delete of an absent file", []topo.TxnOp{w, topo.DeleteOp("nope", nil)}, 1, topo.NoNode},
		{"versioned delete stale", []topo.TxnOp{w, topo.DeleteOp("z", stale)}, 1, topo.BadVersion},
		{"the first failing op is named", []topo.TxnOp{w, topo.IfPresent("nope"), topo.IfAbsent("z")}, 1, topo.NoNode},
		{"a condition does not see an earlier delete", []topo.TxnOp{topo.DeleteOp("z", nil), topo.IfAbsent("z")}, 1, topo.NodeExists},
	} {
		_, err := c.Txn(ctx, tc.ops...)
		requireTxnErr(t, err, tc.index, tc.code, tc.name)
		require.Equal(t, before, snapshot(), "%s: nothing is written", tc.name)
	}

	// Bad input, found before anything is sent.
	_, err = c.Txn(ctx)
	require.ErrorIs(t, err, topo.InvalidArgument, "an empty transaction")
	_, err = c.Txn(ctx, w, topo.CreateOp("d/locks/x", nil))
	requireTxnErr(t, err, 1, topo.InvalidPath, "a reserved path")
	_, err = c.Txn(ctx, w, topo.DeleteOp("a", nil))
	requireTxnErr(t, err, 1, topo.InvalidArgument, "two writes of one path")
	many := make([]topo.TxnOp, templatetopo.MaxTxnOps+1)
	for i := range many {
		many[i] = topo.IfPresent(fmt.Sprintf("f%d", i))
	}
	_, err = c.Txn(ctx, many...)
	require.ErrorIs(t, err, topo.InvalidArgument, "more than MaxTxnOps ops")
	require.ErrorContains(t, err, "transaction too large")
	require.Equal(t, before, snapshot(), "refused transactions write nothing")

	c.Close()
	_, err = c.Txn(ctx, w)
	require.ErrorIs(t, err, topo.Closed)
}

// TestTxnWatched: a Watch and a WatchRecursive see a Txn's writes like
// the methods'.
func TestTxnWatched(t *testing.T) {
	ctx := testCtx(t)
	_, cs := newConns(t, 2)
	v, err := cs[0].Create(ctx, "w/f", []byte("one"))
	require.NoError(t, err)
	_, ch, err := cs[0].Watch(ctx, "w/f")
	require.NoError(t, err)
	_, rch, err := cs[0].WatchRecursive(ctx, "w/")
	require.NoError(t, err)

	vs, err := cs[1].Txn(ctx, topo.UpdateOp("w/f", []byte("two"), v), topo.CreateOp("w/g", []byte("g")))
	require.NoError(t, err)
	wd := <-ch
	require.NoError(t, wd.Err)
	require.Equal(t, "two", string(wd.Contents))
	require.Equal(t, vs[0].String(), wd.Version.String())
	got := map[string]string{}
	for len(got) < 2 {
		wr := <-rch
		require.NoError(t, wr.Err)
		got[wr.Path] = string(wr.Contents)
	}
	require.Equal(t, map[string]string{"w/f": "two", "w/g": "g"}, got)

	_, err = cs[1].Txn(ctx, topo.DeleteOp("w/f", nil))
	require.NoError(t, err)
	wd = <-ch
	require.ErrorIs(t, wd.Err, topo.NoNode, "a Txn's delete ends the Watch")
	_, ok := <-ch
	require.False(t, ok)
}

// TestGuardedWriteAfterSessionExpiry: the store expires the holder's
// session; a successor takes the lock and writes; the old holder's guarded
// write is refused (op 0, LockLost) and the successor's value stays.
func TestGuardedWriteAfterSessionExpiry(t *testing.T) {
	ctx := testCtx(t)
	_, cs := newConns(t, 2)
	old, next := cs[0], cs[1]
	_, err := old.Create(ctx, "d/f", []byte("start"))
	require.NoError(t, err)
	l1, err := old.Lock(ctx, "d", "old")
	require.NoError(t, err)
	v, err := topo.GuardedUpdate(ctx, old, l1, "d/f", []byte("by the holder"), nil)
	require.NoError(t, err, "a guarded write while the lock is held")

	old.ExpireSession()
	l2, err := next.Lock(ctx, "d", "next")
	require.NoError(t, err)
	require.Greater(t, l2.Token(), l1.Token(), "the successor's token")
	v2, err := topo.GuardedUpdate(ctx, next, l2, "d/f", []byte("by the successor"), v)
	require.NoError(t, err)

	_, err = topo.GuardedUpdate(ctx, old, l1, "d/f", []byte("stale"), nil)
	requireTxnErr(t, err, 0, topo.LockLost, "the old holder's guarded write")
	requireTxnErr(t, topo.GuardedDelete(ctx, old, l1, "d/f", nil), 0, topo.LockLost, "the old holder's guarded delete")
	data, ver, err := next.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "by the successor", string(data), "no stale write was applied")
	require.Equal(t, v2.String(), ver.String())
}

// TestGuardedWriteAfterPartition: the holder is cut off; a successor
// takes the lock; the partition heals; the old holder's guarded write is
// refused and nothing stale is applied.
func TestGuardedWriteAfterPartition(t *testing.T) {
	ctx := testCtx(t)
	_, cs := newConns(t, 2)
	old, next := cs[0], cs[1]
	_, err := old.Create(ctx, "d/f", []byte("start"))
	require.NoError(t, err)
	l1, err := old.Lock(ctx, "d", "old")
	require.NoError(t, err)

	old.Cut()
	_, err = topo.GuardedUpdate(ctx, old, l1, "d/f", []byte("stale, cut"), nil)
	require.ErrorIs(t, err, topo.Unavailable, "a cut Conn sends nothing")
	l2, err := next.Lock(ctx, "d", "next")
	require.NoError(t, err)
	_, err = topo.GuardedUpdate(ctx, next, l2, "d/f", []byte("by the successor"), nil)
	require.NoError(t, err)
	old.Heal()

	_, err = topo.GuardedUpdate(ctx, old, l1, "d/f", []byte("stale, healed"), nil)
	requireTxnErr(t, err, 0, topo.LockLost, "the old holder's guarded write after the partition healed")
	data, _, err := next.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "by the successor", string(data))
	require.NoError(t, l2.Check(ctx), "the old holder's attempts cost the successor nothing")
}

// TestTokensIncrease: over many handovers of one lock and one election,
// across several Conns, with Unlock, TryLock, session expiry, partitions,
// Close and store restarts mixed in, every holder's token is strictly
// greater than every earlier one's.
func TestTokensIncrease(t *testing.T) {
	ctx := testCtx(t)
	s := templatetopo.NewStore()
	open := func() *templatetopo.Conn {
		c, err := s.NewConn("/r")
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	setup := open()
	_, err := setup.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	conns := []*templatetopo.Conn{open(), open(), open()}

	var lastLock, lastTerm int64
	for round := range 40 {
		c := conns[round%len(conns)]
		var l topo.LockDescriptor
		// After a Cut (round%5 == 2) the store keeps the cut session's
		// entries for SessionTimeout: wait for them with Lock.
		if round%2 == 0 || round%5 == 3 {
			l, err = c.Lock(ctx, "d", "holder")
		} else {
			l, err = c.TryLock(ctx, "d", "holder")
		}
		require.NoError(t, err, "round %d", round)
		require.Greater(t, l.Token(), lastLock, "round %d: lock token", round)
		lastLock = l.Token()

		p, err := c.NewLeaderParticipation("elec", fmt.Sprintf("id%d", round))
		require.NoError(t, err)
		_, err = p.WaitForLeadership()
		require.NoError(t, err)
		term, err := p.Term()
		require.NoError(t, err)
		require.Greater(t, term.Token(), lastTerm, "round %d: term token", round)
		lastTerm = term.Token()

		switch round % 5 {
		case 0:
			require.NoError(t, l.Unlock(ctx))
			p.Stop()
		case 1:
			c.ExpireSession()
		case 2:
			c.Cut()
			c.Heal()
		case 3:
			s.Restart(3)
			for { // the restart refuses a few requests
				if _, _, err := setup.Get(ctx, "d/f"); err == nil {
					break
				}
			}
		case 4:
			c.Close()
			conns[round%len(conns)] = open()
		}
		<-l.Done()
	}
}

// TestDone: Done closes on Unlock, on session expiry, on a partition, on
// the Conn's Close and on a store restart, and a term's Done on Stop.
func TestDone(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct {
		name string
		end  func(s *templatetopo.Store, c *templatetopo.Conn, l topo.LockDescriptor)
		code topo.ErrorCode // Check's code after the end
	}{
		{"Unlock", func(_ *templatetopo.Store, _ *templatetopo.Conn, l topo.LockDescriptor) {
			require.NoError(t, l.Unlock(ctx))
		}, topo.Interrupted},
		{"ExpireSession", func(_ *templatetopo.Store, c *templatetopo.Conn, _ topo.LockDescriptor) { c.ExpireSession() }, topo.LockLost},
		{"Cut", func(_ *templatetopo.Store, c *templatetopo.Conn, _ topo.LockDescriptor) { c.Cut() }, topo.LockLost},
		{"Close", func(_ *templatetopo.Store, c *templatetopo.Conn, _ topo.LockDescriptor) { c.Close() }, topo.Closed},
		{"Restart", func(s *templatetopo.Store, _ *templatetopo.Conn, _ topo.LockDescriptor) { s.Restart(0) }, topo.LockLost},
	} {
		s, cs := newConns(t, 1)
		c := cs[0]
		_, err := c.Create(ctx, "d/f", nil)
		require.NoError(t, err)
		l, err := c.Lock(ctx, "d", "x")
		require.NoError(t, err)
		select {
		case <-l.Done():
			require.FailNow(t, "Done closed while the lock is held", tc.name)
		default:
		}
		tc.end(s, c, l)
		select {
		case <-l.Done():
		default:
			require.FailNowf(t, "Done still open", "after %s returned", tc.name)
		}
		require.ErrorIsf(t, l.Check(ctx), tc.code, "Check after %s", tc.name)
	}

	_, cs := newConns(t, 1)
	p, err := cs[0].NewLeaderParticipation("e", "id")
	require.NoError(t, err)
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	term, err := p.Term()
	require.NoError(t, err)
	p.Stop()
	select {
	case <-term.Done():
	default:
		require.FailNow(t, "a term's Done still open after Stop returned")
	}
}

// TestTerm: Term is NotLeader before leading and after the term ends, the
// same Fence for the whole term, and IfHeld(term) guards a write on it.
func TestTerm(t *testing.T) {
	ctx := testCtx(t)
	_, cs := newConns(t, 2)
	p1, err := cs[0].NewLeaderParticipation("e", "one")
	require.NoError(t, err)
	_, err = p1.Term()
	require.ErrorIs(t, err, topo.NotLeader, "before WaitForLeadership")
	_, err = p1.WaitForLeadership()
	require.NoError(t, err)
	term, err := p1.Term()
	require.NoError(t, err)
	again, err := p1.Term()
	require.NoError(t, err)
	require.True(t, term == again, "the same Fence for the whole term")
	require.Positive(t, term.Token())
	_, err = topo.GuardedUpdate(ctx, cs[0], term, "leader/state", []byte("one"), nil)
	require.NoError(t, err)

	p2, err := cs[1].NewLeaderParticipation("e", "two")
	require.NoError(t, err)
	led := make(chan error, 1)
	go func() { _, err := p2.WaitForLeadership(); led <- err }()
	cs[0].ExpireSession()
	require.NoError(t, <-led)
	_, err = p1.Term()
	require.ErrorIs(t, err, topo.NotLeader, "after the session ended")
	_, err = topo.GuardedUpdate(ctx, cs[0], term, "leader/state", []byte("stale"), nil)
	requireTxnErr(t, err, 0, topo.LockLost, "a write guarded by an ended term")
	term2, err := p2.Term()
	require.NoError(t, err)
	require.Greater(t, term2.Token(), term.Token())
	p2.Stop()
	_, err = p2.Term()
	require.ErrorIs(t, err, topo.NotLeader, "after Stop")
}

// wrapped is a middleware's decorator of a Fence (see topo.Fence).
type wrapped struct{ topo.Fence }

func (w wrapped) Unwrap() topo.Fence { return w.Fence }

// foreign is a Fence no backend issued.
type foreign struct{}

func (foreign) Token() int64                { return 1 }
func (foreign) Done() <-chan struct{}       { return nil }
func (foreign) Check(context.Context) error { return nil }

// TestIfHeldFences: IfHeld finds the template's claim behind a decorator;
// a foreign Fence, and a claim of another Store, are InvalidArgument; a
// released lock is LockLost.
func TestIfHeldFences(t *testing.T) {
	ctx := testCtx(t)
	_, cs := newConns(t, 1)
	_, others := newConns(t, 1)
	c := cs[0]
	_, err := c.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "x")
	require.NoError(t, err)

	_, err = c.TryLock(ctx, "d", "other")
	var held *topo.LockHeldError
	require.ErrorAs(t, err, &held, "TryLock's NodeExists names the holder")
	require.ErrorIs(t, err, topo.NodeExists)
	require.Equal(t, "x", held.Holder)

	_, err = c.Txn(ctx, topo.IfHeld(wrapped{wrapped{l}}), topo.UpdateOp("d/f", []byte("y"), nil))
	require.NoError(t, err, "IfHeld through decorators")
	_, err = c.Txn(ctx, topo.UpdateOp("d/f", []byte("y"), nil), topo.IfHeld(foreign{}))
	requireTxnErr(t, err, 1, topo.InvalidArgument, "a foreign Fence")
	_, err = others[0].Txn(ctx, topo.IfHeld(l))
	requireTxnErr(t, err, 0, topo.InvalidArgument, "a claim of another store")

	require.NoError(t, l.Unlock(ctx))
	_, err = c.Txn(ctx, topo.IfHeld(l), topo.UpdateOp("d/f", []byte("z"), nil))
	requireTxnErr(t, err, 0, topo.LockLost, "a released lock")
}

// TestRegistered: the FactoryName factory is registered by the package's
// init, opens Conns on one store per address, and a second registration of
// the name panics, naming it.
func TestRegistered(t *testing.T) {
	ctx := testCtx(t)
	f, err := topo.GetFactory(templatetopo.FactoryName)
	require.NoError(t, err)
	// The registered factory's stores live as long as the process: an
	// address of this run's own.
	addr := fmt.Sprintf("addr-%p", t)
	a, err := f.Create("cell", addr, "/x")
	require.NoError(t, err)
	defer a.Close()
	b, err := f.Create("cell", addr, "/x")
	require.NoError(t, err)
	defer b.Close()
	other, err := f.Create("cell", addr+"-other", "/x")
	require.NoError(t, err)
	defer other.Close()
	_, err = a.Create(ctx, "f", []byte("v"))
	require.NoError(t, err)
	got, _, err := b.Get(ctx, "f")
	require.NoError(t, err, "one store per address")
	require.Equal(t, "v", string(got))
	_, _, err = other.Get(ctx, "f")
	require.ErrorIs(t, err, topo.NoNode, "another address is another store")
	_, err = f.Create("cell", addr, "bad//root")
	require.ErrorIs(t, err, topo.InvalidPath)

	// Spelled with FactoryName, so that a copy under another name passes.
	require.PanicsWithError(t, fmt.Sprintf(`topo: a factory named %q is already registered (in topo.MustRegisterFactory(%q); registered factories: %s)`,
		templatetopo.FactoryName, templatetopo.FactoryName, strings.Join(topo.Factories(), ", ")), func() {
		topo.MustRegisterFactory(templatetopo.FactoryName, templatetopo.NewFactory())
	})
}
