package etcd2topo

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
)

// NewLeaderParticipation joins the leader election name as id. Candidates
// are keys under <root>/elections/<name>/, attached to the Conn's shared
// lease and valued with the participant id; the one with the lowest
// CreateRevision leads. It returns InvalidArgument for an empty name or
// id, InvalidPath for a malformed name, Closed after Close. Nothing is
// written until WaitForLeadership.
func (c *Conn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	n, err := topo.CheckElection(name, id)
	if err != nil {
		return nil, err
	}
	if err := c.closedErr(n); err != nil {
		return nil, err
	}
	stopCtx, stop := context.WithCancel(c.ctx)
	return &participation{
		c:       c,
		name:    n,
		id:      id,
		prefix:  c.key(electionsDir + "/" + n + "/"),
		stopCtx: stopCtx,
		stop:    stop,
	}, nil
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
	key      string // our candidate key while we lead
	rev      int64
	release  func() // frees key's name, see takeKey
	leading  context.Context
	resign   context.CancelFunc
}

// WaitForLeadership adds this participant's key to the election and
// waits until every older key is gone, then returns a context cancelled
// when leadership ends: Stop, deletion of the key (for example by the
// lease's expiry or revocation), loss of the lease, or the Conn's Close.
// The wait watches the election from the current revision, so a follower
// takes over as soon as the leader's key is deleted. Called again while
// leading it returns the same context; after losing leadership it runs
// again. It returns Interrupted after Stop, Closed after Close.
func (p *participation) WaitForLeadership() (context.Context, error) {
	p.campaign.Lock()
	defer p.campaign.Unlock()
	if p.stopCtx.Err() != nil {
		if p.c.isClosed() {
			return nil, topo.NewError(topo.Closed, p.name)
		}
		return nil, topo.NewError(topo.Interrupted, p.name)
	}
	if p.leading != nil && p.leading.Err() == nil {
		return p.leading, nil
	}
	ctx := p.stopCtx
	if p.key != "" {
		// Leadership was lost: the old key is gone or going; make sure,
		// and free its name.
		p.removeKey(p.key, p.rev, p.release)
		p.key, p.rev = "", 0
	}
	var (
		l       *lease
		key     string
		release func()
		resp    *clientv3.TxnResponse
	)
	for attempt := 0; ; attempt++ {
		var err error
		if l, err = p.c.sharedLease(ctx, p.name); err != nil {
			return nil, p.stoppedErr(err)
		}
		key, release = p.c.takeKey(p.prefix, l)
		resp, err = p.c.cli.Txn(ctx).Then(
			clientv3.OpPut(key, p.id, clientv3.WithLease(l.id)),
			clientv3.OpGet(p.prefix, clientv3.WithFirstCreate()...),
		).Commit()
		if err == nil {
			break
		}
		if errors.Is(err, rpctypes.ErrLeaseNotFound) && attempt == 0 {
			// The shared lease went away before its keepalive noticed.
			release()
			p.c.dropLease(l)
			continue
		}
		// The put may have been applied (a timeout leaves that unknown).
		p.removeKey(key, 0, release)
		return nil, p.stoppedErr(p.c.convertError(ctx, err, p.name))
	}
	rev := resp.Header.Revision
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 0 || string(kvs[0].Key) != key {
		if err := p.c.waitOlderGone(ctx, p.prefix, key, rev, p.name); err != nil {
			p.removeKey(key, rev, release)
			return nil, p.stoppedErr(err)
		}
	}
	leading, resign := context.WithCancel(context.Background())
	p.key, p.rev, p.release, p.leading, p.resign = key, rev, release, leading, resign
	go p.monitor(leading, resign, l, key, rev)
	return leading, nil
}

// stoppedErr turns the error of a wait ended by Stop into Interrupted and
// one ended by Close into Closed.
func (p *participation) stoppedErr(err error) error {
	if p.c.isClosed() {
		return topo.Wrap(topo.Closed, p.name, err)
	}
	if p.stopCtx.Err() != nil {
		return topo.Wrap(topo.Interrupted, p.name, err)
	}
	return err
}

