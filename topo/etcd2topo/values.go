package etcd2topo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Leader values of the Vitess-layout elections (see doc.go for the
// layout and why neither Vitess nor topokit can take a value key for a
// candidate).

// valuesDir is the segment under <root>/elections/ holding the published
// values: a NUL byte, which no election name or canonical path contains,
// then "values".
const valuesDir = "\x00values"

// valuesPrefix returns the prefix of election n's published values.
func (c *Conn) valuesPrefix(n string) string {
	return c.key(electionsDir + "/" + valuesDir + "/" + n + "/")
}

// values is the state of a participation that Campaign, Resign and
// Resume add to WaitForLeadership's.
type values struct {
	mu        sync.Mutex
	resignCtx context.Context    // cancelled by Resign: ends pending campaigns
	resignAll context.CancelFunc //
	entry     *claim             // our entry, waiting or leading (ResumeInfo)
	adopted   *claim             // an entry taken over by Resume, not yet led
}

// valueKey returns the key of the value published beside candidate key.
func (p *participation) valueKey(key string) string {
	return p.c.valuesPrefix(p.name) + key[len(p.prefix):]
}

// resignCtx returns the context the next Resign cancels.
func (p *participation) resignCtx() context.Context {
	p.vals.mu.Lock()
	defer p.vals.mu.Unlock()
	if p.vals.resignCtx == nil {
		p.vals.resignCtx, p.vals.resignAll = context.WithCancel(context.Background())
	}
	return p.vals.resignCtx
}

func (p *participation) setEntry(cl *claim) {
	p.vals.mu.Lock()
	p.vals.entry = cl
	p.vals.mu.Unlock()
}

func (p *participation) takeAdopted() *claim {
	p.vals.mu.Lock()
	defer p.vals.mu.Unlock()
	cl := p.vals.adopted
	p.vals.adopted = nil
	return cl
}

// dropEntry deletes our entry and its value in one transaction (the
// entry only if it is still ours: its ModRevision unchanged), or revokes
// the entry's own lease, then frees the entry's name; with async in the
// background, else within 2 s (then retried in the background).
func (p *participation) dropEntry(cl *claim, async bool) {
	if !cl.own && len(cl.with) == 0 {
		cl.with = []string{p.valueKey(cl.key)}
	}
	cl.removeAsync(async)
}

// joinErr is the error of a campaign that ended because ctx, Resign
// (rctx), Stop or Close ended it, or nil.
func (p *participation) joinErr(ctx, rctx context.Context) error {
	switch {
	case p.c.isClosed():
		return topo.NewError(topo.Closed, p.name)
	case p.stopCtx.Err() != nil || rctx.Err() != nil:
		return topo.NewError(topo.Interrupted, p.name)
	case ctx.Err() != nil:
		return backendkit.FromContext(ctx, p.name)
	}
	return nil
}

// join is Campaign (setValue: publish value) and WaitForLeadership (keep
// the value of an adopted entry, or publish none).
func (p *participation) join(ctx context.Context, value []byte, setValue bool) (context.Context, error) {
	if setValue {
		// Campaign: backendkit's order, the context before the value.
		if err := backendkit.CheckContext(ctx, p.name); err != nil {
			return nil, err
		}
		if err := backendkit.CheckValue(p.name, value); err != nil {
			return nil, err
		}
	}
	rctx := p.resignCtx()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.stopCtx, cancel)()
	defer context.AfterFunc(rctx, cancel)()
	p.campaign.Lock()
	defer p.campaign.Unlock()
	if err := p.joinErr(ctx, rctx); err != nil {
		return nil, err
	}
	if p.leading != nil && p.leading.Err() == nil {
		if setValue {
			if err := p.Proclaim(ctx, value); err != nil {
				return nil, err
			}
		}
		return p.leading, nil
	}
	if p.cl != nil {
		// Leadership was lost: the old entry is gone or going; make sure,
		// and free its name.
		p.dropEntry(p.cl, false)
		p.cl = nil
		p.setEntry(nil)
	}
	fail := func(err error) error {
		if e := p.joinErr(ctx, rctx); e != nil {
			return backendkit.Wrap(topo.CodeOf(e), p.name, err)
		}
		return err
	}
	cl := p.takeAdopted()
	if cl != nil {
		if err := p.adoptedOlder(wctx, cl); err != nil {
			p.dropEntry(cl, false)
			return nil, fail(err)
		}
	} else {
		v := ""
		if setValue {
			v = string(value)
		}
		var err error
		cl, err = p.c.claimOnWith(wctx, p.name, p.prefix, p.id, 0, false, func(key string, l *lease) ([]clientv3.Op, []string) {
			vkey := p.valueKey(key)
			return []clientv3.Op{clientv3.OpPut(vkey, v, clientv3.WithLease(l.id))}, []string{vkey}
		})
		if err != nil {
			return nil, fail(err)
		}
		setValue = false // published with the entry
	}
	p.setEntry(cl)
	if cl.mustWait() {
		if err := cl.wait(wctx); err != nil {
			p.setEntry(nil)
			p.dropEntry(cl, false)
			return nil, fail(err)
		}
	}
	cl.resp = nil
	// A child of the lease's lostCtx: markLost cancels it before it
	// returns, so that no one sees the lease lost and this term live.
	leading, resign := context.WithCancel(cl.lease.lostCtx)
	p.cl, p.leading, p.resign = cl, leading, resign
	t := &term{p: p, cl: cl, leading: leading, vkey: p.valueKey(cl.key)}
	p.cur.Store(t)
	go p.monitor(leading, resign, cl)
	if setValue {
		if err := p.proclaim(ctx, t, value); err != nil {
			return nil, err
		}
	}
	return leading, nil
}

