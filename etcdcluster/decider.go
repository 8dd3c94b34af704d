package etcdcluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
)

// deciderLoop campaigns for the decider leadership and, while leading,
// reconciles the membership every CheckInterval.
func (n *Node) deciderLoop() {
	for n.ctx.Err() == nil {
		p, err := n.conn.NewLeaderParticipation(deciderElection, n.id)
		if err != nil {
			n.log.Error("decider candidacy", "err", err)
			return
		}
		n.mu.Lock()
		if n.ctx.Err() != nil {
			n.mu.Unlock()
			return
		}
		n.part = p
		n.mu.Unlock()
		lead, err := p.WaitForLeadership()
		if err != nil {
			if n.ctx.Err() != nil {
				return
			}
			n.log.Debug("decider election", "err", err)
			n.pause(n.cfg.CheckInterval)
			continue
		}
		n.lead(lead)
		p.Stop()
	}
}

func (n *Node) pause(d time.Duration) {
	select {
	case <-n.ctx.Done():
	case <-time.After(d):
	}
}

// decider is the state of one term of decider leadership.
type decider struct {
	n    *Node
	lead context.Context
	key  string // our candidate key
	rev  int64  // its CreateRevision
	seen map[uint64]time.Time
	// refused names the volunteers whose peer TLS check failed, logged
	// once until it passes.
	refused map[string]bool
	// passed are the volunteers (name and peer URL) whose nomination
	// timed out, passed over until their backoff ends.
	passed map[string]backoff
}

// backoff is a volunteer passed over after failed nominations: until
// when, and how many nominations in a row failed.
type backoff struct {
	until  time.Time
	failed int
}

// maxBackoffFactor caps a failed nominee's backoff at this many
// NomineeTimeouts.
const maxBackoffFactor = 16

// passOver records that the nomination of name at peer timed out: the
// volunteer is not nominated again for NomineeTimeout, doubling with
// each failure in a row up to maxBackoffFactor NomineeTimeouts.
func (d *decider) passOver(name, peer string) {
	k := name + " " + peer
	b := d.passed[k]
	b.failed++
	f := min(1<<min(b.failed-1, 8), maxBackoffFactor)
	b.until = time.Now().Add(time.Duration(f) * d.n.cfg.NomineeTimeout)
	d.passed[k] = b
	d.n.log.Warn("decider: passing over a nominee that failed", "member", name, "peer", peer, "failures", b.failed, "until", b.until.Format(time.RFC3339))
}

// lead runs the decider while lead lasts.
func (n *Node) lead(lead context.Context) {
	ctx, cancel := context.WithTimeout(lead, 5*time.Second)
	resp, err := n.cli.Get(ctx, n.k.deciderPrefix(), clientv3.WithFirstCreate()...)
	cancel()
	if err != nil || len(resp.Kvs) == 0 || string(resp.Kvs[0].Value) != n.id {
		n.log.Warn("decider: own candidate key not found first", "err", err)
		return
	}
	d := &decider{n: n, lead: lead, key: string(resp.Kvs[0].Key), rev: resp.Kvs[0].CreateRevision, seen: map[uint64]time.Time{}, refused: map[string]bool{}, passed: map[string]backoff{}}
	n.deciding.Store(true)
	defer n.deciding.Store(false)
	n.log.Info("became the decider", "id", n.id)
	// A volunteer key deleted (a node leaving, or its lease expired)
	// starts the next step at once rather than at the next interval.
	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(lead))
	defer wcancel()
	withdrawn := n.cli.Watch(wctx, n.k.volunteers(), clientv3.WithPrefix(), clientv3.WithFilterPut())
	for lead.Err() == nil && n.ctx.Err() == nil {
		d.reconcileLocked()
		select {
		case <-lead.Done():
		case <-n.ctx.Done():
		case <-time.After(n.cfg.CheckInterval):
		case _, ok := <-withdrawn:
			if !ok {
				withdrawn = nil // ended (no leader, or lead lost): intervals only
			}
		}
	}
	n.log.Info("no longer the decider", "id", n.id)
}

