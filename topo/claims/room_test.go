package claims_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// roomDriver is the fake driver with the Roomer step: its entries' Ref is
// their token; it hands out a new LockRoom per asked entry (none when
// nilRooms is set) and records the tokens it was asked for.
type roomDriver struct {
	*driver
	nilRooms bool
	asked    []int64
}

func (d *roomDriver) Create(ctx context.Context, q claims.Queue, contents string, o claims.CreateOptions) (claims.Entry, *claims.Session, error) {
	e, s, err := d.driver.Create(ctx, q, contents, o)
	e.Ref = e.Token
	return e, s, err
}

func (d *roomDriver) Room(ref any) *claims.LockRoom {
	d.asked = append(d.asked, ref.(int64))
	if d.nilRooms {
		return nil
	}
	return &claims.LockRoom{}
}

// TestRoomerHoldsEachLock: with a Roomer driver, each lock (Lock,
// TryLock, LockName, LockWithTTL) asks for the room of its own new entry
// once, and each descriptor works as one the engine allocated, a waiter's
// included; a driver with no room for an entry (nil) gets the engine's.
func TestRoomerHoldsEachLock(t *testing.T) {
	ctx := t.Context()
	for _, nilRooms := range []bool{false, true} {
		s := newStore()
		d := &roomDriver{driver: &driver{s: s}, nilRooms: nilRooms}
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
