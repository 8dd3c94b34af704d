package vitessinterop

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vtopo "vitess.io/vitess/go/vt/topo"

	"github.com/topokit/topokit/topo"
)

// leadership is one term won by one contender.
type leadership struct {
	id     string
	vitess bool
	ctx    context.Context // the leadership context
	stop   func()
	// campaigned is true when the topokit side won through Campaign (with
	// a value), false when through WaitForLeadership.
	campaigned bool
	tp         topo.LeaderParticipation // the topokit participation, nil on Vitess's side
	err        error
}

// joinVitess joins election name through Vitess's Conn and blocks until it
// leads.
func joinVitess(c vtopo.Conn, name, id string) leadership {
	p, err := c.NewLeaderParticipation(name, id)
	if err != nil {
		return leadership{id: id, vitess: true, err: err}
	}
	lctx, err := p.WaitForLeadership()
	return leadership{id: id, vitess: true, ctx: lctx, stop: p.Stop, err: err}
}

// joinTopokit joins election name through topokit's Conn with Campaign
// (value = "value-of-"+id), or with WaitForLeadership while the backend's
// Campaign is still a NoImplementation placeholder, and blocks until it
// leads.
func joinTopokit(ctx context.Context, c topo.Conn, name, id string) leadership {
	p, err := c.NewLeaderParticipation(name, id)
	if err != nil {
		return leadership{id: id, err: err}
	}
	lctx, err := p.Campaign(ctx, []byte("value-of-"+id))
	if topo.IsErrType(err, topo.NoImplementation) {
		lctx, err = p.WaitForLeadership()
		return leadership{id: id, ctx: lctx, stop: p.Stop, tp: p, err: err}
	}
	return leadership{id: id, ctx: lctx, stop: p.Stop, tp: p, campaigned: true, err: err}
}

// observers reads one election from both libraries without campaigning.
type observers struct {
	vp vtopo.LeaderParticipation // on a Vitess Conn
	tp topo.LeaderParticipation  // on a topokit Conn
	// tkNew follows topokit's WaitForNewLeader; tkObserve its Observe (nil
	// while Observe is a NoImplementation placeholder); vtNew Vitess's
	// WaitForNewLeader (nil where Vitess has none: ZooKeeper, Consul).
	tkNew, tkObserve, vtNew *seen
	// lastToken is the fencing token of the last term topokit's Leader
	// reported (0: none yet).
	lastToken int64
}

func newObservers(ctx context.Context, t *testing.T, vc vtopo.Conn, tc topo.Conn, name string) *observers {
	t.Helper()
	o := &observers{}
	var err error
	o.vp, err = vc.NewLeaderParticipation(name, "vitess-observer")
	require.NoError(t, err)
	o.tp, err = tc.NewLeaderParticipation(name, "topokit-observer")
	require.NoError(t, err)
	ids, err := o.tp.WaitForNewLeader(ctx)
	require.NoError(t, err, "topokit WaitForNewLeader")
	o.tkNew = follow(ids, func(s string) string { return s })
	leaders, err := o.tp.Observe(ctx)
	if topo.IsErrType(err, topo.NoImplementation) {
		t.Logf("topokit Observe is not implemented on this backend yet (%v): WaitForNewLeader is tested instead", err)
	} else {
		require.NoError(t, err, "topokit Observe")
		o.tkObserve = follow(leaders, func(l topo.Leader) string { return l.ID })
	}
	// Vitess's WaitForNewLeader (etcd) reads its Conn's client in a
	// goroutine after each event, and its Close clears that client
	// unsynchronized: the cleanup below (registered after vc was opened,
	// so it runs before vc's Close) ends the goroutine and waits for its
	// channel to close first.
	vctx, vcancel := context.WithCancel(ctx)
	vids, err := o.vp.WaitForNewLeader(vctx)
	if vtopo.IsErrType(err, vtopo.NoImplementation) {
		vcancel()
		t.Logf("Vitess has no WaitForNewLeader on this backend (%v)", err)
	} else {
		if err != nil {
			vcancel()
		}
		require.NoError(t, err, "Vitess WaitForNewLeader")
		o.vtNew = follow(vids, func(s string) string { return s })
		t.Cleanup(func() {
			vcancel()
			o.vtNew.waitClosed(ctx, t, "Vitess WaitForNewLeader's channel after its context ended")
		})
	}
	return o
}

