package test_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/test"
)

// A tiny reference of issue 11's Txn, tokens, Done and Term over
// memorytopo, for checking the suite itself while the backends' own
// implementations are pending. It is NOT a backend: every file call of
// every Conn of one store is serialised on one mutex (so a Txn evaluated
// and applied under it is atomic), tokens come from a per-store counter
// taken when a claim is granted, and Done is closed by a goroutine that
// watches the claim.

// refStore is one store of the reference: a memorytopo Factory, and what
// its Conns share.
type refStore struct {
	f   *memorytopo.Factory
	ttl time.Duration
	mu  sync.Mutex   // serialises every file call and Txn
	seq atomic.Int64 // the last token issued
}

func newRefStore(ttl time.Duration) *refStore {
	return &refStore{f: memorytopo.NewFactoryWithOptions(memorytopo.Options{SessionTTL: ttl}), ttl: ttl}
}

func (s *refStore) conn(t *testing.T) *refConn {
	c, err := s.f.NewConn("mem", "/root")
	require.NoError(t, err)
	return &refConn{Conn: c, mem: c, s: s, done: make(chan struct{})}
}

// refConn is a memorytopo Conn with the reference's additions.
type refConn struct {
	topo.Conn
	mem *memorytopo.Conn
	s   *refStore

	closeOnce sync.Once
	done      chan struct{} // closed by Close
	cut       atomic.Pointer[time.Time]
}

func (c *refConn) Close() {
	c.closeOnce.Do(func() { close(c.done) })
	c.Conn.Close()
}

// Cut and Heal partition the Conn, recording when the cut began (a cut
// Conn's claims lapse SessionTTL later).
func (c *refConn) Cut() {
	now := time.Now()
	c.cut.CompareAndSwap(nil, &now)
	c.mem.Partition()
}

func (c *refConn) Heal() {
	c.mem.Heal()
	c.cut.Store(nil)
}

func (c *refConn) Create(ctx context.Context, p string, contents []byte) (topo.Version, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.Conn.Create(ctx, p, contents)
}

func (c *refConn) Update(ctx context.Context, p string, contents []byte, v topo.Version) (topo.Version, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.Conn.Update(ctx, p, contents, v)
}

func (c *refConn) Delete(ctx context.Context, p string, v topo.Version) error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.Conn.Delete(ctx, p, v)
}

func (c *refConn) Get(ctx context.Context, p string) ([]byte, topo.Version, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.Conn.Get(ctx, p)
}

func (c *refConn) List(ctx context.Context, p string) ([]topo.KVInfo, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.Conn.List(ctx, p)
}

// retry repeats call while it fails with an injected Unavailable (the
// reference applies a Txn's ops one by one, so it must not stop half way).
func retry(ctx context.Context, call func() error) error {
	for {
		err := call()
		if !topo.IsErrType(err, topo.Unavailable) || ctx.Err() != nil {
			return err
		}
	}
}

func (c *refConn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	select {
	case <-c.done:
		return nil, topo.NewError(topo.Closed, "")
	default:
	}
	cops, err := backendkit.CheckTxn(ctx, ops)
	if err != nil {
		return nil, err
	}
	claims := make([]refClaim, len(cops))
	for i, op := range cops {
		if op.Kind != topo.TxnIfHeld {
			continue
		}
		if l, ok := backendkit.FenceAs[*refLock](op.Fence); ok {
			claims[i] = l
		} else if tm, ok := backendkit.FenceAs[*refTerm](op.Fence); ok {
			claims[i] = tm
		} else {
			return nil, backendkit.ForeignFence(op, "reference")
		}
	}
	// A first call that may block while the Conn is cut (as memorytopo's
	// calls do), before taking the store's mutex.
	if _, _, err := c.Conn.Get(ctx, "probe"); err != nil && !topo.IsErrType(err, topo.NoNode) {
		return nil, err
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	for i, op := range cops {
		var data []byte
		var v topo.Version
		if op.Kind != topo.TxnIfHeld {
			err := retry(ctx, func() error {
				var err error
				data, v, err = c.Conn.Get(ctx, op.Path)
				return err
			})
			if err != nil && !topo.IsErrType(err, topo.NoNode) {
				return nil, err
			}
		}
		_ = data
		present := v != nil
		want := topo.NumericVersion(op.Version)
		switch op.Kind {
		case topo.TxnIfHeld:
			if !claims[i].held() {
				return nil, backendkit.TxnFailed(op, topo.LockLost)
			}
		case topo.TxnIfAbsent, topo.TxnCreate:
			if present {
				return nil, backendkit.TxnFailed(op, topo.NodeExists)
			}
		case topo.TxnIfPresent:
			if !present {
				return nil, backendkit.TxnFailed(op, topo.NoNode)
			}
		case topo.TxnIfVersion, topo.TxnUpdate, topo.TxnDelete:
			if op.Kind == topo.TxnUpdate && op.Version == backendkit.AnyVersion {
				continue
			}
			if !present {
				return nil, backendkit.TxnFailed(op, topo.NoNode)
			}
			if op.Version != backendkit.AnyVersion && v.String() != want.String() {
				return nil, backendkit.TxnFailed(op, topo.BadVersion)
			}
		}
	}
	vs := make([]topo.Version, len(cops))
	for i, op := range cops {
		var err error
		switch op.Kind {
		case topo.TxnCreate:
			err = retry(ctx, func() error { var err error; vs[i], err = c.Conn.Create(ctx, op.Path, op.Contents); return err })
		case topo.TxnUpdate:
			err = retry(ctx, func() error { var err error; vs[i], err = c.Conn.Update(ctx, op.Path, op.Contents, nil); return err })
		case topo.TxnDelete:
			err = retry(ctx, func() error { return c.Conn.Delete(ctx, op.Path, nil) })
		}
		if err != nil {
			return nil, err
		}
	}
	return vs, nil
}

// refClaim is a lock or a term, for IfHeld.
type refClaim interface{ held() bool }

// grant wraps a memorytopo lock descriptor with a token and a Done.
func (c *refConn) grant(l topo.LockDescriptor, err error) (topo.LockDescriptor, error) {
	if err != nil {
		return nil, err
	}
	rl := &refLock{LockDescriptor: l, c: c, token: c.s.seq.Add(1), done: make(chan struct{})}
	go rl.watch()
	return rl, nil
}

func (c *refConn) Lock(ctx context.Context, dir, contents string) (topo.LockDescriptor, error) {
	return c.grant(c.Conn.Lock(ctx, dir, contents))
}

func (c *refConn) TryLock(ctx context.Context, dir, contents string) (topo.LockDescriptor, error) {
	return c.grant(c.Conn.TryLock(ctx, dir, contents))
}

func (c *refConn) LockWithTTL(ctx context.Context, dir, contents string, ttl time.Duration) (topo.LockDescriptor, error) {
	return c.grant(c.Conn.LockWithTTL(ctx, dir, contents, ttl))
}

func (c *refConn) LockName(ctx context.Context, dir, contents string) (topo.LockDescriptor, error) {
	return c.grant(c.Conn.LockName(ctx, dir, contents))
}

// refLock is a held lock of the reference.
type refLock struct {
	topo.LockDescriptor
	c     *refConn
	token int64
	done  chan struct{}
	once  sync.Once
}

func (l *refLock) Token() int64          { return l.token }
func (l *refLock) Done() <-chan struct{} { return l.done }
func (l *refLock) end()                  { l.once.Do(func() { close(l.done) }) }

func (l *refLock) Unlock(ctx context.Context) error {
	err := l.LockDescriptor.Unlock(ctx)
	l.end()
	return err
}

func (l *refLock) held() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return l.LockDescriptor.Check(ctx) == nil
}

