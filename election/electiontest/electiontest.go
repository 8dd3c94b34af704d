// Package electiontest is a conformance harness for election.Election
// implementations. Run checks Await, WithMastership, Resign, Close, the
// withdrawal of an abandoned Await, mastership passing between instances,
// that two instances are never master at the same time, loss of mastership
// from the store's side, and that a master cut off from the store by a
// network partition has given mastership up by the time another instance
// becomes master.
//
// Overlap is checked at the moment of the handover: when the next
// instance's Await returns, the previous master's mastership context must
// already be cancelled (and Resign and Close cancel it before they return).
// Nothing is skipped: a missing harness input (Options.LoseMastership,
// Options.Partition, Options.SessionBound) fails the subtest that needs it,
// with a message saying what to provide.
//
// Only the partition subtest waits for a session or lease to lapse (the
// store's, bounded by Options.SessionBound); the others resign, close or
// drop sessions explicitly.
package electiontest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/topo"
)

// NewFactory returns the Factory of the instance called instanceID. Every
// Factory returned during one subtest must reach the same store, and each
// should have its own session or lease (for a topo.Conn backend: its own
// Conn), as separate processes would. The function registers its own
// cleanup with t.
type NewFactory func(t *testing.T, instanceID string) election.Factory

// Options are the harness inputs that simulate faults. Every func field is
// required; the subtest that needs a missing one fails.
type Options struct {
	// LoseMastership makes the store take mastership away from the
	// instance whose Factory is f without telling its Election (expire its
	// session or lease, delete its election entry). The harness then checks
	// that the mastership context is cancelled and that another instance
	// takes over. Required by StoreSideLoss.
	LoseMastership func(t *testing.T, f election.Factory)

	// Partition returns the Factory of instance instanceID, reaching the
	// same store as NewFactory's but through a fault the harness controls
	// (a topo/test/faultproxy.Proxy in front of its Conn). Required by
	// PartitionedMasterStepsDown.
	Partition func(t *testing.T, instanceID string) Partitioned

	// SessionBound is how long after Partitioned.Cut the store may keep the
	// cut-off instance's session or lease alive (etcd: the lease TTL;
	// ZooKeeper: the session timeout; Consul: twice the session TTL plus
	// the lock-delay). The harness waits up to SessionBound plus Timeout for
	// the next master. Required by PartitionedMasterStepsDown.
	SessionBound time.Duration

	// Timeout bounds each subtest; zero means 30 s.
	Timeout time.Duration
}

// Partitioned is an instance whose traffic to the store can be cut.
type Partitioned struct {
	// Factory is the instance's Factory.
	Factory election.Factory
	// Cut stops all traffic between the instance and the store, both ways;
	// it returns at once and is idempotent.
	Cut func()
	// Heal lets the traffic flow again; idempotent.
	Heal func()
}

// Run runs every subtest against the implementation. Each subtest uses a
// fresh resource ID, so subtests may share one store.
func Run(t *testing.T, newFactory NewFactory, opts Options) {
	t.Helper()
	require.NotNil(t, newFactory, "electiontest.Run needs a NewFactory: a func that returns the election.Factory of one instance")
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	h := &harness{newFactory: newFactory, opts: opts}
	t.Run("AwaitMakesMaster", h.testAwait)
	t.Run("NotMasterContextIsCancelled", h.testNotMaster)
	t.Run("MastershipContextFollowsParent", h.testParent)
	t.Run("ResignThenAwaitAgain", h.testResign)
	t.Run("ResignWhenNotMaster", h.testResignIdle)
	t.Run("AbandonedAwaitWithdraws", h.testAbandonedAwait)
	t.Run("CloseResignsWithCancelledContext", h.testClose)
	t.Run("NeverTwoMasters", h.testNeverTwo)
	t.Run("StoreSideLoss", h.testStoreLoss)
	t.Run("PartitionedMasterStepsDown", h.testPartition)
	t.Run("TermFencingTokens", h.testTerm)
	t.Run("TermEndsWithStoreSideLoss", h.testTermLoss)
}

