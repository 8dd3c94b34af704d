package etcd2topo

import (
	"context"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// NewLeaderParticipation joins the leader election name as id. Candidates
// are entries (see claim.go) in the queue <root>/elections/<name>/locks/,
// Vitess's layout: keys named after their lease (decimal), attached to
// the Conn's shared lease and valued with the participant id; the entry
// with the lowest ModRevision leads. The queues of two elections never
// overlap, so elections "svc" and "svc/a" are independent. It returns
// InvalidArgument for an empty name or id, InvalidPath for a malformed
// name or one with a "locks" or "Lock" segment (backendkit.CheckElection),
// Closed after Close. Nothing is written until WaitForLeadership.
func (c *Conn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	n, err := backendkit.CheckElection(name, id)
	if err != nil {
		return nil, err
	}
	if err := c.closedErr(n); err != nil {
		return nil, err
	}
	return c.newParticipation(n, id), nil
}

// newParticipation returns the participation of id in the election with
// the canonical name n, without checking whether c is closed.
func (c *Conn) newParticipation(n, id string) *participation {
	stopCtx, stop := context.WithCancel(c.ctx)
	return &participation{
		c:       c,
		name:    n,
		id:      id,
		prefix:  c.electionPrefix(n),
		stopCtx: stopCtx,
		stop:    stop,
	}
}

// electionPrefix returns the queue of election n's candidates.
func (c *Conn) electionPrefix(n string) string {
	return c.key(electionsDir + "/" + n + "/" + locksDir + "/")
}

// participation is one candidate in an election.
type participation struct {
	c      *Conn
	name   string
	id     string
	prefix string

	stopCtx context.Context // cancelled by Stop and by the Conn's Close
	stop    context.CancelFunc

	// campaign serializes WaitForLeadership and Stop's cleanup.
	campaign sync.Mutex
	cl       *claim // our entry while we lead
	leading  context.Context
	resign   context.CancelFunc

	// cur is the current (or last) leadership term, nil before the first.
	cur atomic.Pointer[term]

	vals values // Campaign, Resign, Resume (values.go)
}

// WaitForLeadership adds this participant's entry to the election and
// waits until every older entry is gone, then returns a context cancelled
// when leadership ends: Stop, deletion or rewrite of the entry (for
// example by the lease's expiry or revocation), loss of the lease (its
// proven-until time passing, see SafetyMargin: leadership ends before etcd
// can expire the lease and elect another), or the Conn's Close. The wait
// watches the election from the current revision, so a follower takes over
// as soon as the leader's entry is deleted. Called again while leading it
// returns the same context; after losing leadership it runs again. It
// returns Interrupted after Stop, Closed after Close, LockLost if its entry
// or lease was lost while waiting, PermissionDenied when etcd refuses.
func (p *participation) WaitForLeadership() (context.Context, error) {
	return p.join(p.stopCtx, nil, false)
}

// stoppedErr turns the error of a wait ended by Stop into Interrupted and
// one ended by Close into Closed.
func (p *participation) stoppedErr(err error) error {
	if p.c.isClosed() {
		return backendkit.Wrap(topo.Closed, p.name, err)
	}
	if p.stopCtx.Err() != nil {
		return backendkit.Wrap(topo.Interrupted, p.name, err)
	}
	return err
}

// monitor cancels the leadership context when the candidate entry is
// deleted or rewritten (see claim.follow), and when etcd refuses to let it
// watch the entry (PermissionDenied): a leader that cannot watch its entry
// gives leadership up. The lease's loss needs no monitor: the leadership
// context is a child of the lease's lostCtx, cancelled within markLost.
func (p *participation) monitor(leading context.Context, resign context.CancelFunc, cl *claim) {
	defer resign()
	_ = cl.follow(leading)
}

// Stop withdraws from the election: it ends a pending WaitForLeadership
// (which returns Interrupted), deletes the candidate entry, handing
// leadership to the next candidate, and cancels the leadership context.
// It returns once the entry is deleted, or after 2 s if etcd cannot be
// reached (the deletion is then retried in the background while the Conn
// is open). It is idempotent.
func (p *participation) Stop() {
	p.stop()
	if t := p.cur.Load(); t != nil && t.leading.Err() == nil {
		t.released.Store(true)
	}
	p.campaign.Lock()
	defer p.campaign.Unlock()
	if p.resign != nil {
		p.resign()
	}
	cl := p.cl
	p.cl = nil
	if cl == nil {
		cl = p.takeAdopted()
	}
	p.setEntry(nil)
	if cl != nil {
		p.dropEntry(cl, false)
	}
}

// Term returns the current leadership term: the same Fence from
// WaitForLeadership's return until leadership ends (then a NotLeader
// *topo.Error, until a later WaitForLeadership wins a new term); Closed
// after the Conn's Close. See term for its token and Done.
func (p *participation) Term() (topo.Fence, error) {
	if err := p.c.closedErr(p.name); err != nil {
		return nil, err
	}
	if t := p.cur.Load(); t != nil && t.leading.Err() == nil {
		return t, nil
	}
	return nil, topo.NewError(topo.NotLeader, p.name)
}

// term is one leadership term of a participation: the candidate entry
// that led, and the leadership context of WaitForLeadership.
type term struct {
	p        *participation
	cl       *claim
	leading  context.Context
	released atomic.Bool // Stop ended the term
	vkey     string      // the value key of cl's entry (values.go)
}

// Token returns the term's fencing token: the revision etcd put the
// candidate entry at (its CreateRevision). It is strictly greater for
// every later term of the election, whoever leads it, for the reason the
// tokens of locks are (see lockDescriptor.Token): the entry with the
// lowest ModRevision leads, and each term campaigns with a new entry.
func (t *term) Token() int64 { return t.cl.rev }

// Done returns the leadership context's Done channel: closed when the
// term ends (Stop, the entry deleted or rewritten, the lease lost, Close).
func (t *term) Done() <-chan struct{} { return t.leading.Done() }

// Check returns nil while the term lasts and the candidate entry is
// there, unchanged, on its lease (one linearizable read, as the lock's
// Check); LockLost once the term ended otherwise than by Stop;
// Interrupted after Stop; Closed after the Conn's Close; the read's error
// when etcd cannot answer.
func (t *term) Check(ctx context.Context) error {
	c, name := t.p.c, t.p.name
	if t.released.Load() && !c.isClosed() {
		return topo.NewError(topo.Interrupted, name)
	}
	if err := c.check(ctx, name); err != nil {
		return err
	}
	if t.leading.Err() != nil || t.cl.lease.lost() {
		return c.ownEntryGone(name)
	}
	resp, err := c.cli.Get(ctx, t.cl.key)
	if err != nil {
		return c.convertError(ctx, err, name)
	}
	if !t.cl.ours(resp.Kvs) || t.cl.lease.lost() {
		return c.ownEntryGone(name)
	}
	return nil
}

// heldClaim returns the entry IfHeld compares in the store, or ok false
// when the term is known to have ended here (Done closed, lease lost).
func (t *term) heldClaim() (*claim, bool) {
	return t.cl, !t.released.Load() && t.leading.Err() == nil && !t.cl.lease.lost()
}

// leaderOf returns the entry of queue prefix in kvs that leads (the lowest
// ModRevision), or nil.
func leaderOf(kvs []*mvccpb.KeyValue, prefix string) *mvccpb.KeyValue {
	var best *mvccpb.KeyValue
	for _, kv := range kvs {
		if queueEntry(kv, prefix) && (best == nil || kv.ModRevision < best.ModRevision) {
			best = kv
		}
	}
	return best
}

// GetCurrentLeaderID returns the value of the leading entry (the lowest
// ModRevision; one linearizable read), or "" when there is none.
func (p *participation) GetCurrentLeaderID(ctx context.Context) (string, error) {
	if err := p.c.check(ctx, p.name); err != nil {
		return "", err
	}
	resp, err := p.c.cli.Get(ctx, p.prefix, clientv3.WithPrefix())
	if err != nil {
		return "", p.c.convertError(ctx, err, p.name)
	}
	if kv := leaderOf(resp.Kvs, p.prefix); kv != nil {
		return string(kv.Value), nil
	}
	return "", nil
}
