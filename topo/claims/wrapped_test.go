package claims_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// wrappingDriver is the fake driver returning ErrNotHeld wrapped with
// context, as idiomatic Go code returns a sentinel error.
type wrappingDriver struct{ *driver }

func wrapNotHeld(err error) error {
	if err == claims.ErrNotHeld {
		return fmt.Errorf("fake store: entry gone: %w", err)
	}
	return err
}

func (d wrappingDriver) Delete(ctx context.Context, q claims.Queue, s *claims.Session, e claims.Entry) error {
	return wrapNotHeld(d.driver.Delete(ctx, q, s, e))
}

func (d wrappingDriver) SetValue(ctx context.Context, q claims.Queue, s *claims.Session, e claims.Entry, v []byte) error {
	return wrapNotHeld(d.driver.SetValue(ctx, q, s, e, v))
}

// dropBehind removes every entry of q from the store, with their sessions
// alive, as another client deleting them would.
func (s *store) dropBehind(q claims.Queue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.queues[key(q)] {
		close(x.gone)
	}
	delete(s.queues, key(q))
	s.notify()
}

// TestWrappedErrNotHeld: the engine finds ErrNotHeld with errors.Is, so a
// driver that wraps it gets the same outcome as one that returns it bare:
// the Unlock of a lock whose entry went is LockLost and the Proclaim of a
// leader whose entry went is NotLeader (not the Unavailable of an unknown
// store error, with a removal retried in the background).
func TestWrappedErrNotHeld(t *testing.T) {
	ctx := t.Context()
	s := newStore()
	e := claims.New(wrappingDriver{&driver{s: s}}, claims.Options{})
	defer e.Close()

	l, err := e.LockName(ctx, "d", "x")
	require.NoError(t, err)
	s.dropBehind(claims.Queue{Path: "d"})
	err = l.Unlock(ctx)
	require.Truef(t, topo.IsErrType(err, topo.LockLost), "Unlock of a lock whose entry went: want LockLost, got %v", err)

	p, err := e.NewLeaderParticipation("e", "id")
	require.NoError(t, err)
	defer p.Stop()
	_, err = p.WaitForLeadership()
	require.NoError(t, err)
	s.dropBehind(claims.Queue{Path: "e", Election: true})
	err = p.Proclaim(ctx, []byte("v"))
	require.Truef(t, topo.IsErrType(err, topo.NotLeader), "Proclaim of a leader whose entry went: want NotLeader, got %v", err)
}