// checkLeader checks that both libraries read l as the leader: both
// GetCurrentLeaderIDs return its id, and every leader channel reports it;
// once topokit's Leader is implemented, it returns l's id (with no value
// for a Vitess leader) and a fencing token greater than every earlier
// term's, whichever library led it.
// When l campaigned with a value, it also proclaims a new one and checks
// that topokit's Leader returns it while Vitess still reads the id.
func (o *observers) checkLeader(ctx context.Context, t *testing.T, l leadership) {
	t.Helper()
	vid, err := o.vp.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	assert.Equal(t, l.id, vid, "Vitess's GetCurrentLeaderID")
	tid, err := o.tp.GetCurrentLeaderID(ctx)
	require.NoError(t, err)
	assert.Equal(t, l.id, tid, "topokit's GetCurrentLeaderID")
	o.tkNew.waitFor(ctx, t, "topokit WaitForNewLeader", l.id)
	if o.tkObserve != nil {
		o.tkObserve.waitFor(ctx, t, "topokit Observe", l.id)
	}
	if o.vtNew != nil {
		o.vtNew.waitFor(ctx, t, "Vitess WaitForNewLeader", l.id)
	}
	ld, err := o.tp.Leader(ctx)
	if topo.IsErrType(err, topo.NoImplementation) {
		return
	}
	require.NoError(t, err, "topokit Leader")
	assert.Equal(t, l.id, ld.ID, "topokit's Leader")
	if l.vitess {
		assert.Empty(t, ld.Value, "topokit's Leader: the value of Vitess's leader")
	}
	assert.Greater(t, ld.Token, o.lastToken, "topokit's Leader: the fencing token of %s's term", l.id)
	o.lastToken = ld.Token
}

// TestElectionHandovers puts a Vitess participant and topokit participants
// in one election and hands leadership over between the two libraries
// many times: a leader's successor is always the other library's
// candidate, waiting while the leader leads. An in-process owner counter
// proves that there are never two leaders at once; both libraries'
// GetCurrentLeaderID and topokit's WaitForNewLeader (and Observe, and
// Vitess's own WaitForNewLeader on etcd, where they exist) report each
// leader; a topokit leader that won through Campaign proclaims new values
// without changing the id Vitess reads.
func TestElectionHandovers(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			vc, tc, oc := s.vitess(t, root), s.topokit(t, root), s.topokit(t, root)
			vobs := s.vitess(t, root)
			const name = "handover"
			obs := newObservers(ctx, t, vobs, oc, name)

			var owners atomic.Int32
			results := make(chan leadership, 1)
			join := func(vitess bool, round int) {
				go func() {
					if vitess {
						results <- joinVitess(vc, name, fmt.Sprintf("vitess-%d", round))
					} else {
						results <- joinTopokit(ctx, tc, name, fmt.Sprintf("topokit-%d", round))
					}
				}()
			}
			const rounds = 40
			join(true, 0)
			for round := range rounds {
				var l leadership
				select {
				case l = <-results:
				case <-ctx.Done():
					t.Fatalf("round %d: nobody became leader: %v", round, ctx.Err())
				}
				require.NoError(t, l.err, "round %d: %s", round, l.id)
				require.Equal(t, int32(1), owners.Add(1), "round %d: %s leads beside another leader", round, l.id)
				require.Equal(t, round%2 == 0, l.vitess, "round %d: %s leads out of turn", round, l.id)
				// The other library's candidate queues behind the leader.
				join(!l.vitess, round+1)
				s.waitCandidates(ctx, t, root, name, 2)
				obs.checkLeader(ctx, t, l)
				if l.campaigned {
					obs.checkProclaim(ctx, t, l)
				}
				require.NoError(t, l.ctx.Err(), "round %d: %s lost leadership while leading", round, l.id)
				owners.Add(-1)
				l.stop()
			}
			// The last candidate leads once the last leader stopped.
			l := <-results
			require.NoError(t, l.err)
			require.Equal(t, int32(1), owners.Add(1))
			obs.checkLeader(ctx, t, l)
			owners.Add(-1)
			l.stop()
		})
	}
}

