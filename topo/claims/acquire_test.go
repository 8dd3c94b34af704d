package claims_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/claims"
)

// acquirer is the fake driver with the optional Acquirer and Monitor
// steps: Acquire grants the head with a token of its own (as Consul's
// store key does), and Monitor records which claims it watches.
type acquirer struct {
	*driver
	mu       sync.Mutex
	acquired []claims.Entry
	watched  []claims.Entry
	gone     bool // Held reports every entry taken away
}

func (a *acquirer) Acquire(ctx context.Context, q claims.Queue, s *claims.Session, e claims.Entry) (claims.Entry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acquired = append(a.acquired, e)
	g := e
	g.Token, g.Granted = 1000+e.Token, true
	return g, nil
}

func (a *acquirer) Monitor(q claims.Queue, s *claims.Session, e claims.Entry, done <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.watched = append(a.watched, e)
}

// TestAcquireStepGrantsAndMonitors: with a driver implementing Acquirer,
// the head of a queue is granted only through Acquire, and the claim then
// carries the entry Acquire returned (its token); Monitor starts for a
// lock on the first Done and for a term at once; Held, Delete and the
// guard get the granted entry; a claim granted at Create (Granted) needs
// neither a List nor an Acquire.
func TestAcquireStepGrantsAndMonitors(t *testing.T) {
	s := newStore()
	ctx := t.Context()
	a := &acquirer{driver: &driver{s: s}}
	e := claims.New(a, claims.Options{})
	l, err := e.LockName(ctx, "d", "x")
	require.NoError(t, err)
	require.Len(t, a.acquired, 1)
	require.Equal(t, 1000+a.acquired[0].Token, l.Token(), "the token is the granted entry's")
	g, ok := claims.FenceGuard(l)
	require.True(t, ok)
	require.True(t, g.Entry().Granted)
	require.Empty(t, a.watched, "no Monitor before Done")
	_ = l.Done()
	_ = l.Done()
	require.Len(t, a.watched, 1, "Monitor once, on the first Done")

	p, err := e.NewLeaderParticipation("el", "id")
	require.NoError(t, err)
	lctx, err := p.WaitForLeadership()
	require.NoError(t, err)
	require.Len(t, a.watched, 1, "no Monitor before the term's first look")
	_ = lctx.Done()
	require.NoError(t, lctx.Err())
	_, err = p.Term()
	require.NoError(t, err)
	require.Len(t, a.watched, 2, "Monitor once, at the term's first look")
	p.Stop()

	// An entry granted by Create: no List, no Acquire.
	s.mu.Lock()
	lists := s.lists
	s.mu.Unlock()
	gd := &grantingDriver{acquirer: a}
	ge := claims.New(gd, claims.Options{})
	l2, err := ge.LockName(ctx, "g", "x")
	require.NoError(t, err)
	s.mu.Lock()
	require.Equal(t, lists, s.lists, "a granted entry is not listed")
	s.mu.Unlock()
	require.Len(t, a.acquired, 2, "only the election's head was acquired since")
	require.NoError(t, l2.Unlock(ctx))
	require.NoError(t, l.Unlock(ctx))
}

// grantingDriver's Create reports its entry granted at once.
type grantingDriver struct{ *acquirer }

func (g *grantingDriver) Create(ctx context.Context, q claims.Queue, contents string, o claims.CreateOptions) (claims.Entry, *claims.Session, error) {
	e, s, err := g.acquirer.Create(ctx, q, contents, o)
	e.Granted = true
	return e, s, err
}

// Held reads the queue entry behind a granted one; false once taken
// away (gone).
func (a *acquirer) Held(ctx context.Context, q claims.Queue, s *claims.Session, e claims.Entry) (bool, error) {
	a.mu.Lock()
	gone := a.gone
	a.mu.Unlock()
	if gone {
		return false, nil
	}
	if e.Token > 1000 {
		e.Token -= 1000
	}
	return a.driver.Held(ctx, q, s, e)
}

// TestTermLookReadsFirst: on a driver with a Monitor, a term whose entry
// the store took away before its leader first looked is seen ended at
// that look, whichever it is (the leadership context's Err, Done, a
// derived context, Term, Proclaim), and no Monitor starts for it.
func TestTermLookReadsFirst(t *testing.T) {
	type proclaimer interface {
		Proclaim(context.Context, []byte) error
	}
	looks := map[string]func(t *testing.T, lctx context.Context, p proclaimer, term func() error){
		"Err": func(t *testing.T, lctx context.Context, _ proclaimer, _ func() error) {
			require.Error(t, lctx.Err())
		},
		"Done": func(t *testing.T, lctx context.Context, _ proclaimer, _ func() error) {
			<-lctx.Done()
		},
		"derived": func(t *testing.T, lctx context.Context, _ proclaimer, _ func() error) {
			c, cancel := context.WithCancel(lctx)
			defer cancel()
			require.Error(t, c.Err())
		},
		"Term": func(t *testing.T, _ context.Context, _ proclaimer, term func() error) {
			require.Error(t, term())
		},
		"Proclaim": func(t *testing.T, _ context.Context, p proclaimer, _ func() error) {
			require.Error(t, p.Proclaim(t.Context(), []byte("v")))
		},
	}
	for name, look := range looks {
		t.Run(name, func(t *testing.T) {
			a := &acquirer{driver: &driver{s: newStore()}}
			e := claims.New(a, claims.Options{})
			p, err := e.NewLeaderParticipation("el", "id")
			require.NoError(t, err)
			defer p.Stop()
			lctx, err := p.WaitForLeadership()
			require.NoError(t, err)
			a.mu.Lock()
			a.gone = true
			a.mu.Unlock()
			look(t, lctx, p, func() error { _, err := p.Term(); return err })
			require.Error(t, lctx.Err(), "the term taken away is ended at its first look")
			_, err = p.Term()
			require.Error(t, err)
			a.mu.Lock()
			defer a.mu.Unlock()
			require.Empty(t, a.watched, "no Monitor for a term found ended")
		})
	}
}

// Delete removes the queue entry behind a granted one.
func (a *acquirer) Delete(ctx context.Context, q claims.Queue, s *claims.Session, e claims.Entry) error {
	if e.Token > 1000 {
		e.Token -= 1000
	}
	return a.driver.Delete(ctx, q, s, e)
}

// aheadAcquirer is the fake driver with both Aheader and Acquirer.
type aheadAcquirer struct{ *acquirer }

func (a aheadAcquirer) Ahead(ctx context.Context, q claims.Queue, e claims.Entry, most int) ([]claims.Entry, bool, error) {
	return aheadDriver{a.driver}.Ahead(ctx, q, e, most)
}

// TestAheaderAcquires: on a driver with both Ahead and Acquire, an entry
// that heads its queue at once is still granted through Acquire only.
func TestAheaderAcquires(t *testing.T) {
	a := &acquirer{driver: &driver{s: newStore()}}
	l, err := claims.New(aheadAcquirer{a}, claims.Options{}).LockName(t.Context(), "d", "x")
	require.NoError(t, err)
	require.Len(t, a.acquired, 1, "the head is granted through Acquire")
	require.Equal(t, 1000+a.acquired[0].Token, l.Token())
	require.NoError(t, l.Unlock(t.Context()))
}
