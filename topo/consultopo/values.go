package consultopo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// valuesDir is the directory, under an election key, of the leaders'
// published values: elections/<name>/locks/<session id>. No election key
// can ever be there (backendkit.CheckElection refuses names with a locks
// segment), nor a file (the path is reserved), and Vitess reads only the
// election key itself.
const valuesDir = "locks"

// resignGrace bounds a Resign whose ctx has already ended.
const resignGrace = 3 * time.Second

// maxLeaderValue is the largest published value: values travel in a
// transaction beside the election key (see maxTxnValue).
const maxLeaderValue = maxTxnValue

// valueOp is the transaction operation that publishes value at key for
// sess (a lock operation, so that Consul deletes the key when the session
// ends), or, without publish, deletes it.
func valueOp(key string, value []byte, publish bool, sess *session) *api.TxnOp {
	if !publish {
		return &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: key}}
	}
	if value == nil {
		value = []byte{}
	}
	return &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: key, Value: value, Flags: api.LockFlagValue, Session: sess.id}}
}

// checkLeaderValue returns InvalidArgument for a value Campaign or
// Proclaim cannot publish: larger than topo.MaxValueSize, or than the
// 360 KiB a Consul transaction carries beside the election key.
func (p *participation) checkLeaderValue(value []byte) error {
	if err := backendkit.CheckValue(p.path, value); err != nil {
		return err
	}
	if len(value) > maxLeaderValue {
		return backendkit.Wrap(topo.InvalidArgument, p.path, fmt.Errorf("a leader value on Consul is at most %d bytes (it is written in a transaction)", maxLeaderValue))
	}
	return nil
}

// Campaign implements topo.LeaderParticipation.Campaign: WaitForLeadership
// bounded by ctx, whose acquire transaction also writes value at
// elections/<name>/locks/<session id> with the candidate's session, so the
// leader is never seen without it. While leading it proclaims value and
// returns the same context. When ctx ends first the candidacy is withdrawn
// (an acquire in flight is undone in the background) and it returns
// Timeout or Interrupted; Interrupted also after Stop or when Resign
// withdrew it; InvalidArgument for a value above 360 KiB (Consul's
// transaction limit; topo.MaxValueSize is larger); otherwise the errors of
// WaitForLeadership.
func (p *participation) Campaign(ctx context.Context, value []byte) (context.Context, error) {
	if err := backendkit.CheckContext(ctx, p.path); err != nil {
		return nil, err
	}
	if err := p.checkLeaderValue(value); err != nil {
		return nil, err
	}
	if err := p.c.begin(ctx, p.path); err != nil {
		return nil, err
	}
	return p.campaign(ctx, value, true)
}

// Proclaim implements topo.LeaderParticipation.Proclaim with one Consul
// transaction: a check-index of the election key on the term's token
// (which fails once the key was deleted, released, taken over or its
// session ended) and a lock operation writing value at the leader's value
// key with the term's session. It returns NotLeader when this participant
// has no live term or the store refused the check (the term is then
// ended), InvalidArgument for a value above 360 KiB, Timeout/Interrupted
// when ctx ends, Closed after Close, and Unavailable or PermissionDenied
// when the request failed (then the value may or may not be written).
func (p *participation) Proclaim(ctx context.Context, value []byte) error {
	if err := backendkit.CheckContext(ctx, p.path); err != nil {
		return err
	}
	if err := p.checkLeaderValue(value); err != nil {
		return err
	}
	if err := p.c.begin(ctx, p.path); err != nil {
		return err
	}
	t := p.cur.Load()
	if t == nil {
		return topo.NewError(topo.NotLeader, p.path)
	}
	return p.proclaim(ctx, t, value)
}

// proclaim publishes value for term t, guarded in the store on its token.
func (p *participation) proclaim(ctx context.Context, t *term, value []byte) error {
	if t.ctx.Err() != nil || !t.held.sess.alive() {
		return backendkit.Wrap(topo.NotLeader, p.path, errors.New("the leadership term ended"))
	}
	rctx, cancel := p.c.callCtx(ctx)
	defer cancel()
	ok, resp, err := p.c.txn(rctx, api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: t.key, Index: t.held.token}},
		valueOp(t.valueKey, value, true, t.held.sess),
	})
	switch {
	case err != nil:
		return p.c.convertError(ctx, err, p.path)
	case !ok:
		if resp != nil && len(resp.Errors) > 0 && resp.Errors[0].OpIndex == 0 {
			// The election key is no longer the term's acquire.
			t.cancel()
		}
		return backendkit.Wrap(topo.NotLeader, p.path, txnError(resp))
	}
	return nil
}

