package memorytopo_test

import (
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
