package claims_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// aheadDriver is the fake driver with claims.Aheader: it counts its Ahead
// reads (in the store's lists counter), and its List must not be called.
type aheadDriver struct{ *driver }

func (d aheadDriver) List(ctx context.Context, q claims.Queue) ([]claims.Entry, error) {
	panic("List called on an Aheader")
}

func (d aheadDriver) Ahead(ctx context.Context, q claims.Queue, e claims.Entry, most int) ([]claims.Entry, bool, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	i, x := d.find(q, e)
	if x == nil {
		return nil, false, nil
	}
	var out []claims.Entry
	for _, y := range s.queues[key(q)][max(0, i-most):i] {
		out = append(out, y.e)
	}
	return out, true, nil
}

// TestAheaderHandsOverInOrder: on a driver with Ahead, waiters are
// granted in the order they queued, each handover reading the entries
// ahead of one waiter at most once (none when its last read showed only
// its predecessor ahead), and an uncontended lock is granted at once.
func TestAheaderHandsOverInOrder(t *testing.T) {
	s := newStore()
	ctx := t.Context()
	newAhead := func() *claims.Engine { return claims.New(aheadDriver{&driver{s: s}}, claims.Options{}) }
	holder, err := newAhead().LockName(ctx, "d", "holder")
	require.NoError(t, err)
	const n = 4
	got := make(chan topo.LockDescriptor, n)
	for i := range n {
		e := newAhead()
		go func() {
			ld, err := e.LockName(ctx, "d", "w")
			if err != nil {
				t.Error(err)
			}
			got <- ld
		}()
		eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.waiting == i+1 })
	}
	cur, last := holder, holder.Token()
	for range n {
		s.mu.Lock()
		before := s.lists
		s.mu.Unlock()
		require.NoError(t, cur.Unlock(ctx))
		cur = <-got
		require.Greater(t, cur.Token(), last, "granted in the order queued")
		last = cur.Token()
		s.mu.Lock()
		require.LessOrEqual(t, s.lists-before, 1, "at most one read per handover")
		s.mu.Unlock()
	}
	require.NoError(t, cur.Unlock(ctx))
}

// TestCampaignBehindWaitForLeadershipEndsWithCtx: a Campaign that waits
// for a WaitForLeadership of the same participant returns when its ctx
// ends (it failed before: it waited on a mutex the waiter held).
func TestCampaignBehindWaitForLeadershipEndsWithCtx(t *testing.T) {
	s := newStore()
	e1, _ := newEngine(s)
	e2, _ := newEngine(s)
	p1, err := e1.NewLeaderParticipation("el", "one")
	require.NoError(t, err)
	_, err = p1.WaitForLeadership()
	require.NoError(t, err)
	p2, err := e2.NewLeaderParticipation("el", "two")
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() { _, err := p2.WaitForLeadership(); waited <- err }()
	eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.waiting == 1 })
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = p2.Campaign(short, []byte("v"))
	require.True(t, topo.IsErrType(err, topo.Timeout), "got %v", err)
	p2.Stop()
	require.True(t, topo.IsErrType(<-waited, topo.Interrupted))
	p1.Stop()
}

// cutOffAheader is the fake driver with an Ahead that no store answers,
// as on a client cut off from its store: it blocks until its ctx ends,
// after telling reading (when it has room).
type cutOffAheader struct {
	*driver
	reading chan struct{}
}

func (d cutOffAheader) Ahead(ctx context.Context, q claims.Queue, e claims.Entry, most int) ([]claims.Entry, bool, error) {
	select {
	case d.reading <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return nil, false, ctx.Err()
}

// TestFirstReadEndsWithClaim: the first read of a wait (the uncontended
// Ahead, before the wait proper) ends when the claim ends, not only with
// the caller's context: a WaitForLeadership (whose context never ends)
// or a Lock whose store stops answering that read returns LockLost once
// its session is declared lost, and Interrupted at Stop. (An etcd waiter
// cut off between its Create and that read waited forever before.)
func TestFirstReadEndsWithClaim(t *testing.T) {
	newCutOff := func() (*claims.Engine, cutOffAheader) {
		d := cutOffAheader{&driver{s: newStore()}, make(chan struct{}, 1)}
		return claims.New(d, claims.Options{}), d
	}
	outcome := func(t *testing.T, got <-chan error) error {
		t.Helper()
		select {
		case err := <-got:
			return err
		case <-time.After(longWait):
			t.Fatal("the wait outlived its claim")
			return nil
		}
	}
	t.Run("WaitForLeadership/session lost", func(t *testing.T) {
		e, d := newCutOff()
		p, err := e.NewLeaderParticipation("el", "me")
		require.NoError(t, err)
		defer p.Stop()
		got := make(chan error, 1)
		go func() { _, err := p.WaitForLeadership(); got <- err }()
		<-d.reading
		d.session().Lost()
		err = outcome(t, got)
		require.True(t, topo.IsErrType(err, topo.LockLost), "got %v", err)
	})
	t.Run("WaitForLeadership/Stop", func(t *testing.T) {
		e, d := newCutOff()
		p, err := e.NewLeaderParticipation("el", "me")
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() { _, err := p.WaitForLeadership(); got <- err }()
		<-d.reading
		p.Stop()
		err = outcome(t, got)
		require.True(t, topo.IsErrType(err, topo.Interrupted), "got %v", err)
	})
	t.Run("Lock/session lost", func(t *testing.T) {
		e, d := newCutOff()
		got := make(chan error, 1)
		go func() { _, err := e.LockName(context.Background(), "d", "me"); got <- err }()
		<-d.reading
		d.session().Lost()
		err := outcome(t, got)
		require.True(t, topo.IsErrType(err, topo.LockLost), "got %v", err)
	})
}

// cutOffCreator is the fake driver with a Create that no store answers:
// it blocks until its ctx ends, after telling creating (when it has room).
type cutOffCreator struct {
	*driver
	creating chan struct{}
}

func (d cutOffCreator) Create(ctx context.Context, q claims.Queue, contents string, o claims.CreateOptions) (claims.Entry, *claims.Session, error) {
	select {
	case d.creating <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return claims.Entry{}, nil, ctx.Err()
}

// TestStopEndsCreate: Stop ends a WaitForLeadership (whose context never
// ends) still creating its candidacy on a store that stops answering,
// with Interrupted; after the engine's Close, with Closed.
func TestStopEndsCreate(t *testing.T) {
	for _, closeFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("close first %v", closeFirst), func(t *testing.T) {
			d := cutOffCreator{&driver{s: newStore()}, make(chan struct{}, 1)}
			e := claims.New(d, claims.Options{})
			p, err := e.NewLeaderParticipation("el", "me")
			require.NoError(t, err)
			got := make(chan error, 1)
			go func() { _, err := p.WaitForLeadership(); got <- err }()
			<-d.creating
			want := topo.Interrupted
			if closeFirst {
				e.Close()
				want = topo.Closed
			}
			p.Stop()
			select {
			case err := <-got:
				require.True(t, topo.IsErrType(err, want), "got %v", err)
			case <-time.After(longWait):
				t.Fatal("WaitForLeadership outlived Stop while creating")
			}
		})
	}
}