// Resign implements topo.LeaderParticipation.Resign: it withdraws a
// WaitForLeadership or Campaign in progress (which returns Interrupted),
// cancels the leadership context, and deletes the election key and the
// value key in one transaction checking the term's token. With a ctx that
// has ended, the delete is still attempted for a grace of 3 s. It returns
// nil once the keys are deleted or when there is nothing to resign, ctx's
// Timeout/Interrupted when the delete did not finish in time, and
// Unavailable or PermissionDenied when it failed (the leadership context
// is cancelled in every case; the key then stays until the session ends).
// The participation may Campaign again. After the Conn's Close (which
// destroyed the session, ending the candidacy) it returns Closed, once the
// participant's own state is cleared.
func (p *participation) Resign(ctx context.Context) error {
	err := p.resign(ctx)
	if p.c.isClosed() {
		return topo.NewError(topo.Closed, p.path)
	}
	return err
}

// resign is Resign but for Closed.
func (p *participation) resign(ctx context.Context) error {
	p.amu.Lock()
	if p.attempt != nil {
		p.attempt(errResigned)
	}
	p.amu.Unlock()
	p.sem <- struct{}{}
	defer p.unlock()
	if p.term == nil {
		return nil
	}
	var rctx context.Context
	var cancel context.CancelFunc
	if ctx.Err() != nil {
		rctx, cancel = context.WithTimeout(context.Background(), resignGrace)
	} else {
		rctx, cancel = context.WithTimeout(ctx, requestTimeout)
	}
	defer cancel()
	err := p.endTerm(rctx)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return backendkit.FromContext(ctx, p.path)
	case rctx.Err() != nil:
		return backendkit.FromContext(rctx, p.path)
	}
	return p.c.convertError(ctx, err, p.path)
}

// leaderOf returns the leader that pairs (a consistent list of the prefix
// elections/<name>, one Raft index) show: the election key's value as id
// and its ModifyIndex as token while a session holds it, with the value
// key of that session if the same session holds it. Leader{} when no
// session holds the key.
func (p *participation) leaderOf(pairs api.KVPairs) topo.Leader {
	var lead *api.KVPair
	for _, kv := range pairs {
		if kv.Key == p.key {
			lead = kv
			break
		}
	}
	if lead == nil || lead.Session == "" {
		return topo.Leader{}
	}
	l := topo.Leader{ID: string(lead.Value), Token: int64(lead.ModifyIndex)}
	vk := p.valueKeyFor(lead.Session)
	for _, kv := range pairs {
		if kv.Key == vk && kv.Session == lead.Session {
			l.Value = append([]byte{}, kv.Value...)
			break
		}
	}
	return l
}

// Leader implements topo.LeaderParticipation.Leader with one consistent
// list of the prefix elections/<name> (the election key and the value keys
// beside it, read at one Raft index): the id is the election key's value,
// the token its ModifyIndex (the term's Term().Token()), the value the one
// the leader's session holds (nil when it published none: a
// WaitForLeadership or Vitess leader). It returns NoLeader when no session
// holds the key, Timeout/Interrupted when ctx ends, Closed after Close,
// Unavailable or PermissionDenied when the read fails.
func (p *participation) Leader(ctx context.Context) (topo.Leader, error) {
	if err := p.c.begin(ctx, p.path); err != nil {
		return topo.Leader{}, err
	}
	pairs, _, err := p.c.kv.List(p.key, p.c.consistentOptions(ctx))
	if err != nil {
		return topo.Leader{}, p.c.convertError(ctx, err, p.path)
	}
	l := p.leaderOf(pairs)
	if l.ID == "" && l.Token == 0 {
		return topo.Leader{}, topo.NewError(topo.NoLeader, p.path)
	}
	return l, nil
}

// startObserve checks the call, reads the current leader consistently and
// returns the context the observation runs under (ctx merged with the
// Conn's), its cancel, the leader, and the index to block on.
func (p *participation) startObserve(ctx context.Context) (context.Context, context.CancelFunc, topo.Leader, uint64, error) {
	if err := p.c.begin(ctx, p.path); err != nil {
		return nil, nil, topo.Leader{}, 0, err
	}
	wctx, cancel := p.c.callCtx(ctx)
	pairs, meta, err := p.c.kv.List(p.key, p.c.consistentOptions(wctx))
	if err != nil {
		cancel()
		return nil, nil, topo.Leader{}, 0, p.c.convertError(ctx, err, p.path)
	}
	return wctx, cancel, p.leaderOf(pairs), nextIndex(0, meta.LastIndex), nil
}