// checkProclaim checks, for topokit's leader l that won through Campaign,
// that topokit's Leader returns its Campaign value, then proclaims two new
// values: topokit's Leader (and Observe) report the last one with the same
// fencing token, while Vitess's GetCurrentLeaderID still reads l's id.
func (o *observers) checkProclaim(ctx context.Context, t *testing.T, l leadership) {
	t.Helper()
	ld, err := o.tp.Leader(ctx)
	require.NoError(t, err, "topokit Leader")
	assert.Equal(t, l.id, ld.ID)
	assert.Equal(t, "value-of-"+l.id, string(ld.Value))
	for i := range 2 {
		v := fmt.Sprintf("proclaimed-%d-by-%s", i, l.id)
		require.NoError(t, l.tp.Proclaim(ctx, []byte(v)), "Proclaim")
		after, err := o.tp.Leader(ctx)
		require.NoError(t, err, "topokit Leader")
		assert.Equal(t, l.id, after.ID)
		assert.Equal(t, v, string(after.Value))
		assert.Equal(t, ld.Token, after.Token, "Proclaim changed the term's token")
		vid, err := o.vp.GetCurrentLeaderID(ctx)
		require.NoError(t, err)
		assert.Equal(t, l.id, vid, "Vitess's GetCurrentLeaderID after Proclaim")
		tid, err := o.tp.GetCurrentLeaderID(ctx)
		require.NoError(t, err)
		assert.Equal(t, l.id, tid, "topokit's GetCurrentLeaderID after Proclaim")
	}
}

// TestElectionRace has two Vitess and two topokit participants, each on a
// Conn of its own, campaign freely on one election until each has led
// five times (each rejoins as soon as it stops leading). An in-process
// owner counter proves that no two ever lead at once, and while each
// leads, both libraries' GetCurrentLeaderID read its id.
func TestElectionRace(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			const name = "race"
			vobs, err := s.vitess(t, root).NewLeaderParticipation(name, "vitess-observer")
			require.NoError(t, err)
			tobs, err := s.topokit(t, root).NewLeaderParticipation(name, "topokit-observer")
			require.NoError(t, err)
			const terms = 5
			var owners atomic.Int32
			var wg sync.WaitGroup
			contender := func(label string, join func(id string) leadership) {
				defer wg.Done()
				for k := range terms {
					l := join(fmt.Sprintf("%s-%d", label, k))
					if !assert.NoError(t, l.err, l.id) {
						return
					}
					assert.Equal(t, int32(1), owners.Add(1), "%s leads beside another leader", l.id)
					vid, err := vobs.GetCurrentLeaderID(ctx)
					assert.NoError(t, err)
					assert.Equal(t, l.id, vid, "Vitess's GetCurrentLeaderID while %s leads", l.id)
					tid, err := tobs.GetCurrentLeaderID(ctx)
					assert.NoError(t, err)
					assert.Equal(t, l.id, tid, "topokit's GetCurrentLeaderID while %s leads", l.id)
					assert.NoError(t, l.ctx.Err(), "%s lost leadership while leading", l.id)
					owners.Add(-1)
					l.stop()
				}
			}
			for i := range 2 {
				vc, tc := s.vitess(t, root), s.topokit(t, root)
				wg.Add(2)
				go contender(fmt.Sprintf("vitess%d", i), func(id string) leadership { return joinVitess(vc, name, id) })
				go contender(fmt.Sprintf("topokit%d", i), func(id string) leadership { return joinTopokit(ctx, tc, name, id) })
			}
			wg.Wait()
		})
	}
}

