package vitessinterop

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vtopo "vitess.io/vitess/go/vt/topo"

	"github.com/topokit/topokit/topo"
)

// holdFor is how long a Lock that must not succeed is left waiting. The
// assertion is that it never succeeds while the other library holds the
// lock; the deadline only ends the wait, so load cannot make it flaky.
const holdFor = 500 * time.Millisecond

// TestLockDirections holds a directory's lock with one library and checks
// that the other's TryLock fails with NodeExists and its Lock waits (until
// its deadline: Timeout) while it is held, then takes it once released;
// both directions, on one directory. It logs what topokit's TryLock says
// about Vitess's holder.
func TestLockDirections(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			vc, tc := s.vitess(t, root), s.topokit(t, root)
			_, err := vc.Create(ctx, "d/f", []byte("x"))
			require.NoError(t, err)

			// Vitess holds; topokit must not get it.
			vld, err := vc.Lock(ctx, "d", "vitess-holder")
			require.NoError(t, err)
			_, err = tc.TryLock(ctx, "d", "topokit-try")
			require.True(t, topo.IsErrType(err, topo.NodeExists), "topokit TryLock while Vitess holds: %v", err)
			t.Logf("topokit TryLock while Vitess's \"vitess-holder\" holds: %v", err)
			wctx, cancel := context.WithTimeout(ctx, holdFor)
			_, err = tc.Lock(wctx, "d", "topokit-wait")
			cancel()
			require.True(t, topo.IsErrType(err, topo.Timeout), "topokit Lock while Vitess holds: %v", err)
			got := make(chan topo.LockDescriptor, 1)
			go func() {
				ld, err := tc.Lock(ctx, "d", "topokit-holder")
				assert.NoError(t, err, "topokit Lock after Vitess's Unlock")
				got <- ld
			}()
			s.waitLockers(ctx, t, root, "d", 2)
			require.NoError(t, vld.Unlock(ctx))
			tld := <-got
			require.NotNil(t, tld)
			require.NoError(t, tld.Check(ctx))

			// topokit holds; Vitess must not get it.
			_, err = vc.TryLock(ctx, "d", "vitess-try")
			require.True(t, vtopo.IsErrType(err, vtopo.NodeExists), "Vitess TryLock while topokit holds: %v", err)
			if s.name != "consul" {
				// On Consul, Vitess's Lock (the api package's Lock) checks its
				// stop channel only between blocking queries of
				// LockWaitTime (15 s), so it would overrun the deadline by
				// up to 15 s; TryLock above and TestLockExclusion cover
				// this direction there.
				wctx, cancel = context.WithTimeout(ctx, holdFor)
				_, err = vc.Lock(wctx, "d", "vitess-wait")
				cancel()
				require.True(t, vtopo.IsErrType(err, vtopo.Timeout), "Vitess Lock while topokit holds: %v", err)
			}
			vgot := make(chan vtopo.LockDescriptor, 1)
			go func() {
				ld, err := vc.Lock(ctx, "d", "vitess-holder-2")
				assert.NoError(t, err, "Vitess Lock after topokit's Unlock")
				vgot <- ld
			}()
			s.waitLockers(ctx, t, root, "d", 2)
			require.NoError(t, tld.Check(ctx), "topokit's lock while Vitess waits")
			require.NoError(t, tld.Unlock(ctx))
			vld = <-vgot
			require.NotNil(t, vld)
			require.NoError(t, vld.Check(ctx))
			_, err = tc.TryLock(ctx, "d", "topokit-try")
			require.True(t, topo.IsErrType(err, topo.NodeExists), "topokit TryLock while Vitess holds: %v", err)
			require.NoError(t, vld.Unlock(ctx))

			// Free again: topokit's TryLock takes it.
			tld, err = tc.TryLock(ctx, "d", "topokit-try")
			require.NoError(t, err)
			require.NoError(t, tld.Unlock(ctx))
		})
	}
}

// TestLockExclusion has two Vitess and two topokit Conns take and release
// one directory's lock many times each, concurrently. An in-process owner
// counter proves that it never has two holders, and while each holds it,
// the other library's TryLock fails with NodeExists.
func TestLockExclusion(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			vtry, ttry := s.vitess(t, root), s.topokit(t, root)
			_, err := vtry.Create(ctx, "d/f", []byte("x"))
			require.NoError(t, err)
			const cycles = 10
			var owners atomic.Int32
			var wg sync.WaitGroup
			held := func(who string) {
				assert.Equal(t, int32(1), owners.Add(1), "%s holds beside another holder", who)
			}
			for i := range 2 {
				vc, tc := s.vitess(t, root), s.topokit(t, root)
				wg.Add(2)
				go func() {
					defer wg.Done()
					for k := range cycles {
						who := fmt.Sprintf("vitess%d-%d", i, k)
						ld, err := vc.Lock(ctx, "d", who)
						if !assert.NoError(t, err, who) {
							return
						}
						held(who)
						tld, err := ttry.TryLock(ctx, "d", "topokit-try")
						if !assert.True(t, topo.IsErrType(err, topo.NodeExists), "topokit TryLock while %s holds: %v", who, err) && err == nil {
							assert.NoError(t, tld.Unlock(ctx))
						}
						owners.Add(-1)
						assert.NoError(t, ld.Unlock(ctx), who)
					}
				}()
				go func() {
					defer wg.Done()
					for k := range cycles {
						who := fmt.Sprintf("topokit%d-%d", i, k)
						ld, err := tc.Lock(ctx, "d", who)
						if !assert.NoError(t, err, who) {
							return
						}
						held(who)
						vld, err := vtry.TryLock(ctx, "d", "vitess-try")
						if !assert.True(t, vtopo.IsErrType(err, vtopo.NodeExists), "Vitess TryLock while %s holds: %v", who, err) && err == nil {
							assert.NoError(t, vld.Unlock(ctx))
						}
						assert.NoError(t, ld.Check(ctx), who)
						owners.Add(-1)
						assert.NoError(t, ld.Unlock(ctx), who)
					}
				}()
			}
			wg.Wait()
		})
	}
}

// TestTryLockNamesHolder checks that topokit's TryLock, failing with
// NodeExists because a Vitess process holds the lock, names the holder:
// its error carries the contents Vitess stored with the lock (Vitess's
// description of the holder), which every backend's layout keeps in the
// holder's entry (etcd: the value of <dir>/locks/<lease>, ZooKeeper: the
// data of <dir>/locks/<sequence>, Consul: the value of <dir>/Lock).
// topokit's TryLock names only the directory (etcd, ZooKeeper) or the
// holder's session (Consul) today.
func TestTryLockNamesHolder(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			vc, tc := s.vitess(t, root), s.topokit(t, root)
			_, err := vc.Create(ctx, "d/f", []byte("x"))
			require.NoError(t, err)
			const holder = `{"Action":"vitess-holder-7","HostName":"vt1"}`
			vld, err := vc.Lock(ctx, "d", holder)
			require.NoError(t, err)
			defer func() { assert.NoError(t, vld.Unlock(ctx)) }()
			_, err = tc.TryLock(ctx, "d", "topokit-try")
			require.True(t, topo.IsErrType(err, topo.NodeExists), "topokit TryLock while Vitess holds: %v", err)
			assert.Contains(t, err.Error(), holder, "topokit TryLock's NodeExists names Vitess's holder")
		})
	}
}