// reconcileLocked takes the membership lock and makes one step.
func (d *decider) reconcileLocked() {
	n := d.n
	ctx, cancel := context.WithTimeout(d.lead, max(10*n.cfg.CheckInterval, 10*time.Second))
	defer cancel()
	lock, err := n.conn.LockName(ctx, membershipLock, n.id)
	if err != nil {
		n.log.Debug("decider: membership lock", "err", err)
		return
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = lock.Unlock(uctx)
	}()
	g := &guard{d: d, lock: lock}
	if err := d.step(ctx, g); err != nil && !errors.Is(err, errNotLeading) && !errors.Is(err, errDeferred) {
		n.log.Warn("decider: step failed", "err", err)
	}
}

// guard fences the decider's changes: before each change it checks that
// the leadership context is alive, the membership lock is held, and the
// candidate key is still ours (a linearizable read through Raft).
type guard struct {
	d    *decider
	lock topo.LockDescriptor
}

func (g *guard) check(ctx context.Context) error {
	if g.d.lead.Err() != nil {
		return errNotLeading
	}
	if err := g.lock.Check(ctx); err != nil {
		return fmt.Errorf("%w: %w", errNotLeading, err)
	}
	resp, err := g.d.n.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(g.d.key), "=", g.d.rev)).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return errNotLeading
	}
	return nil
}

// putNominee writes the nominee record, only while our candidate key is
// ours.
func (g *guard) putNominee(ctx context.Context, nom *Nominee) error {
	v, _ := json.Marshal(nom)
	resp, err := g.d.n.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(g.d.key), "=", g.d.rev)).
		Then(clientv3.OpPut(g.d.n.k.nominee(), string(v))).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return errNotLeading
	}
	return nil
}

func (g *guard) deleteNominee(ctx context.Context) error {
	resp, err := g.d.n.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(g.d.key), "=", g.d.rev)).
		Then(clientv3.OpDelete(g.d.n.k.nominee())).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return errNotLeading
	}
	return nil
}

// errDeferred is returned by a step whose change etcd deferred (its
// leader has not been connected to the voters long enough); the next step
// tries again.
var errDeferred = errors.New("etcdcluster: change deferred by etcd")

// view is what one step decides on.
type view struct {
	members  []*etcdserverpb.Member
	voters   []*etcdserverpb.Member
	learners []*etcdserverpb.Member
	vols     map[string]volunteerInfo // by name
	leases   map[string]int64         // volunteer key leases, by name
	size     int
	nom      *Nominee
}

func (d *decider) read(ctx context.Context) (*view, error) {
	n := d.n
	ml, err := n.cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := n.cli.Txn(ctx).Then(
		clientv3.OpGet(n.k.size()),
		clientv3.OpGet(n.k.volunteers(), clientv3.WithPrefix()),
		clientv3.OpGet(n.k.nominee()),
	).Commit()
	if err != nil {
		return nil, err
	}
	v := &view{members: ml.Members, vols: map[string]volunteerInfo{}, leases: map[string]int64{}, size: DefaultIdealSize}
	for _, m := range ml.Members {
		if m.IsLearner {
			v.learners = append(v.learners, m)
		} else {
			v.voters = append(v.voters, m)
		}
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		if s, err := strconv.Atoi(string(kvs[0].Value)); err == nil && s >= 1 {
			v.size = s
		}
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		var vi volunteerInfo
		if json.Unmarshal(kv.Value, &vi) == nil && vi.Name != "" {
			v.vols[vi.Name] = vi
			v.leases[vi.Name] = kv.Lease
		}
	}
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 {
		var nom Nominee
		if json.Unmarshal(kvs[0].Value, &nom) == nil {
			v.nom = &nom
		}
	}
	return v, nil
}

func hasPeer(m *etcdserverpb.Member, u string) bool { return slices.Contains(m.PeerURLs, u) }