type harness struct {
	newFactory NewFactory
	opts       Options
	seq        atomic.Int64
}

// resource returns a resource ID unique to this subtest and run.
func (h *harness) resource(t *testing.T) string {
	name := strings.ToLower(t.Name())
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, name)
	return fmt.Sprintf("electiontest-%s-%d-%d", name, time.Now().UnixNano(), h.seq.Add(1))
}

func (h *harness) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), h.opts.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// instance creates the Election of instanceID for resource and closes it
// when the test ends.
func (h *harness) instance(t *testing.T, ctx context.Context, resource, instanceID string) (election.Election, election.Factory) {
	t.Helper()
	f := h.newFactory(t, instanceID)
	e, err := f.NewElection(ctx, resource)
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), h.opts.Timeout)
		defer cancel()
		_ = e.Close(cctx)
	})
	return e, f
}

// awaitAsync runs e.Await(ctx) in a goroutine and returns its result channel.
func awaitAsync(ctx context.Context, e election.Election) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- e.Await(ctx) }()
	return ch
}

func receive(t *testing.T, ctx context.Context, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		require.FailNow(t, "timed out waiting for "+what)
		return nil
	}
}

func waitDone(t *testing.T, ctx, mctx context.Context, what string) {
	t.Helper()
	select {
	case <-mctx.Done():
	case <-ctx.Done():
		require.FailNow(t, "timed out waiting for "+what)
	}
}

// mastership returns e.WithMastership(parent), failing t on an error.
func mastership(t *testing.T, parent context.Context, e election.Election) context.Context {
	t.Helper()
	mctx, err := e.WithMastership(parent)
	require.NoError(t, err)
	return mctx
}

func isMaster(t *testing.T, ctx context.Context, e election.Election) bool {
	t.Helper()
	return mastership(t, ctx, e).Err() == nil
}

// leadWithWaiter makes a master and starts b campaigning behind it; it
// returns a's mastership context and the channel of b's Await.
func leadWithWaiter(t *testing.T, ctx context.Context, a, b election.Election) (context.Context, <-chan error) {
	t.Helper()
	require.NoError(t, a.Await(ctx))
	amctx := mastership(t, ctx, a)
	return amctx, awaitAsync(ctx, b)
}

func (h *harness) testAwait(t *testing.T) {
	ctx := h.ctx(t)
	res := h.resource(t)
	e, _ := h.instance(t, ctx, res, "a")

	require.False(t, isMaster(t, ctx, e), "master before Await")
	require.NoError(t, e.Await(ctx))
	mctx := mastership(t, ctx, e)
	require.NoError(t, mctx.Err(), "mastership context cancelled right after Await")

	// Await is idempotent: it returns at once and keeps mastership.
	require.NoError(t, e.Await(ctx))
	require.NoError(t, e.Await(ctx))
	require.NoError(t, mctx.Err(), "a second Await cost mastership")
	require.True(t, isMaster(t, ctx, e))

	require.NoError(t, e.Close(ctx))
	require.Error(t, mctx.Err(), "the mastership context is still live after Close returned")
	require.Error(t, e.Await(ctx), "Await after Close")
}

func (h *harness) testNotMaster(t *testing.T) {
	ctx := h.ctx(t)
	res := h.resource(t)
	a, _ := h.instance(t, ctx, res, "a")
	b, _ := h.instance(t, ctx, res, "b")

	require.NoError(t, a.Await(ctx))
	bch := awaitAsync(ctx, b)
	mctx := mastership(t, ctx, b)
	require.Error(t, mctx.Err(), "a waiting candidate got a live mastership context")
	require.True(t, isMaster(t, ctx, a))

	amctx := mastership(t, ctx, a)
	require.NoError(t, a.Resign(ctx))
	require.NoError(t, receive(t, ctx, bch, "b to become master"))
	require.Error(t, amctx.Err(), "a's mastership context is live when b's Await returned: two masters")
	require.True(t, isMaster(t, ctx, b))
}