// observeLoop follows the election with consistent blocking queries on the
// prefix elections/<name> from index, and calls emit with every state that
// differs from the last one (first is the state already reported), until
// ctx ends, emit returns false, or the ACL refuses the query. Failed
// queries (the agent unreachable or restarting) are retried with a
// backoff; an index that went backwards (a restarted agent) makes the next
// query read afresh, so the state after a reconnect is always re-read.
// Every state comes from one consistent read, so a resigned or expired
// leader, once its key is gone from the store, is never emitted again.
func (p *participation) observeLoop(ctx context.Context, first topo.Leader, index uint64, emit func(topo.Leader) bool) {
	last := first
	retry := 50 * time.Millisecond
	for {
		pairs, meta, err := p.c.kv.List(p.key, p.c.consistentBlocking(ctx, index))
		if ctx.Err() != nil || isPermanent(err) {
			return
		}
		if err != nil {
			if !sleepCtx(ctx, retry) {
				return
			}
			retry = min(2*retry, watchRetryMax)
			continue
		}
		retry = 50 * time.Millisecond
		index = nextIndex(index, meta.LastIndex)
		l := p.leaderOf(pairs)
		if l.ID == last.ID && l.Token == last.Token && string(l.Value) == string(last.Value) && (l.Value == nil) == (last.Value == nil) {
			continue
		}
		last = l
		if !emit(l) {
			return
		}
	}
}

// Observe implements topo.LeaderParticipation.Observe with consistent
// blocking queries on the prefix elections/<name> (each waiting up to
// Options.WatchPollDuration; a write under another election whose name
// starts with this one's wakes it too, and changes nothing it sends). The
// leader current at the call is read before it returns and sent first
// (Leader{} when nobody leads). The channel holds one state: when the
// reader is slower than the changes, a pending state is replaced by the
// newer one, so the last state sent is always the current one. It closes
// when ctx ends, the Conn closes or on an ACL refusal; store errors are
// retried (the state is re-read after a reconnect). It returns
// Timeout/Interrupted when ctx already ended, Closed after Close, and
// Unavailable or PermissionDenied when the first read fails.
func (p *participation) Observe(ctx context.Context) (<-chan topo.Leader, error) {
	wctx, cancel, first, index, err := p.startObserve(ctx)
	if err != nil {
		return nil, err
	}
	ch := make(chan topo.Leader, 1)
	ch <- first
	go func() {
		defer close(ch)
		defer cancel()
		p.observeLoop(wctx, first, index, func(l topo.Leader) bool {
			select {
			case ch <- l:
				return true
			default:
			}
			// The reader has not taken the pending state: replace it.
			select {
			case <-ch:
			default:
			}
			ch <- l
			return true
		})
	}()
	return ch, nil
}

// resumeInfo is what ResumeInfo returns, as JSON.
type resumeInfo struct {
	Backend   string `json:"backend"`
	Key       string `json:"key"` // the election key, with the root
	ID        string `json:"id"`
	Session   string `json:"session"`
	TTL       string `json:"ttl"`
	Token     uint64 `json:"token"`      // the election key's ModifyIndex
	LockIndex uint64 `json:"lock_index"` // and its LockIndex
}

// ResumeInfo implements topo.LeaderParticipation.ResumeInfo: JSON naming
// the backend, the election key, the id, the session id and TTL, and the
// term's token and LockIndex. On Consul only the leader has an entry (a
// waiting candidate blocks on the key, in no queue), so it returns NoNode
// unless this participant leads; Closed after the Conn's Close.
func (p *participation) ResumeInfo() ([]byte, error) {
	if p.c.isClosed() {
		return nil, topo.NewError(topo.Closed, p.path)
	}
	t := p.cur.Load()
	if t == nil || t.ctx.Err() != nil {
		return nil, backendkit.Wrap(topo.NoNode, p.path, errors.New("the participant does not lead: on Consul only the leader has an entry"))
	}
	return json.Marshal(resumeInfo{Backend: FactoryName, Key: t.key, ID: p.id, Session: t.held.sess.id,
		TTL: t.held.sess.ttl.String(), Token: t.held.token, LockIndex: t.held.lockIndex})
}