// volunteering reports whether member m has a volunteer key.
func (v *view) volunteering(m *etcdserverpb.Member) bool {
	for _, vi := range v.vols {
		if hasPeer(m, vi.PeerURL) && (m.Name == "" || m.Name == vi.Name) {
			return true
		}
	}
	return false
}

// step makes at most one membership change, in this order: finish or roll
// back the change in flight; remove a member that stopped volunteering;
// add one volunteer as a learner; remove one voter above the ideal size.
func (d *decider) step(ctx context.Context, g *guard) error {
	n := d.n
	v, err := d.read(ctx)
	if err != nil {
		return err
	}

	// 1. A change in flight: a learner (ours or a predecessor's), or a
	// nominee record.
	if len(v.learners) > 0 {
		l := v.learners[0]
		first, ok := d.seen[l.ID]
		if !ok {
			first = time.Now()
			d.seen[l.ID] = first
		}
		if v.nom == nil || !hasPeer(l, v.nom.PeerURL) {
			return d.rollback(ctx, g, l, "learner without a nomination record")
		}
		if !v.volunteering(l) {
			return d.rollback(ctx, g, l, "nominee stopped volunteering")
		}
		if l.Name != "" {
			if err := g.check(ctx); err != nil {
				return err
			}
			_, err := n.cli.MemberPromote(ctx, l.ID)
			switch {
			case err == nil:
				n.log.Info("decision: promoted learner to voter", "member", l.Name, "id", fmt.Sprintf("%x", l.ID), "reason", "caught up with the leader")
				delete(d.seen, l.ID)
				delete(d.passed, v.nom.Name+" "+v.nom.PeerURL)
				return g.deleteNominee(ctx)
			case errors.Is(err, rpctypes.ErrMemberLearnerNotReady):
			default:
				n.log.Debug("promote", "member", l.Name, "err", err)
			}
		}
		if time.Since(first) > n.cfg.NomineeTimeout {
			if err := d.rollback(ctx, g, l, fmt.Sprintf("nominee did not start or catch up within %v", n.cfg.NomineeTimeout)); err != nil {
				return err
			}
			d.passOver(v.nom.Name, v.nom.PeerURL)
			return nil
		}
		return nil
	}
	if v.nom != nil {
		// No learner: either promoted (a predecessor died before deleting
		// the record), rolled back, or never added.
		n.log.Info("decision: clearing the finished or abandoned nomination", "nominee", v.nom.Name)
		return g.deleteNominee(ctx)
	}
	clear(d.seen)

	health := d.health(ctx, v.voters)

	// 2. Remove a voter that stopped volunteering, dead ones first.
	var gone []*etcdserverpb.Member
	for _, m := range v.voters {
		if !v.volunteering(m) || d.leaseExpired(ctx, v.leases[m.Name]) {
			gone = append(gone, m)
		}
	}
	slices.SortFunc(gone, func(a, b *etcdserverpb.Member) int {
		return cmp.Or(cmp.Compare(b2i(health[a.ID]), b2i(health[b.ID])), cmp.Compare(a.Name, b.Name))
	})
	for _, m := range gone {
		if ok, why := d.canRemove(v, m, health); !ok {
			n.log.Debug("decider: not removing", "member", m.Name, "why", why)
			continue
		}
		return d.remove(ctx, g, m, "stopped volunteering (volunteer key expired or withdrawn)")
	}

	// 3. Grow by one learner.
	if len(v.voters) < v.size {
		var cands []volunteerInfo
		for _, vi := range v.vols {
			if slices.ContainsFunc(v.members, func(m *etcdserverpb.Member) bool { return hasPeer(m, vi.PeerURL) || m.Name == vi.Name }) {
				continue
			}
			// Never nominate a volunteer this decider could not reach
			// over the peer TLS it requires.
			if err := n.peerReachable(ctx, vi.PeerURL); err != nil {
				if !d.refused[vi.Name] {
					n.log.Warn("decider: not nominating a volunteer whose peer address fails the peer TLS check", "member", vi.Name, "err", err)
					d.refused[vi.Name] = true
				}
				continue
			}
			delete(d.refused, vi.Name)
			if b, ok := d.passed[vi.Name+" "+vi.PeerURL]; ok && time.Now().Before(b.until) {
				n.log.Debug("decider: passing over a volunteer whose nomination failed", "member", vi.Name, "until", b.until)
				continue
			}
			cands = append(cands, vi)
		}
		if len(cands) > 0 {
			slices.SortFunc(cands, func(a, b volunteerInfo) int { return cmp.Compare(a.Name, b.Name) })
			return d.nominate(ctx, g, cands[0], len(v.voters), v.size)
		}
	}

	// 4. Shrink by one voter.
	if len(v.voters) > v.size {
		leader := d.raftLeader(ctx, v.voters)
		vs := slices.Clone(v.voters)
		slices.SortFunc(vs, func(a, b *etcdserverpb.Member) int {
			return cmp.Or(
				cmp.Compare(b2i(health[a.ID]), b2i(health[b.ID])), // unhealthy first
				cmp.Compare(b2i(a.ID == leader), b2i(b.ID == leader)),
				cmp.Compare(b2i(a.Name == n.cfg.Name), b2i(b.Name == n.cfg.Name)),
				cmp.Compare(b.Name, a.Name),
			)
		})
		for _, m := range vs {
			if ok, why := d.canRemove(v, m, health); !ok {
				n.log.Debug("decider: not removing", "member", m.Name, "why", why)
				continue
			}
			return d.remove(ctx, g, m, fmt.Sprintf("%d voters above the ideal size %d", len(v.voters), v.size))
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// leaseExpired reports whether the lease of a volunteer key expired at
// least a second ago by the etcd leader's clock while etcd has not yet
// deleted the key: etcd revokes an expired lease only every 500 ms and,
// when a revocation attempt fails, retries it 3 s later, so a dead node's
// key can outlive its TTL by seconds. An expired lease can no longer be
// renewed, so its key counts as withdrawn.
func (d *decider) leaseExpired(ctx context.Context, id int64) bool {
	if id == 0 {
		return false
	}
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := d.n.cli.TimeToLive(tctx, clientv3.LeaseID(id))
	return err == nil && resp.TTL < 0
}

// canRemove reports whether removing voter m keeps a quorum of healthy
// voters in the new configuration, and never removes the last voter.
func (d *decider) canRemove(v *view, m *etcdserverpb.Member, health map[uint64]bool) (bool, string) {
	if len(v.voters) <= 1 {
		return false, "the last voter"
	}
	remaining, healthy := 0, 0
	for _, o := range v.voters {
		if o.ID == m.ID {
			continue
		}
		remaining++
		if health[o.ID] {
			healthy++
		}
	}
	if healthy < remaining/2+1 {
		return false, fmt.Sprintf("only %d of the %d remaining voters are healthy", healthy, remaining)
	}
	return true, ""
}

// health asks each member for its status, in parallel, within a second.
func (d *decider) health(ctx context.Context, ms []*etcdserverpb.Member) map[uint64]bool {
	type res struct {
		id uint64
		ok bool
	}
	ch := make(chan res, len(ms))
	for _, m := range ms {
		go func() {
			if len(m.ClientURLs) == 0 {
				ch <- res{m.ID, false}
				return
			}
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := d.n.eps.status(sctx, m.ClientURLs[0])
			ch <- res{m.ID, err == nil}
		}()
	}
	out := map[uint64]bool{}
	for range ms {
		r := <-ch
		out[r.id] = r.ok
	}
	return out
}

func (d *decider) raftLeader(ctx context.Context, ms []*etcdserverpb.Member) uint64 {
	for _, m := range ms {
		if len(m.ClientURLs) == 0 {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		sr, err := d.n.eps.status(sctx, m.ClientURLs[0])
		cancel()
		if err == nil && sr.Leader != 0 {
			return sr.Leader
		}
	}
	return 0
}

func (d *decider) nominate(ctx context.Context, g *guard, vi volunteerInfo, voters, size int) error {
	n := d.n
	nom := &Nominee{Name: vi.Name, PeerURL: vi.PeerURL, Decider: n.id, NominatedAt: time.Now().UTC()}
	if err := g.check(ctx); err != nil {
		return err
	}
	if err := g.putNominee(ctx, nom); err != nil {
		return err
	}
	if err := g.check(ctx); err != nil {
		return err
	}
	resp, err := n.cli.MemberAddAsLearner(ctx, []string{vi.PeerURL})
	if err != nil {
		// Withdraw the record (if this fails, the next step clears it:
		// there is no learner) and decide again next time.
		_ = g.deleteNominee(ctx)
		if errors.Is(err, rpctypes.ErrUnhealthy) {
			// etcd refuses membership changes until its leader has been
			// connected to every voter for 5 s (e.g. just after a
			// promotion): an expected wait, not a failure.
			n.log.Debug("decider: etcd defers adding a learner", "member", vi.Name, "err", err)
			return nil
		}
		return fmt.Errorf("adding %s as a learner: %w", vi.Name, err)
	}
	d.seen[resp.Member.ID] = time.Now()
	nom.MemberID = fmt.Sprintf("%x", resp.Member.ID)
	n.log.Info("decision: added volunteer as a learner", "member", vi.Name, "id", nom.MemberID, "peer", vi.PeerURL,
		"reason", fmt.Sprintf("%d voters below the ideal size %d", voters, size))
	return g.putNominee(ctx, nom)
}

func (d *decider) rollback(ctx context.Context, g *guard, l *etcdserverpb.Member, why string) error {
	if err := d.removeMember(ctx, g, l, "decision: rolled back nominee", why); err != nil {
		return err
	}
	delete(d.seen, l.ID)
	return g.deleteNominee(ctx)
}

func (d *decider) remove(ctx context.Context, g *guard, m *etcdserverpb.Member, why string) error {
	return d.removeMember(ctx, g, m, "decision: removed member", why)
}

func (d *decider) removeMember(ctx context.Context, g *guard, m *etcdserverpb.Member, msg, why string) error {
	if err := g.check(ctx); err != nil {
		return err
	}
	_, err := d.n.cli.MemberRemove(ctx, m.ID)
	if errors.Is(err, rpctypes.ErrUnhealthy) {
		// etcd's own check: the leader must have been connected to a
		// quorum of the remaining voters for 5 s. Try again later.
		d.n.log.Debug("decider: etcd defers removing a member", "member", m.Name, "err", err)
		return errDeferred
	}
	if err != nil && !errors.Is(err, rpctypes.ErrMemberNotFound) {
		// A failed call does not say the removal did not happen: etcd
		// may apply it and still answer "server stopped" (the server
		// that took the request is the removed member, and it stops
		// between applying and answering), or the answer may be lost.
		// Look at the member list before reporting either outcome.
		if gone, lerr := d.memberGone(ctx, m.ID); lerr != nil || !gone {
			return fmt.Errorf("removing %s (%x): %w", m.Name, m.ID, err)
		}
		d.n.log.Info(msg, "member", m.Name, "id", fmt.Sprintf("%x", m.ID), "reason", why, "answer", err.Error())
		return nil
	}
	d.n.log.Info(msg, "member", m.Name, "id", fmt.Sprintf("%x", m.ID), "reason", why)
	return nil
}

// memberGone reports whether the member id is no longer in the member
// list (a linearizable read through Raft, so a removal that was applied
// shows). It tries for up to 5 s: the server the client used may be the
// removed member, which has just stopped.
func (d *decider) memberGone(ctx context.Context, id uint64) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		ml, err := d.n.cli.MemberList(ctx)
		if err == nil {
			return !containsID(ml.Members, id), nil
		}
		select {
		case <-ctx.Done():
			return false, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}
