package memorytopo_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// snapshot returns every file under the Conn's root with its version, to
// compare the store before and after a transaction that must write
// nothing.
func snapshot(t *testing.T, c topo.Conn) []topo.KVInfo {
	t.Helper()
	kvs, err := c.List(context.Background(), "")
	if topo.IsErrType(err, topo.NoNode) {
		return nil
	}
	require.NoError(t, err)
	return kvs
}

// requireTxnErr asserts that err is a *topo.TxnError at index with code.
func requireTxnErr(t *testing.T, err error, index int, kind topo.TxnOpKind, code topo.ErrorCode) {
	t.Helper()
	require.Error(t, err)
	var te *topo.TxnError
	require.ErrorAsf(t, err, &te, "not a *topo.TxnError: %v", err)
	require.Equal(t, index, te.Index, "failing index of %v", err)
	require.Equal(t, kind, te.Kind, "failing kind of %v", err)
	requireCode(t, err, code)
}

func TestTxnEveryWriteKind(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	vOld, err := c.Create(ctx, "old", []byte("o1"))
	require.NoError(t, err)
	vDel, err := c.Create(ctx, "del", []byte("d"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "gone", []byte("g"))
	require.NoError(t, err)
	ld, err := c.LockName(ctx, "old", "holder") // a file: Lock refuses it
	require.NoError(t, err)

	mine := []byte("a")
	vs, err := c.Txn(ctx,
		topo.IfVersion("old", vOld),
		topo.IfPresent("del"),
		topo.IfAbsent("new/a"),
		topo.IfHeld(ld),
		topo.CreateOp("new/a", mine),
		topo.UpdateOp("old", []byte("o2"), vOld),
		topo.UpdateOp("made/by/update", []byte("u"), nil),
		topo.DeleteOp("del", vDel),
		topo.DeleteOp("gone", nil),
	)
	require.NoError(t, err)
	require.Len(t, vs, 9)
	for i, v := range vs {
		if i == 4 || i == 5 || i == 6 {
			require.NotNil(t, v, "op %d", i)
		} else {
			require.Nil(t, v, "op %d", i)
		}
	}
	// Each write has its own new store revision, as the methods would.
	require.Greater(t, int64(vs[4].(topo.NumericVersion)), int64(vOld.(topo.NumericVersion)))
	require.Greater(t, int64(vs[5].(topo.NumericVersion)), int64(vs[4].(topo.NumericVersion)))
	require.Greater(t, int64(vs[6].(topo.NumericVersion)), int64(vs[5].(topo.NumericVersion)))

	mine[0] = 'X' // the store kept its own copy
	for p, want := range map[string]string{"new/a": "a", "old": "o2", "made/by/update": "u"} {
		got, v, err := c.Get(ctx, p)
		require.NoError(t, err, p)
		require.Equal(t, want, string(got), p)
		require.NotNil(t, v)
	}
	for _, p := range []string{"del", "gone"} {
		_, _, err := c.Get(ctx, p)
		requireCode(t, err, topo.NoNode)
	}
	// The history keeps the replaced version, as after Update.
	got, err := c.GetVersion(ctx, "old", int64(vOld.(topo.NumericVersion)))
	require.NoError(t, err)
	require.Equal(t, "o1", string(got))
	// Parents are created: the directory lists.
	entries, err := c.ListDir(ctx, "made/by", false)
	require.NoError(t, err)
	require.Equal(t, []topo.DirEntry{{Name: "update"}}, entries)
	// The lock still works.
	require.NoError(t, ld.Unlock(ctx))
}

func TestTxnFailuresWriteNothing(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	v, err := c.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
	stale := topo.NumericVersion(int64(v.(topo.NumericVersion)) + 100)
	ld, err := c.LockName(ctx, "f", "holder") // a file: Lock refuses it
	require.NoError(t, err)
	released, err := c.Lock(ctx, "rel", "r") // no file under rel
	requireCode(t, err, topo.NoNode)
	require.Nil(t, released)
	_, err = c.Create(ctx, "rel/x", nil)
	require.NoError(t, err)
	gone, err := c.Lock(ctx, "rel", "r")
	require.NoError(t, err)
	require.NoError(t, gone.Unlock(ctx))

	write := topo.UpdateOp("w", []byte("never"), nil)
	for _, tc := range []struct {
		name string
		fail topo.TxnOp
		code topo.ErrorCode
	}{
		{"if-version absent", topo.IfVersion("nope", v), topo.NoNode},
		{"if-version stale", topo.IfVersion("f", stale), topo.BadVersion},
		{"if-absent", topo.IfAbsent("f"), topo.NodeExists},
		{"if-present", topo.IfPresent("nope"), topo.NoNode},
		{"if-held unlocked", topo.IfHeld(gone), topo.LockLost},
		{"create exists", topo.CreateOp("f", []byte("y")), topo.NodeExists},
		{"update absent", topo.UpdateOp("nope", []byte("y"), v), topo.NoNode},
		{"update stale", topo.UpdateOp("f", []byte("y"), stale), topo.BadVersion},
		{"delete absent", topo.DeleteOp("nope", nil), topo.NoNode},
		{"delete stale", topo.DeleteOp("f", stale), topo.BadVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, at := range []int{0, 1, 2} {
				ops := []topo.TxnOp{topo.IfHeld(ld), write}
				ops = append(ops[:at], append([]topo.TxnOp{tc.fail}, ops[at:]...)...)
				before := snapshot(t, c)
				_, err := c.Txn(ctx, ops...)
				requireTxnErr(t, err, at, tc.fail.Kind, tc.code)
				require.Equal(t, before, snapshot(t, c), "nothing written")
			}
		})
	}
	// The first failing op is named when several fail.
	_, err = c.Txn(ctx, topo.IfPresent("a"), topo.IfPresent("b"), write)
	requireTxnErr(t, err, 0, topo.TxnIfPresent, topo.NoNode)
	// Conditions see the store as it was before the transaction.
	_, err = c.Txn(ctx, topo.CreateOp("n", nil), topo.IfPresent("n"))
	requireTxnErr(t, err, 1, topo.TxnIfPresent, topo.NoNode)
	_, _, err = c.Get(ctx, "n")
	requireCode(t, err, topo.NoNode)
	_, _, err = c.Get(ctx, "w")
	requireCode(t, err, topo.NoNode)
	require.NoError(t, ld.Unlock(ctx))
	_, err = c.Txn(ctx, topo.IfHeld(ld), write)
	requireTxnErr(t, err, 0, topo.TxnIfHeld, topo.LockLost)
}

