package consultopo

import (
	"container/list"
	"context"
	"io"
	"math"
	"net/http"
	"sync"
)

// DefaultMaxBlockingQueries is Options.MaxBlockingQueries's default: half
// of Consul's default limits.http_max_conns_per_client (200), the other
// half left to the Conn's other requests and other clients of the address.
const DefaultMaxBlockingQueries = 100

// querySlots is a Conn's bound on its concurrent blocking queries
// (Options.MaxBlockingQueries): a counting semaphore granting slots in the
// order asked.
type querySlots struct {
	mu      sync.Mutex
	free    int       // slots not held, while waiting is empty
	waiting list.List // of chan struct{}, closed when granted, oldest first
	held    int       // slots held (a test hook reads it)
}

// newQuerySlots returns n slots; negative n, no bound.
func newQuerySlots(n int) *querySlots {
	if n < 0 {
		n = math.MaxInt
	}
	return &querySlots{free: n}
}

// acquire takes a slot, waiting behind earlier callers while none is
// free, or returns ctx's error (holding nothing).
func (s *querySlots) acquire(ctx context.Context) error {
	s.mu.Lock()
	if s.free > 0 && s.waiting.Len() == 0 {
		s.free--
		s.held++
		s.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	e := s.waiting.PushBack(ch)
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	select {
	case <-ch: // granted meanwhile: hand it on
		s.mu.Unlock()
		s.release()
	default:
		s.waiting.Remove(e)
		s.mu.Unlock()
	}
	return ctx.Err()
}

// release returns a slot, granting it to the oldest waiter if any.
func (s *querySlots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.waiting.Front(); e != nil {
		s.waiting.Remove(e)
		close(e.Value.(chan struct{})) // the slot passes on: held unchanged
		return
	}
	s.free++
	s.held--
}

// usage returns the slots held and the callers waiting for one.
func (s *querySlots) usage() (held, waiting int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held, s.waiting.Len()
}

// claimQuery marks the context of a claim's own blocking query (see
// claimContext).
type claimQuery struct{}

// claimContext marks ctx's blocking queries as a claim's own (a waiter's
// wait for its predecessor or the key, the watch on a held key): they take
// no slot, since a handover must not wait behind idle watches (up to a
// WatchPollDuration each), and their number is bounded by the Conn's
// contenders and claims.
func claimContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, claimQuery{}, true)
}

// slotTransport holds a slot for each blocking query (index above 0; see
// blockingWait) but a claim's own (claimContext) from before it is sent
// until its answer is read or its body closed, so that a query waiting for
// a slot holds no connection. Other requests pass straight through.
type slotTransport struct {
	base  http.RoundTripper
	slots *querySlots
}

// RoundTrip implements http.RoundTripper.
func (t *slotTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if blockingWait(req.URL.RawQuery) == 0 || req.Context().Value(claimQuery{}) != nil {
		return t.base.RoundTrip(req)
	}
	if err := t.slots.acquire(req.Context()); err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // as a RoundTripper must, even on error
		}
		return nil, err
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		t.slots.release()
		return nil, err
	}
	resp.Body = &releaseOnEOF{ReadCloser: resp.Body, release: t.slots.release}
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
