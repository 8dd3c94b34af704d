package claims_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// roomDriver is the fake driver with the Roomer step: CreateLock is its
// Create, the entry set in a new LockRoom; it records the tokens of the
// entries it created so.
type roomDriver struct {
	*driver
	asked []int64
}

func (d *roomDriver) CreateLock(ctx context.Context, q claims.Queue, contents string, o claims.CreateOptions) (*claims.LockRoom, *claims.Session, error) {
	e, s, err := d.driver.Create(ctx, q, contents, o)
	if err != nil {
		return nil, nil, err
	}
	d.asked = append(d.asked, e.Token)
	r := &claims.LockRoom{}
	r.SetEntry(e.Token, e.Key, e.Session, e.Contents, e.Granted, e.Ref)
	return r, s, nil
}

// TestRoomerHoldsEachLock: with a Roomer driver, each lock (Lock,
// TryLock, LockName, LockWithTTL) creates its entry through CreateLock
// once, and each descriptor works as one the engine allocated, a waiter's
// included; a TryLock of a held lock fails as with Create.
func TestRoomerHoldsEachLock(t *testing.T) {
	ctx := t.Context()
	{
		s := newStore()
		d := &roomDriver{driver: &driver{s: s}}
		e := claims.New(d, claims.Options{})
		var lds []topo.LockDescriptor
		ld, err := e.Lock(ctx, "a", "x")
		require.NoError(t, err)
		lds = append(lds, ld)
		ld, err = e.TryLock(ctx, "b", "x")
		require.NoError(t, err)
		lds = append(lds, ld)
		ld, err = e.LockName(ctx, "c", "x")
		require.NoError(t, err)
		lds = append(lds, ld)
		ld, err = e.LockWithTTL(ctx, "d", "x", 1<<40)
		require.NoError(t, err)
		lds = append(lds, ld)
		require.Equal(t, []int64{1, 2, 3, 4}, d.asked)
		_, err = e.TryLock(ctx, "a", "z")
		require.True(t, topo.IsErrType(err, topo.NodeExists), "%v", err)
		require.Equal(t, []int64{1, 2, 3, 4}, d.asked)

		// A waiter's descriptor, granted once the holder unlocks.
		other := claims.New(&roomDriver{driver: &driver{s: s}}, claims.Options{})
		got := make(chan topo.LockDescriptor, 1)
		failed := make(chan error, 1)
		go func() {
			w, err := other.Lock(ctx, "a", "y")
			if err != nil {
				failed <- err
				return
			}
			got <- w
		}()
		eventually(t, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return len(s.queues[key(claims.Queue{Path: "a"})]) == 2
		})
		require.NoError(t, lds[0].Unlock(ctx))
		var w topo.LockDescriptor
		select {
		case w = <-got:
		case err := <-failed:
			t.Fatal(err)
		}
		require.NoError(t, w.Check(ctx))
		require.NoError(t, w.Unlock(ctx))

		for _, ld := range lds[1:] {
			require.NoError(t, ld.Check(ctx))
			require.NoError(t, ld.Unlock(ctx))
			require.True(t, topo.IsErrType(ld.Unlock(ctx), topo.Interrupted))
		}
	}
}