// adoptedOlder reads the queue and records the entries ahead of the
// adopted entry cl; LockLost when cl is no longer there.
func (p *participation) adoptedOlder(ctx context.Context, cl *claim) error {
	resp, err := p.c.cli.Get(ctx, p.prefix, clientv3.WithPrefix())
	if err != nil {
		return p.c.convertError(ctx, err, p.name)
	}
	var mine []*mvccpb.KeyValue
	for _, kv := range resp.Kvs {
		if string(kv.Key) == cl.key {
			mine = append(mine, kv)
		}
	}
	if !cl.ours(mine) || cl.lease.lost() {
		return p.c.ownEntryGone(p.name)
	}
	cl.older = olderEntries(resp.Kvs, p.prefix, cl.key, cl.rev)
	return nil
}

// Campaign joins the election with value published beside the candidate
// entry: the entry elections/<name>/locks/<lease id> holds the id (as
// Vitess reads it) and the value key (see doc.go) is put on the same
// lease in the same transaction, so no leader is ever seen without its
// value. It waits as WaitForLeadership does, bounded by ctx: when ctx
// ends first the entry and value are deleted and it returns Timeout or
// Interrupted. While leading it proclaims value and returns the same
// context. Resign ends a pending Campaign (Interrupted); after Stop it
// returns Interrupted, after Close Closed; InvalidArgument for a value
// over MaxValueSize; LockLost, PermissionDenied, Unavailable as
// WaitForLeadership.
func (p *participation) Campaign(ctx context.Context, value []byte) (context.Context, error) {
	return p.join(ctx, value, true)
}

// Proclaim replaces the published value in one transaction that compares
// the candidate entry's CreateRevision and ModRevision with the term's
// token and its lease with ours: a deposed leader (entry deleted,
// rewritten, lease gone) cannot write. It returns NotLeader when this
// participant does not lead or the compare fails, InvalidArgument for a
// value over MaxValueSize, Closed after Close, and etcd's errors
// (Timeout, Unavailable: the value may have been written).
func (p *participation) Proclaim(ctx context.Context, value []byte) error {
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return err
	}
	if err := backendkit.CheckValue(p.name, value); err != nil {
		return err
	}
	if err := p.c.closedErr(p.name); err != nil {
		return err
	}
	t := p.cur.Load()
	if t == nil {
		return topo.NewError(topo.NotLeader, p.name)
	}
	return p.proclaim(ctx, t, value)
}

