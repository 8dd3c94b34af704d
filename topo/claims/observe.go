package claims

import (
	"context"
	"slices"
	"time"

	"github.com/topokit/topokit/topo"
)

// observeRetry is how long Observe waits before it reads again after a
// failed read (the store unreachable; a driver may also block its Head
// until the link is back).
const observeRetry = 100 * time.Millisecond

// Leader implements topo.LeaderParticipation: the id, value and token of
// the head of the queue, read in one request (Driver.Head); NoLeader when
// the queue is empty.
func (p *participation) Leader(ctx context.Context) (topo.Leader, error) {
	if err := p.check(ctx, CallLeader); err != nil {
		return topo.Leader{}, err
	}
	h, ok, _, err := p.e.d.Head(ctx, p.q, false)
	if err != nil {
		return topo.Leader{}, p.e.d.MapError(ctx, err, p.q.Path)
	}
	if !ok {
		return topo.Leader{}, topo.NewError(topo.NoLeader, p.q.Path)
	}
	return leaderOf(h), nil
}

// GetCurrentLeaderID implements topo.LeaderParticipation: the id of the
// head of the queue, "" when there is none.
func (p *participation) GetCurrentLeaderID(ctx context.Context) (string, error) {
	if err := p.check(ctx, CallGetCurrentLeaderID); err != nil {
		return "", err
	}
	h, _, _, err := p.e.d.Head(ctx, p.q, false)
	if err != nil {
		return "", p.e.d.MapError(ctx, err, p.q.Path)
	}
	return h.Contents, nil
}

// check is the prologue of a read of c (Engine.prologue), then Closed
// once the engine is closed: a closed Conn's store client may take seconds
// to fail a request (etcd's retries it), and the answer is Closed anyway.
func (p *participation) check(ctx context.Context, c Call) error {
	if err := p.e.prologue(ctx, c, p.q.Path); err != nil {
		return err
	}
	return p.e.closedErr(p.q.Path)
}

func leaderOf(h Entry) topo.Leader {
	return topo.Leader{ID: h.Contents, Value: slices.Clone(h.Value), Token: h.Token}
}

// leaderState is what Observe compares: the head's token and value
// revision.
type leaderState struct{ token, valueRev int64 }

// Observe implements topo.LeaderParticipation: the leader current at the
// time of the call first (read before it returns; Leader{} when nobody
// leads), then after every change the driver signals, the leader again if
// its term or its value changed. Each event is read in one request, so the
// last one sent is the current state and an ended term is never sent as
// current. A failed read is retried (the channel stays open); the channel
// closes when ctx ends or the engine closes.
func (p *participation) Observe(ctx context.Context) (<-chan topo.Leader, error) {
	if err := p.check(ctx, CallObserve); err != nil {
		return nil, err
	}
	return p.observe(ctx)
}

// observe is Observe once its call is checked.
func (p *participation) observe(ctx context.Context) (<-chan topo.Leader, error) {
	if err := p.e.closedErr(p.q.Path); err != nil {
		return nil, err
	}
	h, ok, changed, err := p.e.d.Head(ctx, p.q, true)
	if err != nil {
		return nil, p.e.d.MapError(ctx, err, p.q.Path)
	}
	ch := make(chan topo.Leader, 1)
	go func() {
		defer close(ch)
		last := leaderState{token: -1}
		for {
			cur, st := topo.Leader{}, leaderState{}
			if ok {
				cur, st = leaderOf(h), leaderState{h.Token, h.ValueRev}
			}
			if st != last {
				last = st
				select {
				case ch <- cur:
				case <-ctx.Done():
					return
				case <-p.e.closing:
					return
				}
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			case <-p.e.closing:
				return
			}
			for {
				// A change and the end may come together, and select
				// picks either: after the end, nothing is read.
				if ctx.Err() != nil || p.e.closed.Load() {
					return
				}
				h, ok, changed, err = p.e.d.Head(ctx, p.q, true)
				if err == nil {
					break
				}
				t := time.NewTimer(observeRetry)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return
				case <-p.e.closing:
					t.Stop()
					return
				}
			}
		}
	}()
	return ch, nil
}

// WaitForNewLeader implements topo.LeaderParticipation as a view of
// Observe: the id of every new term, the leader current at the time of the
// call first. A participant re-elected in a new term is sent again (its
// token changed); a Proclaim (same term) and "nobody leads" are not sent.
func (p *participation) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	if err := p.check(ctx, CallWaitForNewLeader); err != nil {
		return nil, err
	}
	leaders, err := p.observe(ctx)
	if err != nil {
		return nil, err
	}
	ch := make(chan string, 1)
	go func() {
		defer close(ch)
		var last int64
		for l := range leaders {
			if l.ID == "" || l.Token == last {
				continue
			}
			last = l.Token
			select {
			case ch <- l.ID:
			case <-ctx.Done():
				for range leaders { // Observe closes soon: ctx ended
				}
				return
			case <-p.e.closing:
				for range leaders { // Observe closes soon: the engine closed
				}
				return
			}
		}
	}()
	return ch, nil
}
