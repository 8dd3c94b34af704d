package memorytopo_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestGuardedUpdateRacesRelease races GuardedUpdate loops (a CAS one and
// an unconditional one, both on an existing file: Txn's in-place fast
// path) against the end of the fence (Unlock, ExpireSession, Close of
// the holder's Conn) and checks that no guarded write lands after the
// fence is gone: the file's version read once the release returned is
// the last one, every write the loops saw succeed is at most that
// version, and every guarded write from then on fails with LockLost (or
// Closed, after Close) at op 0.
func TestGuardedUpdateRacesRelease(t *testing.T) {
	for _, end := range []string{"unlock", "expire", "close"} {
		t.Run("end="+end, func(t *testing.T) {
			ctx := testCtx(t)
			f := memorytopo.NewFactory()
			a, err := f.NewConn("race", "/root")
			require.NoError(t, err)
			defer a.Close()
			r, err := f.NewConn("race", "/root")
			require.NoError(t, err)
			defer r.Close()
			_, err = a.Create(ctx, "d/f", []byte("v0"))
			require.NoError(t, err)
			ld, err := a.Lock(ctx, "d", "race")
			require.NoError(t, err)

			type result struct {
				last  int64 // highest version a guarded write returned
				wrote int
				err   error // the first failure
			}
			started := make(chan struct{}, 2)
			results := make(chan result, 2)
			for _, cas := range []bool{true, false} {
				go func() {
					var res result
					for {
						var want topo.Version
						if cas {
							_, v, err := a.Get(ctx, "d/f")
							if err != nil {
								res.err = err // Closed after Close
								break
							}
							want = v
						}
						v, err := topo.GuardedUpdate(ctx, a, ld, "d/f", []byte("guarded"), want)
						if err != nil {
							if cas && topo.IsErrType(err, topo.BadVersion) {
								continue // the other loop wrote in between
							}
							res.err = err
							break
						}
						res.wrote++
						if res.wrote == 1 {
							started <- struct{}{}
						}
						res.last = max(res.last, int64(v.(topo.NumericVersion)))
					}
					results <- res
				}()
			}
			<-started
			<-started
			switch end {
			case "unlock":
				require.NoError(t, ld.Unlock(ctx))
			case "expire":
				a.ExpireSession()
			case "close":
				a.Close()
			}
			requireClosed(t, ld.Done(), "after "+end)
			_, after, err := r.Get(ctx, "d/f")
			require.NoError(t, err)
			final := int64(after.(topo.NumericVersion))
			for range 2 {
				res := <-results
				require.Positive(t, res.wrote)
				require.LessOrEqual(t, res.last, final, "a guarded write landed after the fence ended")
				if end == "close" && topo.IsErrType(res.err, topo.Closed) {
					continue
				}
				requireTxnErr(t, res.err, 0, topo.TxnIfHeld, topo.LockLost)
			}
			_, again, err := r.Get(ctx, "d/f")
			require.NoError(t, err)
			require.Equal(t, final, int64(again.(topo.NumericVersion)), "the file changed after the fence ended")
		})
	}
}

// TestGuardedUpdateFastPathErrors checks that Txn's fast path for
// IfHeld+UpdateOp returns exactly the errors (message, *topo.TxnError
// index and kind, code) of the general path, which the same two ops plus
// a trailing condition that holds take.
func TestGuardedUpdateFastPathErrors(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	other := newConn(t, memorytopo.NewFactory())
	v, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "dir/sub/f", []byte("x"))
	require.NoError(t, err)
	ld, err := c.Lock(ctx, "d", "t")
	require.NoError(t, err)
	_, err = c.Create(ctx, "e/f", []byte("x"))
	require.NoError(t, err)
	gone, err := c.Lock(ctx, "e", "t")
	require.NoError(t, err)
	require.NoError(t, gone.Unlock(ctx))
	_, err = other.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	foreign, err := other.Lock(ctx, "d", "t")
	require.NoError(t, err)
	stale := topo.NumericVersion(int64(v.(topo.NumericVersion)) + 1000)
	cases := []struct {
		name    string
		fence   topo.Fence
		path    string
		value   []byte
		version topo.Version
	}{
		{"nil fence", nil, "d/f", []byte("y"), nil},
		{"other store", foreign, "d/f", []byte("y"), nil},
		{"unlocked", gone, "d/f", []byte("y"), nil},
		{"wrapped unlocked", wrappedFence{gone}, "d/f", []byte("y"), v},
		{"bad path", ld, "", []byte("y"), nil},
		{"reserved", ld, "d/locks/x", []byte("y"), nil},
		{"negative version", ld, "d/f", []byte("y"), topo.NumericVersion(-1)},
		{"stale", ld, "d/f", []byte("y"), stale},
		{"absent with version", ld, "d/nope", []byte("y"), v},
		{"directory with version", ld, "dir/sub", []byte("y"), v},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, fast := c.Txn(ctx, topo.IfHeld(tc.fence), topo.UpdateOp(tc.path, tc.value, tc.version))
			_, general := c.Txn(ctx, topo.IfHeld(tc.fence), topo.UpdateOp(tc.path, tc.value, tc.version), topo.IfAbsent("zz/none"))
			require.Error(t, fast)
			require.Error(t, general)
			require.Equal(t, general.Error(), fast.Error())
			var tf, tg *topo.TxnError
			require.Equal(t, errors.As(general, &tg), errors.As(fast, &tf))
			if tg != nil {
				require.Equal(t, tg.Index, tf.Index)
				require.Equal(t, tg.Kind, tf.Kind)
			}
		})
	}
	_, got, err := c.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, v, got, "a failed guarded update wrote")
}