func (h *harness) testParent(t *testing.T) {
	ctx := h.ctx(t)
	e, _ := h.instance(t, ctx, h.resource(t), "a")
	require.NoError(t, e.Await(ctx))

	parent, cancel := context.WithCancel(ctx)
	mctx := mastership(t, parent, e)
	require.NoError(t, mctx.Err())
	cancel()
	waitDone(t, ctx, mctx, "the parent's cancellation to reach the mastership context")
	// Cancelling a derived context gives nothing up.
	require.True(t, isMaster(t, ctx, e))
}

func (h *harness) testResign(t *testing.T) {
	ctx := h.ctx(t)
	res := h.resource(t)
	a, _ := h.instance(t, ctx, res, "a")
	b, _ := h.instance(t, ctx, res, "b")

	amctx, bch := leadWithWaiter(t, ctx, a, b)

	require.NoError(t, a.Resign(ctx))
	require.Error(t, amctx.Err(), "mastership context still live after Resign returned")
	require.False(t, isMaster(t, ctx, a))
	require.NoError(t, receive(t, ctx, bch, "b to take over after a resigned"))
	require.Error(t, amctx.Err(), "a's mastership context is live when b's Await returned: two masters")
	bmctx := mastership(t, ctx, b)
	require.NoError(t, bmctx.Err())

	// The resigned instance campaigns again and wins once b resigns.
	ach := awaitAsync(ctx, a)
	require.NoError(t, b.Resign(ctx))
	require.Error(t, bmctx.Err())
	require.NoError(t, receive(t, ctx, ach, "a to win again"))
	amctx = mastership(t, ctx, a)
	require.NoError(t, amctx.Err())
	require.False(t, isMaster(t, ctx, b))
}

func (h *harness) testResignIdle(t *testing.T) {
	ctx := h.ctx(t)
	res := h.resource(t)
	a, _ := h.instance(t, ctx, res, "a")
	require.NoError(t, a.Resign(ctx), "Resign before any Await")
	require.NoError(t, a.Await(ctx))
	require.NoError(t, a.Resign(ctx))
	require.NoError(t, a.Resign(ctx), "second Resign")
	require.False(t, isMaster(t, ctx, a))
	// Nothing is left behind: another instance wins at once.
	b, _ := h.instance(t, ctx, res, "b")
	require.NoError(t, b.Await(ctx))
}

func (h *harness) testAbandonedAwait(t *testing.T) {
	ctx := h.ctx(t)
	res := h.resource(t)
	a, _ := h.instance(t, ctx, res, "a")
	b, _ := h.instance(t, ctx, res, "b")
	c, _ := h.instance(t, ctx, res, "c")

	require.NoError(t, a.Await(ctx))
	actx, cancel := context.WithCancel(ctx)
	bch := awaitAsync(actx, b)
	// Wait until b is queued behind a as far as the caller can tell, then
	// abandon its Await.
	require.False(t, isMaster(t, ctx, b))
	cancel()
	require.Error(t, receive(t, ctx, bch, "the abandoned Await to return"))

	// b withdrew: when a resigns, c (not b) takes over.
	cch := awaitAsync(ctx, c)
	require.NoError(t, a.Resign(ctx))
	require.NoError(t, receive(t, ctx, cch, "c to take over"))
	require.False(t, isMaster(t, ctx, b))
}

func (h *harness) testClose(t *testing.T) {
	ctx := h.ctx(t)
	res := h.resource(t)
	a, _ := h.instance(t, ctx, res, "a")
	b, _ := h.instance(t, ctx, res, "b")

	amctx, bch := leadWithWaiter(t, ctx, a, b)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_ = a.Close(cancelled) // may report the cancelled context
	require.Error(t, amctx.Err(), "the mastership context is still live after Close returned")
	require.NoError(t, receive(t, ctx, bch, "b to take over after a closed"))
	require.True(t, isMaster(t, ctx, b))

	require.Error(t, a.Await(ctx), "Await after Close")
	mctx, _ := a.WithMastership(ctx)
	require.Error(t, mctx.Err(), "live mastership context after Close")
	require.NoError(t, a.Close(ctx), "second Close")
}