func TestTxnBadInput(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	other := newConn(t, memorytopo.NewFactory())
	for _, c := range []*memorytopo.Conn{c, other} {
		_, err := c.Create(ctx, "d/f", nil)
		require.NoError(t, err)
	}
	foreign, err := other.Lock(ctx, "d", "other store")
	require.NoError(t, err)
	ok := topo.UpdateOp("ok", nil, nil)

	_, err = c.Txn(ctx)
	requireCode(t, err, topo.InvalidArgument)
	for _, tc := range []struct {
		name string
		op   topo.TxnOp
		code topo.ErrorCode
	}{
		{"reserved", topo.CreateOp("d/locks/x", nil), topo.InvalidPath},
		{"reserved condition", topo.IfPresent("elections/x"), topo.InvalidPath},
		{"bad path", topo.DeleteOp("a//b", nil), topo.InvalidPath},
		{"duplicate write", topo.DeleteOp("ok", nil), topo.InvalidArgument},
		{"nil fence", topo.IfHeld(nil), topo.InvalidArgument},
		{"other store's fence", topo.IfHeld(foreign), topo.InvalidArgument},
		{"foreign fence", topo.IfHeld(fakeFence{}), topo.InvalidArgument},
		{"missing version", topo.IfVersion("ok", nil), topo.InvalidArgument},
		{"bad version", topo.UpdateOp("x", nil, topo.NumericVersion(-2)), topo.InvalidArgument},
		{"oversized", topo.CreateOp("x", make([]byte, topo.MaxValueSize+1)), topo.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, c)
			_, err := c.Txn(ctx, ok, tc.op)
			requireTxnErr(t, err, 1, tc.op.Kind, tc.code)
			require.Equal(t, before, snapshot(t, c))
		})
	}
	// The check order: bad input is reported by a closed Conn too, a
	// finished context before everything.
	cc := newConn(t, f)
	cc.Close()
	_, err = cc.Txn(ctx, topo.CreateOp("d/locks/x", nil))
	requireTxnErr(t, err, 0, topo.TxnCreate, topo.InvalidPath)
	_, err = cc.Txn(ctx, ok)
	requireCode(t, err, topo.Closed)
	done, cancel := context.WithCancel(ctx)
	cancel()
	_, err = cc.Txn(done, topo.CreateOp("d/locks/x", nil))
	requireCode(t, err, topo.Interrupted)
	require.NoError(t, foreign.Unlock(ctx))
}