// watch closes Done once the lock is gone: its Check fails, or its Conn
// has been cut off for longer than the session's TTL.
func (l *refLock) watch() {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-l.c.done:
			l.end()
			return
		case <-tick.C:
		}
		if at := l.c.cut.Load(); at != nil {
			if time.Since(*at) > l.c.s.ttl {
				l.end()
				return
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := l.LockDescriptor.Check(ctx)
		cancel()
		if err != nil && !topo.IsErrType(err, topo.Timeout) {
			l.end()
			return
		}
	}
}

func (c *refConn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	p, err := c.Conn.NewLeaderParticipation(name, id)
	if err != nil {
		return nil, err
	}
	return &refParticipation{LeaderParticipation: p, c: c}, nil
}

// refParticipation gives memorytopo's participations terms.
type refParticipation struct {
	topo.LeaderParticipation
	c *refConn

	mu   sync.Mutex
	term *refTerm
}

func (p *refParticipation) WaitForLeadership() (context.Context, error) {
	ctx, err := p.LeaderParticipation.WaitForLeadership()
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.term == nil || p.term.ctx != ctx {
		p.term = &refTerm{ctx: ctx, token: p.c.s.seq.Add(1)}
	}
	return ctx, nil
}

func (p *refParticipation) Term() (topo.Fence, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.term == nil || p.term.ctx.Err() != nil {
		return nil, topo.NewError(topo.NotLeader, "")
	}
	return p.term, nil
}

// refTerm is a leadership term of the reference: its leadership context.
type refTerm struct {
	ctx   context.Context
	token int64
}

func (tm *refTerm) Token() int64          { return tm.token }
func (tm *refTerm) Done() <-chan struct{} { return tm.ctx.Done() }
func (tm *refTerm) held() bool            { return tm.ctx.Err() == nil }
func (tm *refTerm) Check(context.Context) error {
	if tm.ctx.Err() != nil {
		return topo.NewError(topo.LockLost, "")
	}
	return nil
}

// refOptions are the suite's options for reference stores; cur returns
// the store of the subtest in progress and wrap turns a reference Conn
// into the Conn the suite gets.
func refOptions(cur func() *refStore, ttl time.Duration) test.Options {
	return test.Options{
		ExpireSession: func(t *testing.T, conn topo.Conn) {
			rc, ok := conn.(*refConn)
			require.Truef(t, ok, "not a reference Conn: %T", conn)
			rc.mem.ExpireSession()
		},
		Partition: func(t *testing.T) test.Partitioned {
			c := cur().conn(t)
			return test.Partitioned{Conn: c, Cut: c.Cut, Heal: c.Heal}
		},
		SessionBound: ttl,
		FaultyStore: func(t *testing.T) test.FaultyStore {
			fs := newRefStore(ttl)
			return test.FaultyStore{
				Open: func() topo.Conn { return fs.conn(t) },
				Fault: func(t *testing.T) {
					fs.f.AddFault(memorytopo.Fault{Op: memorytopo.OpAny, Err: topo.Unavailable, Times: 20})
					fs.f.BreakWatches(nil)
				},
			}
		},
	}
}

// TestReference runs the suite against the reference.
func TestReference(t *testing.T) {
	const ttl = time.Second
	var cur *refStore
	test.Run(t, func(t *testing.T) func() topo.Conn {
		cur = newRefStore(ttl)
		return func() topo.Conn { return cur.conn(t) }
	}, refOptions(func() *refStore { return cur }, ttl))
}