// proclaim is Proclaim's guarded write for term t.
func (p *participation) proclaim(ctx context.Context, t *term, value []byte) error {
	cl, ok := t.heldClaim()
	if !ok {
		return topo.NewError(topo.NotLeader, p.name)
	}
	// One compare is the whole guard: the entry's ModRevision equal to the
	// revision of the claim's own put means the key was last written by
	// that put (one revision is one transaction), so it is this term's
	// entry, never rewritten, still on the lease the put gave it (a lease
	// changes only with a put, which moves the ModRevision); a deleted or
	// expired entry has ModRevision 0. The put of the value fails with
	// ErrLeaseNotFound once the lease is gone.
	resp, err := p.c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(cl.key), "=", cl.rev)).
		Then(clientv3.OpPut(t.vkey, string(value), clientv3.WithLease(cl.lease.id))).
		Commit()
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return backendkit.Wrap(topo.NotLeader, p.name, err)
		}
		return p.c.convertError(ctx, err, p.name)
	}
	if !resp.Succeeded {
		return backendkit.Wrap(topo.NotLeader, p.name, errors.New("etcd2topo: the candidate entry is gone or was rewritten"))
	}
	return nil
}

// Resign ends a pending Campaign or WaitForLeadership (Interrupted),
// cancels the leadership context, and deletes the entry and its value in
// one transaction (or revokes the entry's own lease, as for a resumed
// entry). With an ended ctx it tries for resignGrace (3 s). It returns nil
// when there is nothing to resign, and the ctx's error (Timeout,
// Interrupted) or etcd's when the delete did not finish (it is then
// retried in the background while the Conn is open). After the Conn's
// Close it returns Closed (Close revoked the lease, ending the candidacy),
// once the participant's own state is cleared.
func (p *participation) Resign(ctx context.Context) error {
	gctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		gctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), resignGrace)
		defer cancel()
	}
	p.vals.mu.Lock()
	if p.vals.resignAll != nil {
		p.vals.resignAll()
	}
	p.vals.resignCtx, p.vals.resignAll = context.WithCancel(context.Background())
	p.vals.mu.Unlock()
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
	if cl == nil {
		return p.c.closedErr(p.name)
	}
	if p.c.isClosed() {
		cl.release()
		return p.c.closedErr(p.name) // Close revoked the lease
	}
	if cl.own {
		p.dropEntry(cl, false)
		return nil
	}
	key, vkey := cl.key, p.valueKey(cl.key)
	_, err := p.c.cli.Txn(gctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", cl.rev)).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(vkey)).
		Else(clientv3.OpDelete(vkey)).
		Commit()
	if err != nil {
		p.dropEntry(cl, true)
		return p.c.convertError(gctx, err, p.name)
	}
	cl.release()
	return nil
}

// electionView is the leader of an election at revision rev, with its
// entry's key and lease ("" and 0 when nobody leads).
type electionView struct {
	leader topo.Leader
	key    string
	vkey   string // the value key of key's entry
	lease  int64
	rev    int64
}