// fakeFence is a Fence no backend issued.
type fakeFence struct{}

func (fakeFence) Token() int64                    { return 1 }
func (fakeFence) Done() <-chan struct{}           { return nil }
func (fakeFence) Check(ctx context.Context) error { return nil }

// wrappedFence is a decorator's Fence: IfHeld must see through it.
type wrappedFence struct{ topo.Fence }

func (w wrappedFence) Unwrap() topo.Fence { return w.Fence }

func TestTxnWrappedFence(t *testing.T) {
	ctx := testCtx(t)
	c := newConn(t, memorytopo.NewFactory())
	_, err := c.Create(ctx, "d/f", nil)
	require.NoError(t, err)
	ld, err := c.Lock(ctx, "d", "x")
	require.NoError(t, err)
	_, err = topo.GuardedUpdate(ctx, c, wrappedFence{ld}, "d/f", []byte("y"), nil)
	require.NoError(t, err)
	require.NoError(t, ld.Unlock(ctx))
	_, err = topo.GuardedUpdate(ctx, c, wrappedFence{ld}, "d/f", []byte("z"), nil)
	requireTxnErr(t, err, 0, topo.TxnIfHeld, topo.LockLost)
}

func TestTxnWatchesSeeWrites(t *testing.T) {
	checkNoGoroutineLeak(t)
	ctx, cancel := context.WithCancel(testCtx(t))
	defer cancel()
	c := newConn(t, memorytopo.NewFactory())
	_, err := c.Create(ctx, "w/a", []byte("1"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "w/b", []byte("1"))
	require.NoError(t, err)
	_, ch, err := c.Watch(ctx, "w/a")
	require.NoError(t, err)
	_, rch, err := c.WatchRecursive(ctx, "w/")
	require.NoError(t, err)

	vs, err := c.Txn(ctx, topo.UpdateOp("w/a", []byte("2"), nil), topo.DeleteOp("w/b", nil), topo.CreateOp("w/c", []byte("3")))
	require.NoError(t, err)
	ev := <-ch
	require.NoError(t, ev.Err)
	require.Equal(t, "2", string(ev.Contents))
	require.Equal(t, vs[0], ev.Version)

	seen := map[string]string{}
	for len(seen) < 3 {
		ev := <-rch
		if ev.Err != nil {
			requireCode(t, ev.Err, topo.NoNode)
			seen[ev.Path] = "deleted"
			continue
		}
		seen[ev.Path] = string(ev.Contents)
	}
	require.Equal(t, map[string]string{"w/a": "2", "w/b": "deleted", "w/c": "3"}, seen)
	cancel()
	for range ch {
	}
	for range rch {
	}
}

// TestTxnReadersSeeAllOrNone runs transactions that write the same
// counter to two files while readers Get one file and then the other:
// once a reader saw a transaction's value in the first file, the second
// file, read after it, holds that value or a later one (it would hold an
// earlier one if a reader could see some of a transaction's writes and
// not the others). List, one snapshot, always sees both equal.
func TestTxnReadersSeeAllOrNone(t *testing.T) {
	// No deadline: how long the rounds take depends on the machine.
	ctx := context.Background()
	c := newConn(t, memorytopo.NewFactory())
	const rounds = 2000
	_, err := c.Txn(ctx, topo.CreateOp("p/a", []byte("0")), topo.CreateOp("p/b", []byte("0")))
	require.NoError(t, err)
	num := func(b []byte) int {
		n, _ := strconv.Atoi(string(b))
		return n
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				a, _, err := c.Get(ctx, "p/a")
				if err != nil {
					errs <- err
					return
				}
				b, _, err := c.Get(ctx, "p/b")
				if err != nil {
					errs <- err
					return
				}
				if num(b) < num(a) {
					errs <- fmt.Errorf("saw a=%s then b=%s: half a transaction", a, b)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			kvs, err := c.List(ctx, "p/")
			if err != nil {
				errs <- err
				return
			}
			if string(kvs[0].Value) != string(kvs[1].Value) {
				errs <- fmt.Errorf("List saw a=%s b=%s", kvs[0].Value, kvs[1].Value)
				return
			}
		}
	})
	for i := 1; i <= rounds; i++ {
		v := []byte(strconv.Itoa(i))
		_, err := c.Txn(ctx, topo.UpdateOp("p/a", v, nil), topo.UpdateOp("p/b", v, nil))
		require.NoError(t, err)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestTxnFaultsAndPartition(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	_, err := c.Create(ctx, "a", []byte("1"))
	require.NoError(t, err)
	write := func(p string) topo.TxnOp { return topo.UpdateOp(p, []byte("2"), nil) }

	// SetError fails a transaction before anything is applied.
	before := snapshot(t, c)
	f.SetError(topo.Unavailable)
	_, err = c.Txn(ctx, write("a"))
	requireCode(t, err, topo.Unavailable)
	f.SetError(nil)
	require.Equal(t, before, snapshot(t, c))

	// A Fault for OpTxn matches when any op's path matches, and is
	// consumed once per transaction; an OpUpdate fault on another path
	// does not apply (TestWriteFaultsFailTransactions: on the path it does).
	remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpTxn, Path: "b", Times: 1, Err: topo.ResourceExhausted})
	removeUpd := f.AddFault(memorytopo.Fault{Op: memorytopo.OpUpdate, Path: "elsewhere", Err: topo.Timeout})
	_, err = c.Txn(ctx, topo.IfPresent("a"), write("b"), topo.DeleteOp("b2", nil))
	requireCode(t, err, topo.ResourceExhausted)
	_, err = c.Txn(ctx, write("b"))
	require.NoError(t, err)
	remove()
	removeUpd()
	require.EqualValues(t, 3, f.CallCount(memorytopo.OpTxn))

	// A partitioned Conn's transaction waits for Heal or its context,
	// writing nothing meanwhile.
	c.Partition()
	short, cancel := context.WithTimeout(ctx, 20*poll)
	_, err = c.Txn(short, write("a"))
	cancel()
	requireCode(t, err, topo.Timeout)
	got, _, err := newConn(t, f).Get(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "1", string(got))
	c.Heal()
	_, err = c.Txn(ctx, write("a"))
	require.NoError(t, err)

	// Closed after Close.
	c.Close()
	_, err = c.Txn(ctx, write("a"))
	requireCode(t, err, topo.Closed)
}

