package election

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/topokit/topokit/topo"
)

// FakeConn implements only NewLeaderParticipation, over a FakeStore shared
// by every FakeConn of the store. Each FakeConn stands for one session.
type FakeConn struct {
	topo.Conn // nil: any other method panics
	store     *FakeStore
}

// Conn returns a new connection (session) to the store.
func (f *FakeStore) Conn() *FakeConn { return &FakeConn{store: f} }

// FakeStore holds in-process queues of candidates per election name (the
// oldest leads). It lets the tests inject failures that no real store
// produces on demand.
type FakeStore struct {
	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every queue change
	queues   map[string][]*fakeLP
	failures int // the next failures WaitForLeadership calls fail with failErr
	failErr  error
	terms    int64 // the last term's token
}

// NewFakeStore returns an empty fake store.
func NewFakeStore() *FakeStore {
	return &FakeStore{changed: make(chan struct{}), queues: map[string][]*fakeLP{}}
}

func (f *FakeStore) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// NewLeaderParticipation implements topo.Conn.
func (f *FakeConn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	if name == "" || id == "" {
		return nil, topo.NewError(topo.InvalidArgument, name)
	}
	return &fakeLP{conn: f.store, session: f, name: name, id: id, stop: make(chan struct{})}, nil
}

// FailNext makes the next n WaitForLeadership calls fail with err.
func (f *FakeStore) FailNext(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures, f.failErr = n, err
}

// ExpireSession drops every entry of this session, as a store would when
// the session expires.
func (c *FakeConn) ExpireSession() {
	f := c.store
	f.mu.Lock()
	defer f.mu.Unlock()
	for name, q := range f.queues {
		kept := q[:0:0]
		for _, lp := range q {
			if lp.session != c {
				kept = append(kept, lp)
				continue
			}
			if lp.cancel != nil {
				lp.cancel()
			}
		}
		f.queues[name] = kept
	}
	f.notifyLocked()
}

// Partition models a client cut off from the store: the session's
// leaders step down at once (as a real backend's safety margin makes them
// do before the store can expire the session), and the store drops the
// session's entries bound later (its session timeout), handing leadership
// on.
func (c *FakeConn) Partition(bound time.Duration) {
	f := c.store
	f.mu.Lock()
	for _, q := range f.queues {
		for _, lp := range q {
			if lp.session == c && lp.cancel != nil {
				lp.cancel()
			}
		}
	}
	f.mu.Unlock()
	time.AfterFunc(bound, c.ExpireSession)
}

// Candidates returns the number of entries queued for name.
func (f *FakeStore) Candidates(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queues[name])
}

// Term returns the current term: a fence over the leadership context,
// with a token from the store's counter.
func (lp *fakeLP) Term() (topo.Fence, error) {
	f := lp.conn
	f.mu.Lock()
	defer f.mu.Unlock()
	if lp.term == nil || lp.term.ctx.Err() != nil {
		return nil, topo.NewError(topo.NotLeader, lp.name)
	}
	return lp.term, nil
}

// fakeTerm is a fakeLP's leadership term.
type fakeTerm struct {
	token int64
	ctx   context.Context
}

func (t *fakeTerm) Token() int64          { return t.token }
func (t *fakeTerm) Done() <-chan struct{} { return t.ctx.Done() }
func (t *fakeTerm) Check(context.Context) error {
	if t.ctx.Err() != nil {
		return topo.NewError(topo.LockLost, "")
	}
	return nil
}

// The value API is not used by the election package's unit tests.
func (p *fakeLP) Campaign(context.Context, []byte) (context.Context, error) {
	return nil, topo.NewError(topo.NoImplementation, "")
}
func (p *fakeLP) Proclaim(context.Context, []byte) error {
	return topo.NewError(topo.NoImplementation, "")
}
func (p *fakeLP) Resign(context.Context) error { return topo.NewError(topo.NoImplementation, "") }
func (p *fakeLP) Leader(context.Context) (topo.Leader, error) {
	return topo.Leader{}, topo.NewError(topo.NoImplementation, "")
}
func (p *fakeLP) Observe(context.Context) (<-chan topo.Leader, error) {
	return nil, topo.NewError(topo.NoImplementation, "")
}
func (p *fakeLP) ResumeInfo() ([]byte, error) { return nil, topo.NewError(topo.NoImplementation, "") }

type fakeLP struct {
	conn     *FakeStore
	session  *FakeConn
	name, id string
	stop     chan struct{}
	stopOnce sync.Once

	cancel context.CancelFunc // guarded by conn.mu
	term   *fakeTerm          // guarded by conn.mu
}

func (lp *fakeLP) WaitForLeadership() (context.Context, error) {
	f := lp.conn
	f.mu.Lock()
	if f.failures > 0 {
		f.failures--
		f.mu.Unlock()
		return nil, f.failErr
	}
	select {
	case <-lp.stop:
		f.mu.Unlock()
		return nil, topo.NewError(topo.Interrupted, lp.name)
	default:
	}
	f.queues[lp.name] = append(f.queues[lp.name], lp)
	f.notifyLocked()
	for {
		q := f.queues[lp.name]
		if len(q) > 0 && q[0] == lp {
			ctx, cancel := context.WithCancel(context.Background())
			lp.cancel = cancel
			f.terms++
			lp.term = &fakeTerm{token: f.terms, ctx: ctx}
			f.mu.Unlock()
			return ctx, nil
		}
		if !slices.Contains(q, lp) {
			if isStopped(lp.stop) {
				f.mu.Unlock()
				return nil, topo.NewError(topo.Interrupted, lp.name)
			}
			f.mu.Unlock()
			return nil, topo.NewError(topo.LockLost, lp.name)
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-lp.stop:
			return nil, topo.NewError(topo.Interrupted, lp.name)
		}
		f.mu.Lock()
	}
}

func (lp *fakeLP) Stop() {
	lp.stopOnce.Do(func() {
		close(lp.stop)
		f := lp.conn
		f.mu.Lock()
		defer f.mu.Unlock()
		q := f.queues[lp.name]
		for i, e := range q {
			if e == lp {
				f.queues[lp.name] = append(q[:i:i], q[i+1:]...)
				f.notifyLocked()
				break
			}
		}
		if lp.cancel != nil {
			lp.cancel()
		}
	})
}

func (lp *fakeLP) GetCurrentLeaderID(ctx context.Context) (string, error) {
	f := lp.conn
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.queues[lp.name]; len(q) > 0 {
		return q[0].id, nil
	}
	return "", nil
}

func (lp *fakeLP) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	ch := make(chan string)
	close(ch)
	return ch, nil
}

func isStopped(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
