package claims

import (
	"context"
	"sync"
	"time"
)

// graceContext is context.WithTimeout(context.Background(), removeGrace),
// the bound of a removal that must run even when its caller's context has
// ended (withdraw), with its timer started only when the driver first
// asks for Done or AfterFunc: a removal that never waits (in process)
// costs no timer. AfterFunc lets context.WithCancel and context.AfterFunc
// derive from it without a goroutine. Safe for concurrent use.
type graceContext struct {
	deadline time.Time

	mu    sync.Mutex
	ended bool
	done  chan struct{}
	timer *time.Timer
	funcs []*graceFunc // AfterFunc's, run once ended
}

// graceFunc is one AfterFunc registration; ran is set once it ran or was
// stopped. Guarded by the context's mu.
type graceFunc struct {
	f   func()
	ran bool
}

func newGrace() *graceContext { return &graceContext{deadline: time.Now().Add(removeGrace)} }

// Deadline returns the end of the grace.
func (g *graceContext) Deadline() (time.Time, bool) { return g.deadline, true }

// Value returns nil: the context carries no values.
func (g *graceContext) Value(any) any { return nil }

// Done returns a channel closed at the deadline, or at end.
func (g *graceContext) Done() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.startLocked()
	return g.done
}

// startLocked makes the done channel and starts the timer, once.
func (g *graceContext) startLocked() {
	if g.done != nil {
		return
	}
	g.done = make(chan struct{})
	if g.ended {
		close(g.done)
		return
	}
	g.timer = time.AfterFunc(time.Until(g.deadline), g.end)
}

// Err is context.DeadlineExceeded once the deadline passed or end was
// called, nil before.
func (g *graceContext) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ended || !time.Now().Before(g.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// AfterFunc runs f in its own goroutine once the context ends, unless
// the returned stop is called first (stop reports whether it stopped f).
func (g *graceContext) AfterFunc(f func()) (stop func() bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	a := &graceFunc{f: f}
	if g.ended {
		a.ran = true
		go f()
	} else {
		g.startLocked()
		g.funcs = append(g.funcs, a)
	}
	return func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		stopped := !a.ran
		a.ran = true
		return stopped
	}
}

// end ends the context as its deadline does (and as the cancel of
// context.WithTimeout does): Done closes, AfterFunc's functions run, the
// timer stops. Idempotent.
func (g *graceContext) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ended {
		return
	}
	g.ended = true
	if g.timer != nil {
		g.timer.Stop()
	}
	if g.done != nil {
		close(g.done)
	}
	for _, a := range g.funcs {
		if !a.ran {
			a.ran = true
			go a.f()
		}
	}
}
