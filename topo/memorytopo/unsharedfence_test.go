package memorytopo_test

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestUnsharedLockFencedWrites: Conns of one store contend for one lock
// while sessions expire at random points (one Conn's expiry may land
// while another's lock is being taken, checked, released or written
// under); holders take Done before the writes, after, or never. Each
// holder appends its token to a file with IfHeld writes (guarded on the
// file's version too); the file's history is then the store's order of
// the writes of holders that held. Two holders at once would interleave
// their tokens: the history must be non-decreasing. A holder whose Done
// is closed, or whose Check said LockLost, must fail its IfHeld write.
// No sleeps: run with -race and a high -count.
func TestUnsharedLockFencedWrites(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	const conns, rounds = 4, 60
	cs := make([]*memorytopo.Conn, conns)
	for i := range cs {
		cs[i] = newConn(t, f)
	}
	_, err := cs[0].Create(ctx, "d/f", nil)
	require.NoError(t, err)

	// write appends tok to d/f under IfHeld(ld) and the version read;
	// it reports whether the write went in.
	write := func(c *memorytopo.Conn, ld topo.LockDescriptor, tok int64) bool {
		for {
			data, v, err := c.Get(ctx, "d/f")
			require.NoError(t, err)
			next := append(data, []byte(strconv.FormatInt(tok, 10)+",")...)
			_, err = c.Txn(ctx, topo.IfHeld(ld), topo.IfVersion("d/f", v), topo.UpdateOp("d/f", next, nil))
			if err == nil {
				return true
			}
			if te, ok := errors.AsType[*topo.TxnError](err); ok && te.Index == 1 {
				continue // another write came between: read again
			}
			return false
		}
	}

	var wg sync.WaitGroup
	for w, c := range cs {
		wg.Go(func() {
			for r := range rounds {
				var ld topo.LockDescriptor
				var err error
				if r%2 == 0 {
					ld, err = c.Lock(ctx, "d", "x")
				} else {
					ld, err = c.LockName(ctx, "n", "x")
					if err == nil {
						// Another worker may expire this Conn's session
						// between the two calls.
						err = ld.Unlock(ctx)
						require.True(t, err == nil || topo.IsErrType(err, topo.LockLost), "%v", err)
					}
					ld, err = c.Lock(ctx, "d", "x")
				}
				if err != nil {
					require.True(t, topo.IsErrType(err, topo.LockLost), "%v", err)
					continue
				}
				var done <-chan struct{}
				if (w+r)%3 == 0 {
					done = ld.Done()
				}
				if (w+r)%5 == 2 {
					// Another Conn's session (maybe the holder's).
					cs[(w+r)%conns].ExpireSession()
				}
				tok := ld.Token()
				wrote := write(c, ld, tok)
				if done != nil && isClosed(done) {
					require.False(t, write(c, ld, tok), "IfHeld write after Done closed")
				}
				_ = wrote
				if err := ld.Check(ctx); topo.IsErrType(err, topo.LockLost) {
					require.False(t, write(c, ld, tok), "IfHeld write after Check said LockLost")
				}
				if done == nil && r%4 == 1 {
					done = ld.Done()
				}
				err = ld.Unlock(ctx)
				require.True(t, err == nil || topo.IsErrType(err, topo.LockLost), "%v", err)
				if done != nil {
					require.True(t, isClosed(done), "Done open after Unlock")
				}
				require.False(t, write(c, ld, tok), "IfHeld write after Unlock")
				requireCode(t, ld.Unlock(ctx), topo.Interrupted)
			}
		})
	}
	wg.Wait()

	data, _, err := cs[0].Get(ctx, "d/f")
	require.NoError(t, err)
	var last int64
	for _, s := range strings.Split(strings.TrimSuffix(string(data), ","), ",") {
		if s == "" {
			continue
		}
		tok, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, tok, last, "two holders' writes interleaved: %s", data)
		last = tok
	}
	t.Logf("history: %d writes, last token %d", strings.Count(string(data), ","), last)
	// Every lock was handed on: the directory is free.
	ld, err := cs[0].TryLock(ctx, "d", "z")
	require.NoError(t, err)
	require.NoError(t, ld.Unlock(ctx))
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestUnsharedLocksLapse: Lock, LockName and LockWithTTL locks granted at
// once (unshared) lapse with their leases when their Conn is partitioned:
// another Conn gets each lock only after the holder's Done (taken before
// the partition) closed, a Done taken afterwards is closed at once, and
// after Heal Check says LockLost, an IfHeld write fails, Unlock says
// LockLost, then Interrupted.
func TestUnsharedLocksLapse(t *testing.T) {
	ctx := testCtx(t)
	const ttl = 20 * time.Millisecond
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: ttl, NamedLockTTL: ttl})
	a, b := newConn(t, f), newConn(t, f)
	for _, d := range []string{"l", "t"} {
		_, err := a.Create(ctx, d+"/f", nil)
		require.NoError(t, err)
	}
	lock, err := a.Lock(ctx, "l", "a")
	require.NoError(t, err)
	named, err := a.LockName(ctx, "n", "a")
	require.NoError(t, err)
	withTTL, err := a.LockWithTTL(ctx, "t", "a", ttl)
	require.NoError(t, err)
	before := named.Done()

	a.Partition()
	// b is granted each lock once a's lease lapsed (no sleep: Lock waits).
	for _, take := range []func() (topo.LockDescriptor, error){
		func() (topo.LockDescriptor, error) { return b.Lock(ctx, "l", "b") },
		func() (topo.LockDescriptor, error) { return b.LockName(ctx, "n", "b") },
		func() (topo.LockDescriptor, error) { return b.LockWithTTL(ctx, "t", "b", time.Minute) },
	} {
		ld, err := take()
		require.NoError(t, err)
		defer func() { require.NoError(t, ld.Unlock(ctx)) }()
	}
	require.True(t, isClosed(before), "Done taken before the lapse is open while another holds")
	for _, ld := range []topo.LockDescriptor{lock, named, withTTL} {
		require.True(t, isClosed(ld.Done()), "Done taken after the lapse is open")
	}
	a.Heal()
	for _, ld := range []topo.LockDescriptor{lock, named, withTTL} {
		requireCode(t, ld.Check(ctx), topo.LockLost)
		_, err := a.Txn(ctx, topo.IfHeld(ld), topo.UpdateOp("l/f", []byte("a"), nil))
		require.Error(t, err)
		requireCode(t, ld.Unlock(ctx), topo.LockLost)
		requireCode(t, ld.Unlock(ctx), topo.Interrupted)
	}
}