// electionState is one consistent read of an election: its queue and
// its values, at one revision.
func (p *participation) electionState(ctx context.Context) (electionView, error) {
	vprefix := p.c.valuesPrefix(p.name)
	resp, err := p.c.cli.Txn(ctx).Then(
		clientv3.OpGet(p.prefix, clientv3.WithPrefix()),
		clientv3.OpGet(vprefix, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return electionView{}, err
	}
	queue := resp.Responses[0].GetResponseRange().Kvs
	vals := resp.Responses[1].GetResponseRange().Kvs
	v := electionView{rev: resp.Header.Revision}
	kv := leaderOf(queue, p.prefix)
	if kv == nil {
		return v, nil
	}
	v.key, v.lease = string(kv.Key), kv.Lease
	v.leader = topo.Leader{ID: string(kv.Value), Token: kv.CreateRevision}
	v.vkey = p.valueKey(v.key)
	vkey := v.vkey
	for _, val := range vals {
		// The value of this entry: on its lease, written with or after it
		// (a stale key of an earlier entry of the name is older).
		if string(val.Key) == vkey && val.Lease == kv.Lease && val.ModRevision >= kv.CreateRevision && len(val.Value) > 0 {
			v.leader.Value = bytes.Clone(val.Value)
		}
	}
	return v, nil
}

// proclaimed returns the view after ev, a change of the values seen
// after view v, and ok true, when ev is a Proclaim of v's leader: a put
// of its value key on its lease, after v's revision, to the value key
// created with the entry (CreateRevision = the entry's revision: it has
// existed ever since). The Campaign transaction creates the value key
// with its entry, and every removal of the entry deletes the value key
// with it (one transaction, or the lease's revocation) before the
// entry's name is used again; so a later put to that same value key is a
// Proclaim, which writes only while the entry is there unchanged
// (compared in the store). At ev's revision the entry is thus there,
// unchanged, and every entry with a lower ModRevision would have been
// there at v's revision too, where the entry led: it still leads, with
// the new value.
func (p *participation) proclaimed(v electionView, ev *clientv3.Event) (electionView, bool) {
	kv := ev.Kv
	if ev.Type != mvccpb.PUT || v.key == "" || string(kv.Key) != v.vkey ||
		kv.Lease != v.lease || kv.CreateRevision != v.leader.Token ||
		kv.ModRevision <= v.rev || kv.ModRevision <= v.leader.Token {
		return v, false
	}
	v.rev = kv.ModRevision
	v.leader.Value = nil
	if len(kv.Value) > 0 {
		v.leader.Value = bytes.Clone(kv.Value)
	}
	return v, true
}

// Leader returns the entry with the lowest ModRevision (Vitess's leader)
// with its id, its published value (nil when none, as for a Vitess
// candidate) and its CreateRevision as Token, from one read of the queue
// and the values at one revision. NoLeader when nobody leads; Closed
// after Close; Timeout, Interrupted, Unavailable, PermissionDenied from
// the read.
func (p *participation) Leader(ctx context.Context) (topo.Leader, error) {
	if err := p.c.check(ctx, p.name); err != nil {
		return topo.Leader{}, err
	}
	v, err := p.electionState(ctx)
	if err != nil {
		return topo.Leader{}, p.c.convertError(ctx, err, p.name)
	}
	if v.key == "" {
		return topo.Leader{}, topo.NewError(topo.NoLeader, p.name)
	}
	return v.leader, nil
}

func sameLeader(a, b topo.Leader) bool {
	return a.ID == b.ID && a.Token == b.Token && bytes.Equal(a.Value, b.Value)
}

// Observe returns a channel that gets the current leader (Leader{} when
// nobody leads) and then the leader after every change of the queue or
// of the values that changes it or its value. Two watches follow the
// queue and the values. Each value sent is the state at one revision:
// either a consistent read of both (as Leader) taken after a change was
// seen, or, for a Proclaim of the leader last sent, that leader with the
// new value at the Proclaim's revision (proven from the Proclaim's
// compare, see proclaimed). So a resigned or expired leader is never sent
// after its deletion was applied, and the last value sent is the state
// after the last change.
// The watches resume after transient failures and reconnections from the
// last revision they saw, and after a compaction from the current one
// (followed by a read). The channel closes when ctx ends, the Conn
// closes, or etcd refuses a watch or read (PermissionDenied).
func (p *participation) Observe(ctx context.Context) (<-chan topo.Leader, error) {
	c := p.c
	if err := c.check(ctx, p.name); err != nil {
		return nil, err
	}
	octx, ocancel := context.WithCancel(ctx)
	qs, err := c.newStream(octx, p.prefix, true, p.name)
	if err != nil {
		ocancel()
		return nil, err
	}
	vs, err := c.newStream(octx, c.valuesPrefix(p.name), true, p.name)
	if err != nil {
		qs.close()
		ocancel()
		return nil, err
	}
	view, err := p.electionState(octx)
	if err != nil {
		qs.close()
		vs.close()
		ocancel()
		return nil, c.convertError(ctx, err, p.name)
	}
	qs.rev, vs.rev = view.rev, view.rev
	out := make(chan topo.Leader, watchBuffer)
	out <- view.leader
	kick := make(chan struct{}, 1)          // the queue changed, or a resync
	vevs := make(chan []*clientv3.Event, 1) // changes of the values
	feed := func(s *stream, values bool) {
		defer ocancel()
		defer s.close()
		for {
			evs, err := s.next()
			if errors.Is(err, errCompacted) {
				resp, err := s.read(func() (*clientv3.GetResponse, error) {
					return c.cli.Get(octx, s.key, clientv3.WithPrefix(), clientv3.WithCountOnly())
				})
				if err != nil {
					return
				}
				s.reopen(resp.Header.Revision)
				evs = nil // resync: re-read
			} else if err != nil {
				return
			}
			if values && evs != nil {
				select {
				case vevs <- evs:
				case <-octx.Done():
					return
				}
				continue
			}
			select {
			case kick <- struct{}{}:
			default:
			}
		}
	}
	go feed(qs, false)
	go feed(vs, true)
	go func() {
		defer close(out)
		defer ocancel()
		for {
			next, reread := view, false
			select {
			case <-kick:
				reread = true
			case evs := <-vevs:
				for _, ev := range evs {
					if ev.Kv.ModRevision <= next.rev {
						continue // in the state already
					}
					var ok bool
					if next, ok = p.proclaimed(next, ev); !ok {
						reread = true
						break
					}
				}
			case <-octx.Done():
				return
			}
			if reread {
				backoff := 20 * time.Millisecond
				for {
					var err error
					if next, err = p.electionState(octx); err == nil {
						break
					}
					if octx.Err() != nil || c.isClosed() || isPermanent(err) {
						return
					}
					if qs.pause(backoff) != nil {
						return
					}
					backoff = min(2*backoff, time.Second)
				}
			}
			if next.rev < view.rev {
				continue // never step back (reads are linearizable; defensive)
			}
			changed := !sameLeader(next.leader, view.leader)
			view = next
			if !changed {
				continue
			}
			select {
			case out <- view.leader:
			case <-octx.Done():
				return
			case <-c.ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// leaderIDs is WaitForNewLeader as a view of an Observe channel: the ID
// of the current leader (if any) and of every new term (a new ID or
// Token), without values and without "nobody leads". It drains obs.
func leaderIDs(ctx context.Context, obs <-chan topo.Leader) <-chan string {
	out := make(chan string, watchBuffer)
	go func() {
		defer close(out)
		var lastID string
		var lastTok int64
		for l := range obs {
			if l.ID == "" || (l.ID == lastID && l.Token == lastTok) {
				continue
			}
			lastID, lastTok = l.ID, l.Token
			select {
			case out <- l.ID:
			case <-ctx.Done():
				for range obs {
				}
				return
			}
		}
	}()
	return out
}

// WaitForNewLeader returns a channel that receives the current leader's
// id (if any) and then the id of each new leader: a view of Observe (see
// leaderIDs). The channel closes when ctx ends or the Conn closes.
func (p *participation) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	obs, err := p.Observe(ctx)
	if err != nil {
		return nil, err
	}
	return leaderIDs(ctx, obs), nil
}

// vitessLayout names the default layout in ResumeInfo.
const vitessLayout = "vitess"

// vitessResume is what ResumeInfo returns, as JSON.
type vitessResume struct {
	Backend  string `json:"backend"`
	Layout   string `json:"layout"`
	Election string `json:"election"`
	ID       string `json:"id"`
	Key      string `json:"key"`
	Lease    int64  `json:"lease"`
	Rev      int64  `json:"create_revision"`
}

// ResumeInfo returns JSON naming the backend, the layout ("vitess"), the
// election, the id, the candidate entry's key, its lease id and its
// CreateRevision, for Conn.ResumeLeaderParticipation. NoNode when the
// participant has no entry (not campaigning), Closed after the Conn's
// Close.
func (p *participation) ResumeInfo() ([]byte, error) {
	if err := p.c.closedErr(p.name); err != nil {
		return nil, err
	}
	p.vals.mu.Lock()
	cl := p.vals.entry
	p.vals.mu.Unlock()
	if cl == nil {
		return nil, topo.NewError(topo.NoNode, p.name)
	}
	return json.Marshal(vitessResume{
		Backend: FactoryName, Layout: vitessLayout, Election: p.name, ID: p.id,
		Key: cl.key, Lease: int64(cl.lease.id), Rev: cl.rev,
	})
}

// adoptLease renews lease id once and, if etcd still has it, returns it
// kept alive from this Conn from then on (see keepAlive). LockLost when
// the lease is gone.
func (c *Conn) adoptLease(ctx context.Context, id clientv3.LeaseID, path string) (*lease, error) {
	sent := time.Now()
	ka, err := c.cli.KeepAliveOnce(ctx, id)
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return nil, backendkit.Wrap(topo.LockLost, path, err)
		}
		return nil, c.convertError(ctx, err, path)
	}
	if ka.TTL <= 0 {
		return nil, topo.NewError(topo.LockLost, path)
	}
	return newLease(id, time.Duration(ka.TTL)*time.Second, sent), nil
}

// ResumeLeaderParticipation takes back, through this Conn, the candidacy
// that a participation of election name and id (typically in a process
// that restarted) described with ResumeInfo: it renews the entry's lease
// and keeps it alive from this Conn from then on, checks that the entry
// is still there, created at the same revision, on that lease, holding
// id, and returns a participation that owns it: WaitForLeadership and
// Campaign wait from the entry's place (or return at once, with the same
// term and Token, if it leads; Campaign then proclaims its value), and
// Resign and Stop revoke the lease (anything else the old process had on
// it goes too; until then this Conn keeps all of it alive). The info of
// a native election (ResumeInfo of NewNativeElection) is passed to
// ResumeNativeElection with name as the prefix. It returns LockLost when
// the lease or entry is gone; InvalidArgument for info that is malformed
// or was issued for another election, id or backend, or whose entry a
// participation of this Conn owns; the errors of NewLeaderParticipation;
// Timeout, Interrupted, Unavailable, PermissionDenied from etcd.
func (c *Conn) ResumeLeaderParticipation(ctx context.Context, name, id string, info []byte) (topo.LeaderParticipation, error) {
	// backendkit's order: the context, the name and id, the resume info,
	// and only then (c.check) whether c is closed.
	if err := backendkit.CheckContext(ctx, name); err != nil {
		return nil, err
	}
	if isNativeResumeInfo(info) {
		return c.ResumeNativeElection(ctx, name, id, info)
	}
	n, err := backendkit.CheckElection(name, id)
	if err != nil {
		return nil, err
	}
	p := c.newParticipation(n, id)
	bad := func(why string) error {
		p.stop()
		return backendkit.Wrap(topo.InvalidArgument, p.name, errors.New("etcd2topo: resume info: "+why))
	}
	var r vitessResume
	if err := json.Unmarshal(info, &r); err != nil {
		return nil, bad(err.Error())
	}
	switch {
	case r.Backend != FactoryName || r.Layout != vitessLayout:
		return nil, bad("not an etcd election's")
	case r.Election != p.name || r.ID != id:
		return nil, bad("issued for another election or id")
	case r.Lease <= 0 || r.Rev <= 0 || r.Key != p.prefix+strconv.FormatInt(r.Lease, 10):
		return nil, bad("malformed key, lease or revision")
	}
	if err := c.check(ctx, p.name); err != nil {
		return nil, err
	}
	var release func()
	if !c.takeName(r.Key, &release) {
		return nil, bad("the candidacy is owned by a participation of this Conn")
	}
	l, err := c.adoptLease(ctx, clientv3.LeaseID(r.Lease), p.name)
	if err != nil {
		release()
		return nil, err
	}
	cl := &claim{c: c, path: p.name, prefix: p.prefix, key: r.Key, rev: r.Rev, lease: l, own: true, release: release}
	resp, err := c.cli.Get(ctx, r.Key)
	if err != nil {
		release()
		l.markLost()
		return nil, c.convertError(ctx, err, p.name)
	}
	if !cl.ours(resp.Kvs) || string(resp.Kvs[0].Value) != id {
		release()
		l.markLost()
		return nil, topo.NewError(topo.LockLost, p.name)
	}
	cl.clusterID = resp.Header.ClusterId
	c.mu.Lock()
	if c.isClosed() {
		c.mu.Unlock()
		release()
		l.markLost()
		return nil, topo.NewError(topo.Closed, p.name)
	}
	c.leases[l] = struct{}{}
	c.mu.Unlock()
	go c.keepAlive(l)
	p.vals.adopted, p.vals.entry = cl, cl
	return p, nil
}

// isValuesName reports whether a ListDir entry of the elections
// directory is the values directory (never listed).
func isValuesName(name string) bool { return strings.HasPrefix(name, valuesDir) }