// TestTxnConcurrentWithUpdates mixes transactions, compare-and-set
// Updates of other files (the lock-free-of-each-other path), Gets,
// GetVersions of earlier versions and Lists, so that the race detector
// checks the locking; each counter ends at the number of increments.
func TestTxnConcurrentWithUpdates(t *testing.T) {
	// No deadline: how long the retries take depends on the machine.
	ctx := context.Background()
	c := newConn(t, memorytopo.NewFactory())
	const workers, incs = 4, 200
	for i := range workers {
		_, err := c.Create(ctx, fmt.Sprintf("n/%d", i), []byte("0"))
		require.NoError(t, err)
	}
	_, err := c.Create(ctx, "t/x", []byte("0"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "t/y", []byte("0"))
	require.NoError(t, err)
	var wg sync.WaitGroup
	// Watches come and go meanwhile, switching Update between its
	// per-file path and the write lock (a WatchRecursive is active).
	stop := make(chan struct{})
	var watching sync.WaitGroup
	watching.Go(func() {
		for {
			wctx, cancel := context.WithCancel(ctx)
			_, ch, err := c.Watch(wctx, "n/0")
			if err != nil {
				cancel()
				t.Error(err)
				return
			}
			_, rch, err := c.WatchRecursive(wctx, "n/")
			if err != nil {
				cancel()
				t.Error(err)
				return
			}
			stopped := false
			select {
			case <-ch:
			case <-rch:
			case <-stop:
				stopped = true
			}
			cancel()
			for range ch {
			}
			for range rch {
			}
			if stopped {
				return
			}
		}
	})
	for i := range workers {
		wg.Go(func() {
			p := fmt.Sprintf("n/%d", i)
			for range incs {
				for {
					b, v, err := c.Get(ctx, p)
					if err != nil {
						t.Error(err)
						return
					}
					n, _ := strconv.Atoi(string(b))
					_, err = c.Update(ctx, p, []byte(strconv.Itoa(n+1)), v)
					if topo.IsErrType(err, topo.BadVersion) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					if _, err := c.GetVersion(ctx, p, int64(v.(topo.NumericVersion))); err != nil {
						t.Error(err)
						return
					}
					break
				}
			}
		})
		// A transactional transfer between t/x and t/y, also on n/i.
		wg.Go(func() {
			for range incs {
				for {
					bx, vx, err := c.Get(ctx, "t/x")
					if err != nil {
						t.Error(err)
						return
					}
					by, vy, err := c.Get(ctx, "t/y")
					if err != nil {
						t.Error(err)
						return
					}
					x, _ := strconv.Atoi(string(bx))
					y, _ := strconv.Atoi(string(by))
					_, err = c.Txn(ctx, topo.UpdateOp("t/x", []byte(strconv.Itoa(x-1)), vx), topo.UpdateOp("t/y", []byte(strconv.Itoa(y+1)), vy))
					if topo.IsErrType(err, topo.BadVersion) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					break
				}
				if _, err := c.List(ctx, "n/"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	watching.Wait()
	for i := range workers {
		b, _, err := c.Get(ctx, fmt.Sprintf("n/%d", i))
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(incs), string(b))
	}
	bx, _, err := c.Get(ctx, "t/x")
	require.NoError(t, err)
	by, _, err := c.Get(ctx, "t/y")
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(-workers*incs), string(bx))
	require.Equal(t, strconv.Itoa(workers*incs), string(by))
}

// queueEntry is a lock's or a candidate's entry seen as a file through a
// Conn rooted at its queue's directory.
type queueEntry struct {
	dir      string // the Conn's root
	q        *memorytopo.Conn
	name     string // the entry's path under the root
	contents []byte
	ver      topo.Version
}

// queueEntries locks "q" (which holds the file q/f) and has "one" lead
// the election "el" on a Conn of a new store, and returns both entries
// and the version of q/f.
func queueEntries(t *testing.T, ctx context.Context) ([]queueEntry, topo.Version) {
	t.Helper()
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	fileVer, err := c.Create(ctx, "q/f", []byte("x"))
	require.NoError(t, err)
	_, err = c.Lock(ctx, "q", "holder")
	require.NoError(t, err)
	_, err = participate(t, c, "el", "one").Campaign(ctx, []byte("v"))
	require.NoError(t, err)
	var out []queueEntry
	for _, dir := range []string{"/root/q/locks", "/root/elections/el"} {
		q, err := f.NewConn("mem", dir)
		require.NoError(t, err)
		t.Cleanup(q.Close)
		names, err := q.ListDir(ctx, "", false)
		require.NoError(t, err)
		require.Len(t, names, 1, dir)
		e := queueEntry{dir: dir, q: q, name: names[0].Name}
		e.contents, e.ver, err = q.Get(ctx, e.name)
		require.NoError(t, err)
		out = append(out, e)
	}
	return out, fileVer
}

// TestEntryWritesFailAsTheirTxnOps writes onto a lock's and a candidate's
// entry through a Conn rooted at their queue's directory, where an entry
// reads as a file: Create, Update (with and without a version) and
// Delete fail with the same error as the same write as a transaction's
// only op (NodeExists, NoNode for Delete: an entry is no file), and the
// entry is left as it was.
func TestEntryWritesFailAsTheirTxnOps(t *testing.T) {
	ctx := testCtx(t)
	entries, _ := queueEntries(t, ctx)
	for _, e := range entries {
		q, name, ver := e.q, e.name, e.ver
		cases := []struct {
			code  topo.ErrorCode
			write func() error
			op    topo.TxnOp
		}{
			{topo.NodeExists, func() error { _, err := q.Create(ctx, name, nil); return err }, topo.CreateOp(name, nil)},
			{topo.NodeExists, func() error { _, err := q.Update(ctx, name, nil, nil); return err }, topo.UpdateOp(name, nil, nil)},
			{topo.NodeExists, func() error { _, err := q.Update(ctx, name, nil, ver); return err }, topo.UpdateOp(name, nil, ver)},
			{topo.NoNode, func() error { return q.Delete(ctx, name, nil) }, topo.DeleteOp(name, nil)},
			{topo.NoNode, func() error { return q.Delete(ctx, name, ver) }, topo.DeleteOp(name, ver)},
		}
		for _, tc := range cases {
			err := tc.write()
			requireCode(t, err, tc.code)
			_, txnErr := q.Txn(ctx, tc.op)
			requireTxnErr(t, txnErr, 0, tc.op.Kind, tc.code)
			var te *topo.TxnError
			require.ErrorAs(t, txnErr, &te)
			require.Equal(t, err.Error(), te.Err.Error(), "%s %v", e.dir, tc.op.Kind)
			got, gotVer, err := q.Get(ctx, name)
			require.NoError(t, err)
			require.Equal(t, e.contents, got)
			require.Equal(t, ver, gotVer)
		}
	}
}

// TestEntryConditions evaluates conditions on a lock's and a candidate's
// entry through a Conn rooted at their queue's directory: an entry counts
// as present at the version Get reads (IfPresent and IfVersion at that
// version hold, and the transaction's write is applied), IfAbsent fails
// with NodeExists and IfVersion at another version with BadVersion.
func TestEntryConditions(t *testing.T) {
	ctx := testCtx(t)
	entries, other := queueEntries(t, ctx)
	for _, e := range entries {
		_, err := e.q.Txn(ctx, topo.IfPresent(e.name), topo.IfVersion(e.name, e.ver), topo.CreateOp("written", nil))
		require.NoError(t, err, e.dir)
		_, _, err = e.q.Get(ctx, "written")
		require.NoError(t, err, e.dir)
		_, err = e.q.Txn(ctx, topo.IfAbsent(e.name), topo.UpdateOp("written", nil, nil))
		requireTxnErr(t, err, 0, topo.TxnIfAbsent, topo.NodeExists)
		_, err = e.q.Txn(ctx, topo.IfVersion(e.name, other), topo.UpdateOp("written", nil, nil))
		requireTxnErr(t, err, 0, topo.TxnIfVersion, topo.BadVersion)
	}
}