// monitor cancels the leadership context when the lease is lost or the
// candidate key is deleted.
func (p *participation) monitor(leading context.Context, resign context.CancelFunc, l *lease, key string, rev int64) {
	defer resign()
	go func() {
		select {
		case <-l.done:
			resign()
		case <-leading.Done():
		}
	}()
	backoff := 20 * time.Millisecond
	for leading.Err() == nil {
		s, err := p.c.newStream(leading, key, false, p.name)
		if err != nil {
			// etcd refused the watch (no leader?): try again after a pause.
			select {
			case <-time.After(backoff):
			case <-leading.Done():
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		if !p.watchKey(s, leading, key, rev) {
			return
		}
	}
}

// watchKey follows key through s until it is deleted (false) or must be
// watched anew (true).
func (p *participation) watchKey(s *stream, leading context.Context, key string, rev int64) bool {
	defer s.close()
	get := func() (*clientv3.GetResponse, error) { return p.c.cli.Get(leading, key, clientv3.WithKeysOnly()) }
	resp, err := s.read(get)
	if err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != rev {
		return false
	}
	s.rev = resp.Header.Revision
	for {
		evs, err := s.next()
		if errors.Is(err, errCompacted) {
			resp, err := s.read(get)
			if err != nil || len(resp.Kvs) == 0 {
				return false
			}
			s.reopen(resp.Header.Revision)
			continue
		}
		if err != nil {
			return false
		}
		for _, ev := range evs {
			if ev.Type == mvccpb.DELETE {
				return false
			}
		}
	}
}

// removeKey deletes our candidate key if it is still the one we created.
func (p *participation) removeKey(key string, rev int64, release func()) {
	// After Close there is nothing to remove: Close revoked the lease.
	p.c.deleteKey(key, rev, release)
}

// Stop withdraws from the election: it ends a pending WaitForLeadership
// (which returns Interrupted), deletes the candidate key, handing
// leadership to the next candidate, and cancels the leadership context.
// It returns once the key is deleted, or after 2 s if etcd cannot be
// reached (the deletion is then retried in the background while the Conn
// is open). It is idempotent.
func (p *participation) Stop() {
	p.stop()
	p.campaign.Lock()
	defer p.campaign.Unlock()
	if p.key != "" {
		p.removeKey(p.key, p.rev, p.release)
		p.key, p.rev = "", 0
	}
	if p.resign != nil {
		p.resign()
	}
}

// GetCurrentLeaderID returns the value of the oldest candidate key (one
// read), or "" when there is none.
func (p *participation) GetCurrentLeaderID(ctx context.Context) (string, error) {
	if err := p.c.check(ctx, p.name); err != nil {
		return "", err
	}
	resp, err := p.c.cli.Get(ctx, p.prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return "", p.c.convertError(ctx, err, p.name)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

// WaitForNewLeader returns a channel that receives the current leader's id
// (if any) and then the id of each new leader (each time the oldest
// candidate key changes), from a watch on the election. The channel closes
// when ctx ends or the Conn closes.
func (p *participation) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	if err := p.c.check(ctx, p.name); err != nil {
		return nil, err
	}
	s, err := p.c.newStream(ctx, p.prefix, true, p.name)
	if err != nil {
		return nil, err
	}
	get := func() (*clientv3.GetResponse, error) { return p.c.cli.Get(ctx, p.prefix, clientv3.WithPrefix()) }
	resp, err := get()
	if err != nil {
		s.close()
		return nil, p.c.convertError(ctx, err, p.name)
	}
	s.rev = resp.Header.Revision
	type candidate struct {
		rev int64
		id  string
	}
	cands := map[string]candidate{}
	load := func(kvs []*mvccpb.KeyValue) {
		clear(cands)
		for _, kv := range kvs {
			cands[string(kv.Key)] = candidate{kv.CreateRevision, string(kv.Value)}
		}
	}
	leader := func() (string, candidate) {
		var key string
		var best candidate
		for k, c := range cands {
			if key == "" || c.rev < best.rev {
				key, best = k, c
			}
		}
		return key, best
	}
	load(resp.Kvs)
	out := make(chan string, watchBuffer)
	go func() {
		defer close(out)
		defer s.close()
		lastKey := ""
		for {
			if key, c := leader(); key != "" && key != lastKey {
				lastKey = key
				select {
				case out <- c.id:
				case <-ctx.Done():
					return
				case <-p.c.ctx.Done():
					return
				}
			}
			evs, err := s.next()
			if errors.Is(err, errCompacted) {
				resp, err := s.read(get)
				if err != nil {
					return
				}
				load(resp.Kvs)
				s.reopen(resp.Header.Revision)
				continue
			}
			if err != nil {
				return
			}
			for _, ev := range evs {
				if ev.Type == mvccpb.DELETE {
					delete(cands, string(ev.Kv.Key))
				} else {
					cands[string(ev.Kv.Key)] = candidate{ev.Kv.CreateRevision, string(ev.Kv.Value)}
				}
			}
		}
	}()
	return out, nil
}