// ResumeLeaderParticipation implements topo.Conn.ResumeLeaderParticipation:
// from info (ResumeInfo's JSON) it renews the session, checks with a
// consistent read that the election key is still held by that session with
// the term's ModifyIndex and LockIndex, and returns a participation that
// leads at once with the same term and token. The Conn then renews the
// session (it is not bound to a connection), and Stop or Resign delete the
// election and value keys and destroy the session, which also releases
// whatever else the earlier process held on it. The earlier process must
// be gone: if it comes back it renews the same session and believes it
// still leads. It returns InvalidArgument for info that is malformed or
// names another backend, election (or root) or id, LockLost when the
// session has ended or no longer holds the key with that term, NodeExists
// when another participation of this Conn is campaigning in the
// election, Timeout/Interrupted when ctx ends, Closed after Close, and
// Unavailable or PermissionDenied when a request fails.
func (c *Conn) ResumeLeaderParticipation(ctx context.Context, name, id string, info []byte) (topo.LeaderParticipation, error) {
	if err := backendkit.CheckContext(ctx, name); err != nil {
		return nil, err
	}
	n, err := backendkit.CheckElection(name, id)
	if err != nil {
		return nil, err
	}
	p := c.newParticipation(n, id)
	var ri resumeInfo
	if err := json.Unmarshal(info, &ri); err != nil {
		return nil, backendkit.Wrap(topo.InvalidArgument, p.path, fmt.Errorf("malformed resume info: %w", err))
	}
	ttl, terr := time.ParseDuration(ri.TTL)
	switch {
	case ri.Backend != FactoryName:
		return nil, backendkit.Wrap(topo.InvalidArgument, p.path, fmt.Errorf("resume info of backend %q", ri.Backend))
	case ri.Key != p.key:
		return nil, backendkit.Wrap(topo.InvalidArgument, p.path, fmt.Errorf("resume info of another election (key %q)", ri.Key))
	case ri.ID != id:
		return nil, backendkit.Wrap(topo.InvalidArgument, p.path, fmt.Errorf("resume info of another participant id (%q)", ri.ID))
	case ri.Session == "" || ri.Token == 0 || terr != nil || ttl < time.Second:
		return nil, backendkit.Wrap(topo.InvalidArgument, p.path, errors.New("malformed resume info"))
	}
	if err := c.begin(ctx, p.path); err != nil {
		return nil, err
	}
	cl, err := c.claimKey(ctx, p.path, p.key, true)
	if err != nil {
		return nil, err
	}
	sess, err := c.adoptSession(ctx, p.path, ri.Session, ttl)
	if err != nil {
		c.releaseClaim(cl)
		return nil, err
	}
	h := held{cl: cl, sess: sess, lockIndex: ri.LockIndex, token: ri.Token}
	if ok, why, err := c.readHeld(ctx, p.path, p.key, h); err != nil || !ok {
		c.releaseClaim(cl)
		c.forgetSession(sess, nil) // not destroyed: it may hold other keys of the earlier process
		if err != nil {
			return nil, err
		}
		return nil, backendkit.Wrap(topo.LockLost, p.path, errors.New(why))
	}
	cl.sess.Store(sess)
	p.sem <- struct{}{}
	p.startTerm(h)
	p.unlock()
	return p, nil
}

// adoptSession renews the existing session id (another Conn's, typically
// of a process that restarted) and makes this Conn renew it from now on,
// as a session of its own (own: destroyed when the participation that
// adopted it ends). It returns LockLost when Consul no longer knows the
// session.
func (c *Conn) adoptSession(ctx context.Context, path, id string, ttl time.Duration) (*session, error) {
	sent := time.Now()
	entry, _, err := c.client.Session().Renew(id, c.writeOptions(ctx))
	switch {
	case err != nil && strings.Contains(err.Error(), "404"):
		return nil, backendkit.Wrap(topo.LockLost, path, errSessionGone)
	case err != nil:
		return nil, c.convertError(ctx, err, path)
	case entry == nil:
		return nil, backendkit.Wrap(topo.LockLost, path, errSessionGone)
	}
	if d, err := time.ParseDuration(entry.TTL); err == nil && d >= time.Second {
		ttl = d
	} else if s, err := strconv.Atoi(strings.TrimSuffix(entry.TTL, "s")); err == nil && s > 0 {
		ttl = time.Duration(s) * time.Second
	}
	s := c.newSessionState(id, ttl, true, sent.Add(ttl))
	s.mu.Lock()
	s.timer = time.AfterFunc(time.Until(s.deadline), s.expire)
	s.mu.Unlock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		s.markLost(errSessionClosed)
		return nil, topo.NewError(topo.Closed, path)
	}
	c.sessions[s] = struct{}{}
	c.wg.Add(1)
	c.mu.Unlock()
	go c.renew(s)
	return s, nil
}