func (h *harness) testNeverTwo(t *testing.T) {
	ctx := h.ctx(t)
	res := h.resource(t)
	const instances, rounds = 3, 3
	var (
		masters atomic.Int32
		wins    atomic.Int32
		wg      sync.WaitGroup
	)
	elections := make([]election.Election, instances)
	for i := range instances {
		elections[i], _ = h.instance(t, ctx, res, fmt.Sprintf("i%d", i))
	}
	for i := range instances {
		wg.Add(1)
		go func(e election.Election) {
			defer wg.Done()
			for range rounds {
				if !assert.NoError(t, e.Await(ctx)) {
					return
				}
				mctx, err := e.WithMastership(ctx)
				if !assert.NoError(t, err) {
					return
				}
				if mctx.Err() == nil {
					n := masters.Add(1)
					assert.Equal(t, int32(1), n, "two instances are master at once")
					for _, other := range elections {
						if other == e {
							continue
						}
						omctx, err := other.WithMastership(ctx)
						assert.NoError(t, err)
						assert.Error(t, omctx.Err(), "another instance reports mastership too")
					}
					wins.Add(1)
					masters.Add(-1)
				}
				if !assert.NoError(t, e.Resign(ctx)) {
					return
				}
			}
		}(elections[i])
	}
	wg.Wait()
	require.Equal(t, int32(instances*rounds), wins.Load())
}

func (h *harness) testStoreLoss(t *testing.T) {
	require.NotNil(t, h.opts.LoseMastership, "electiontest.Options.LoseMastership is required: a func that makes the store take mastership away from an instance without telling it (expire its session or lease, or delete its election entry)")
	ctx := h.ctx(t)
	res := h.resource(t)
	a, af := h.instance(t, ctx, res, "a")
	b, _ := h.instance(t, ctx, res, "b")

	amctx, bch := leadWithWaiter(t, ctx, a, b)

	h.opts.LoseMastership(t, af)
	waitDone(t, ctx, amctx, "the store-side loss to cancel the mastership context")
	require.NoError(t, receive(t, ctx, bch, "b to take over after a lost mastership"))
	require.True(t, isMaster(t, ctx, b))
	require.False(t, isMaster(t, ctx, a))
}

// testPartition: the master is cut off from the store; another instance
// becomes master once the store ends the cut-off instance's session, and
// at that moment the old master's mastership context is already
// cancelled. After the partition heals the old master is not master and
// its Resign leaves the new master alone.
func (h *harness) testPartition(t *testing.T) {
	require.NotNil(t, h.opts.Partition, "electiontest.Options.Partition is required: a func that returns an instance's Factory whose traffic to the store crosses a fault (for example a topo/test/faultproxy.Proxy), with its Cut and Heal funcs")
	require.Positive(t, h.opts.SessionBound, "electiontest.Options.SessionBound is required: how long after a partition the store keeps the cut-off instance's session or lease")
	ctx, cancel := context.WithTimeout(context.Background(), 2*(h.opts.SessionBound+h.opts.Timeout))
	t.Cleanup(cancel)
	res := h.resource(t)
	p := h.opts.Partition(t, "a")
	require.NotNil(t, p.Factory, "Options.Partition returned a nil Factory")
	require.NotNil(t, p.Cut, "Options.Partition returned a nil Cut")
	require.NotNil(t, p.Heal, "Options.Partition returned a nil Heal")
	t.Cleanup(p.Heal)
	a, err := p.Factory.NewElection(ctx, res)
	require.NoError(t, err)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), h.opts.Timeout)
		defer cancel()
		_ = a.Close(cctx)
	})
	b, _ := h.instance(t, ctx, res, "b")

	amctx, bch := leadWithWaiter(t, ctx, a, b)
	p.Cut()
	select {
	case err := <-bch:
		require.Error(t, amctx.Err(), "the cut-off master's mastership context is live when b's Await returned: two masters")
		require.NoError(t, err, "b's Await after the master was cut off")
	case <-time.After(h.opts.SessionBound + h.opts.Timeout):
		require.FailNow(t, "b did not become master after the master was cut off", "waited %v", h.opts.SessionBound+h.opts.Timeout)
	}
	require.True(t, isMaster(t, ctx, b))

	p.Heal()
	require.False(t, isMaster(t, ctx, a), "the old master after the partition healed")
	rctx, rcancel := context.WithTimeout(ctx, h.opts.Timeout)
	defer rcancel()
	_ = a.Resign(rctx) // may report the loss
	require.True(t, isMaster(t, ctx, b), "the old master's Resign cost the new master its mastership")
}

