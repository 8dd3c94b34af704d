package claims_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// lateGate holds a waiter's first look at its queue until the test
// releases it: reading is told (when it has room) as the read begins,
// and the read, once release is closed, sees the store as it is then.
type lateGate struct {
	reading chan struct{}
	release chan struct{}
}

func newLateGate() lateGate {
	return lateGate{make(chan struct{}, 1), make(chan struct{})}
}

func (g lateGate) hold() {
	select {
	case g.reading <- struct{}{}:
	default:
	}
	<-g.release
}

// lateList is the fake driver (List, WaitGone) with its reads held.
type lateList struct {
	*driver
	lateGate
}

func (d lateList) List(ctx context.Context, q claims.Queue) ([]claims.Entry, error) {
	d.hold()
	return d.driver.List(ctx, q)
}

// lateAhead is the fake Aheader with its reads held.
type lateAhead struct {
	aheadDriver
	lateGate
}

func (d lateAhead) Ahead(ctx context.Context, q claims.Queue, e claims.Entry, most int) ([]claims.Entry, bool, error) {
	d.hold()
	return d.aheadDriver.Ahead(ctx, q, e, most)
}

// lateGone is the fake GoneSignaler with its reads held.
type lateGone struct {
	signalDriver
	lateGate
}

func (d lateGone) GoneAhead(q claims.Queue, e claims.Entry) (<-chan struct{}, int, bool) {
	d.hold()
	return d.signalDriver.GoneAhead(q, e)
}

// lateAcquire is the fake driver with an Acquire step (Consul's) held:
// once released, it grants the entry if it is still in the store, and
// answers ErrNotHeld if it is gone.
type lateAcquire struct {
	*driver
	lateGate
}

func (d lateAcquire) Acquire(ctx context.Context, q claims.Queue, s *claims.Session, e claims.Entry) (claims.Entry, error) {
	d.hold()
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	if _, x := d.find(q, e); x == nil {
		return claims.Entry{}, claims.ErrNotHeld
	}
	e.Granted = true
	return e, nil
}

// TestWithdrawnWaiterInterrupted: a candidate whose look at the queue is
// answered only after Stop (or Resign) withdrew its entry finds the entry
// gone; that is the withdrawal's doing, not a lost session, so its
// WaitForLeadership returns Interrupted, as Stop and Resign document,
// never LockLost. On each kind of driver's wait: List and WaitGone, Ahead
// (etcd, zk, Consul), the Acquire step answering ErrNotHeld (Consul),
// GoneAhead (memorytopo). (memorytopo's
// TestLeadWaitersStopAndClose got LockLost about once in 200 runs.)
func TestWithdrawnWaiterInterrupted(t *testing.T) {
	drivers := []struct {
		name string
		new  func(g lateGate) (claims.Driver, *driver)
	}{
		{"List", func(g lateGate) (claims.Driver, *driver) {
			d := &driver{s: newStore()}
			return lateList{d, g}, d
		}},
		{"Ahead", func(g lateGate) (claims.Driver, *driver) {
			d := &driver{s: newStore()}
			return lateAhead{aheadDriver{d}, g}, d
		}},
		{"Acquire", func(g lateGate) (claims.Driver, *driver) {
			d := &driver{s: newStore()}
			return lateAcquire{d, g}, d
		}},
		{"GoneAhead", func(g lateGate) (claims.Driver, *driver) {
			d := &driver{s: newStore()}
			return lateGone{signalDriver{d}, g}, d
		}},
	}
	ends := []struct {
		name string
		end  func(t *testing.T, p topo.LeaderParticipation)
	}{
		{"Stop", func(_ *testing.T, p topo.LeaderParticipation) { p.Stop() }},
		{"Resign", func(t *testing.T, p topo.LeaderParticipation) { require.NoError(t, p.Resign(t.Context())) }},
	}
	for _, dr := range drivers {
		for _, end := range ends {
			t.Run(dr.name+"/"+end.name, func(t *testing.T) {
				g := newLateGate()
				d, fd := dr.new(g)
				e := claims.New(d, claims.Options{})
				defer e.Close()
				p, err := e.NewLeaderParticipation("el", "me")
				require.NoError(t, err)
				defer p.Stop()
				got := make(chan error, 1)
				go func() { _, err := p.WaitForLeadership(); got <- err }()
				<-g.reading
				end.end(t, p) // withdraws the entry while the read is held
				fd.s.mu.Lock()
				n := len(fd.s.queues[key(claims.Queue{Path: "el", Election: true})])
				fd.s.mu.Unlock()
				require.Equal(t, 0, n, "the entry is withdrawn")
				close(g.release)
				select {
				case err := <-got:
					require.True(t, topo.IsErrType(err, topo.Interrupted), "got %v", err)
				case <-time.After(longWait):
					t.Fatal("WaitForLeadership outlived its withdrawal")
				}
			})
		}
	}
}