// TestElectionQueue queues ten candidates, nine topokit ones (campaigning
// with values where Campaign is implemented, so that the election holds
// a value entry beside each candidate) and one Vitess one in the middle,
// behind a topokit leader, each joining once the one before is queued.
// Then each leader in turn stops: on etcd and ZooKeeper, whose queues are
// first come first served in both libraries, leaders follow the join
// order; on every backend, each new leader is the one both libraries'
// GetCurrentLeaderID read, and the owner counter never exceeds one.
func TestElectionQueue(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			const name = "queue"
			vc, tc := s.vitess(t, root), s.topokit(t, root)
			vobs, err := s.vitess(t, root).NewLeaderParticipation(name, "vitess-observer")
			require.NoError(t, err)
			tobs, err := s.topokit(t, root).NewLeaderParticipation(name, "topokit-observer")
			require.NoError(t, err)
			const n = 11
			results := make(chan leadership, n)
			var order []string
			for i := range n {
				id := fmt.Sprintf("topokit-%d", i)
				vitess := i == n/2
				if vitess {
					id = fmt.Sprintf("vitess-%d", i)
				}
				order = append(order, id)
				go func() {
					if vitess {
						results <- joinVitess(vc, name, id)
					} else {
						results <- joinTopokit(ctx, tc, name, id)
					}
				}()
				if i == 0 {
					// The first leads before the others join.
					l := <-results
					require.NoError(t, l.err)
					results <- l
				}
				s.waitCandidates(ctx, t, root, name, i+1)
			}
			var owners atomic.Int32
			led := map[string]bool{}
			for k := range n {
				var l leadership
				select {
				case l = <-results:
				case <-ctx.Done():
					t.Fatalf("leader %d never came: %v", k, ctx.Err())
				}
				require.NoError(t, l.err, l.id)
				require.Equal(t, int32(1), owners.Add(1), "%s leads beside another leader", l.id)
				require.False(t, led[l.id], "%s leads twice", l.id)
				led[l.id] = true
				if s.candidates != nil {
					assert.Equal(t, order[k], l.id, "leader %d out of queue order", k)
				}
				vid, err := vobs.GetCurrentLeaderID(ctx)
				require.NoError(t, err)
				assert.Equal(t, l.id, vid, "Vitess's GetCurrentLeaderID")
				tid, err := tobs.GetCurrentLeaderID(ctx)
				require.NoError(t, err)
				assert.Equal(t, l.id, tid, "topokit's GetCurrentLeaderID")
				if l.campaigned {
					ld, err := tobs.Leader(ctx)
					require.NoError(t, err)
					assert.Equal(t, l.id, ld.ID)
					assert.Equal(t, "value-of-"+l.id, string(ld.Value))
				}
				require.NoError(t, l.ctx.Err(), "%s lost leadership while leading", l.id)
				owners.Add(-1)
				l.stop()
			}
			tid, err := tobs.GetCurrentLeaderID(ctx)
			require.NoError(t, err)
			assert.Equal(t, "", tid, "topokit's GetCurrentLeaderID after every leader stopped")
		})
	}
}

// TestVitessParticipationOutlivesTopokit creates a Vitess participation
// (Vitess's zk2topo creates the election's znode there, once), lets a
// topokit participant lead the election and leave as its last candidate,
// and then checks that the Vitess participation still works: its
// GetCurrentLeaderID reads "" (nobody leads) and its WaitForLeadership
// wins. On ZooKeeper, topokit's Stop removes elections/<name> when its
// last candidate leaves, and Vitess's WaitForLeadership, which creates
// its candidate without creating the parent, then fails with NoNode.
func TestVitessParticipationOutlivesTopokit(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			const name = "outlive"
			vc, tc := s.vitess(t, root), s.topokit(t, root)
			vp, err := vc.NewLeaderParticipation(name, "vitess-late")
			require.NoError(t, err)
			l := joinTopokit(ctx, tc, name, "topokit-first")
			require.NoError(t, l.err)
			vid, err := vp.GetCurrentLeaderID(ctx)
			require.NoError(t, err)
			assert.Equal(t, "topokit-first", vid)
			l.stop()

			vid, err = vp.GetCurrentLeaderID(ctx)
			if assert.NoError(t, err, "Vitess's GetCurrentLeaderID after topokit's last candidate left") && s.name != "consul" {
				// Vitess's consultopo reads the released election key's
				// value, so it still names the last leader.
				assert.Equal(t, "", vid)
			}
			done := make(chan error, 1)
			go func() {
				_, err := vp.WaitForLeadership()
				done <- err
			}()
			select {
			case err = <-done:
			case <-ctx.Done():
				t.Fatalf("Vitess's WaitForLeadership never returned: %v", ctx.Err())
			}
			require.NoError(t, err, "Vitess's WaitForLeadership after topokit's last candidate left")
			tp, err := tc.NewLeaderParticipation(name, "topokit-observer")
			require.NoError(t, err)
			tid, err := tp.GetCurrentLeaderID(ctx)
			require.NoError(t, err)
			assert.Equal(t, "vitess-late", tid)
			vp.Stop()
		})
	}
}