// term returns e's current term, requiring that e is master.
func term(t *testing.T, e election.Election, who string) topo.Fence {
	t.Helper()
	f, err := e.Term()
	require.NoErrorf(t, err, "Term of master %s", who)
	require.NotNil(t, f)
	require.Positivef(t, f.Token(), "fencing token of %s's term", who)
	return f
}

// requireEnded requires that f's term has ended: Done closed and Check
// failing.
func requireEnded(t *testing.T, ctx context.Context, f topo.Fence, what string) {
	t.Helper()
	select {
	case <-f.Done():
	case <-ctx.Done():
		t.Fatalf("%s: the term's Done channel did not close", what)
	}
	require.Errorf(t, f.Check(ctx), "%s: Check of an ended term", what)
}

// testTerm: each new term, whoever is master, has a strictly greater
// fencing token; Term says NotLeader when not master; an ended term's Done
// is closed and its Check fails.
func (h *harness) testTerm(t *testing.T) {
	ctx := h.ctx(t)
	res := h.resource(t)
	a, _ := h.instance(t, ctx, res, "a")
	b, _ := h.instance(t, ctx, res, "b")

	_, err := a.Term()
	require.ErrorIs(t, err, topo.NotLeader, "Term before Await")

	var last int64
	var prev topo.Fence
	for round := range 3 {
		for _, x := range []struct {
			e    election.Election
			name string
		}{{a, "a"}, {b, "b"}} {
			require.NoError(t, x.e.Await(ctx))
			if prev != nil {
				requireEnded(t, ctx, prev, "previous term after a new master won")
			}
			f := term(t, x.e, x.name)
			require.Greaterf(t, f.Token(), last, "round %d: %s's term token must exceed every earlier term's", round, x.name)
			require.NoError(t, f.Check(ctx))
			again := term(t, x.e, x.name)
			require.Equal(t, f.Token(), again.Token(), "one term, one token")
			last, prev = f.Token(), f
			require.NoError(t, x.e.Resign(ctx))
			_, err := x.e.Term()
			require.ErrorIsf(t, err, topo.NotLeader, "Term of %s after Resign", x.name)
			requireEnded(t, ctx, f, "term after Resign")
		}
	}
	// Re-winning without anybody in between is a new term too.
	require.NoError(t, a.Await(ctx))
	f := term(t, a, "a")
	require.Greater(t, f.Token(), last)
}

// testTermLoss: when the store takes mastership away, the term's Done
// closes and the next master's token is greater.
func (h *harness) testTermLoss(t *testing.T) {
	require.NotNil(t, h.opts.LoseMastership, "electiontest.Options.LoseMastership is required: a func that makes the store take mastership away from an instance without telling it (expire its session or lease, or delete its election entry)")
	ctx := h.ctx(t)
	res := h.resource(t)
	a, af := h.instance(t, ctx, res, "a")
	b, _ := h.instance(t, ctx, res, "b")
	require.NoError(t, a.Await(ctx))
	fa := term(t, a, "a")
	bch := awaitAsync(ctx, b)
	h.opts.LoseMastership(t, af)
	requireEnded(t, ctx, fa, "a's term after the store took it away")
	require.NoError(t, receive(t, ctx, bch, "b to take over after a lost mastership"))
	fb := term(t, b, "b")
	require.Greater(t, fb.Token(), fa.Token())
}
