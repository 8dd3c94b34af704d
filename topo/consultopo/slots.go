package consultopo

import (
	"cmp"
	"context"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
)

// DefaultMaxBlockingQueries is Options.MaxBlockingQueries's default: with
// the claims' bound (half of it) 150 of Consul's default
// limits.http_max_conns_per_client (200), the rest left to the Conn's
// other requests and other clients of the address.
const DefaultMaxBlockingQueries = 100

// querySlots is a bound on concurrent blocking queries: a counting
// semaphore granting slots by priority (the smallest first; claimContext),
// in the order asked within one. The last reserved free slots go to
// prioAcquire queries alone.
type querySlots struct {
	mu       sync.Mutex
	free     int
	reserved int
	waiting  []*slotWait // in the order asked
	held     int         // slots held (a test hook reads it)
}

// slotWait is a query's wait for a slot.
type slotWait struct {
	prio    uint64
	granted chan struct{} // closed once the slot is the query's
}

// Query priorities (claimContext): the head's wait for the key first,
// then waiters by their predecessor's token (the earlier, the nearer the
// head), then the claims' other queries (a held key's watch, a late
// write's), then watches.
const (
	prioAcquire    = 0
	prioClaimOther = math.MaxUint64 - 1
	prioWatch      = math.MaxUint64
)

// newQuerySlots returns n slots, the last reserved of them for
// prioAcquire queries; negative n, no bound.
func newQuerySlots(n, reserved int) *querySlots {
	if n < 0 {
		n, reserved = math.MaxInt, 0
	}
	return &querySlots{free: n, reserved: reserved}
}

// acquire takes a slot for a query of priority prio, waiting while none is
// free to it or better queries wait, or returns ctx's error (holding
// nothing).
func (s *querySlots) acquire(ctx context.Context, prio uint64) error {
	w := &slotWait{prio: prio, granted: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, w)
	s.dispatch()
	s.mu.Unlock()
	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	select {
	case <-w.granted: // granted meanwhile: hand it on
		s.mu.Unlock()
		s.release()
	default:
		s.waiting = slices.DeleteFunc(s.waiting, func(o *slotWait) bool { return o == w })
		s.mu.Unlock()
	}
	return ctx.Err()
}

// dispatch grants free slots to the best waiters (the first asked of the
// smallest priority) while they may take one. s.mu is held.
func (s *querySlots) dispatch() {
	for s.free > 0 && len(s.waiting) > 0 {
		w := slices.MinFunc(s.waiting, func(a, b *slotWait) int { return cmp.Compare(a.prio, b.prio) })
		if w.prio != prioAcquire && s.free <= s.reserved {
			return // the reserved slots: no prioAcquire query waits
		}
		s.waiting = slices.DeleteFunc(s.waiting, func(o *slotWait) bool { return o == w })
		s.free--
		s.held++
		close(w.granted)
	}
}

// release returns a slot, granting it to the best waiter if any.
func (s *querySlots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free++
	s.held--
	s.dispatch()
}

// usage returns the slots held and the queries waiting for one.
func (s *querySlots) usage() (held, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held, len(s.waiting)
}

// claimQuery marks the context of a claim's own blocking query (see
// claimContext).
type claimQuery struct{}

// claimContext marks ctx's blocking queries as a claim's own, of priority
// prio (prioAcquire, a waiter's predecessor's token, prioClaimOther): they
// take a slot of the Conn's claim bound, not of its watches' (a handover
// must not wait behind idle watches, up to a WatchPollDuration each), the
// nearest the head first, a slot kept for the heads' waits for the key.
func claimContext(ctx context.Context, prio uint64) context.Context {
	return context.WithValue(ctx, claimQuery{}, prio)
}

// claimSlotsFor returns the claim bound of a Conn whose watches' bound is
// n (Options.MaxBlockingQueries): half of it, at least two, one of them
// kept for the heads' waits for the key; negative n, no bound.
func claimSlotsFor(n int) *querySlots {
	if n < 0 {
		return newQuerySlots(-1, 0)
	}
	return newQuerySlots(max(2, n/2), 1)
}

// slotTransport holds a slot for each blocking query (index above 0; see
// blockingWait), of claims for a claim's own (claimContext), else of
// watches, from before it is sent until its answer is read or its body
// closed, so that a query waiting for a slot holds no connection. Other
// requests pass straight through.
type slotTransport struct {
	base    http.RoundTripper
	watches *querySlots
	claims  *querySlots
}

// RoundTrip implements http.RoundTripper.
func (t *slotTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if blockingWait(req.URL.RawQuery) == 0 {
		return t.base.RoundTrip(req)
	}
	slots, prio := t.watches, uint64(prioWatch)
	if p, ok := req.Context().Value(claimQuery{}).(uint64); ok {
		slots, prio = t.claims, p
	}
	if err := slots.acquire(req.Context(), prio); err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // as a RoundTripper must, even on error
		}
		return nil, err
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		slots.release()
		return nil, err
	}
	resp.Body = &releaseOnEOF{ReadCloser: resp.Body, release: slots.release}
	return resp, nil
}

// releaseOnEOF runs release once: when its body has been read to the end
// (the connection is free again) or closed, whichever comes first.
type releaseOnEOF struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releaseOnEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.release)
	}
	return n, err
}

func (b *releaseOnEOF) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
