package cache

import "context"

// Mode is how a read is answered.
type Mode int

const (
	// Cached answers from memory: the state the store watch last
	// delivered (or the store, for paths with a write of this Cache not yet
	// seen by the watch, and while the Cache cannot serve: see the package
	// documentation).
	Cached Mode = iota
	// Consistent answers so that the answer reflects every write
	// completed before the call started: a Get from memory after a
	// revision barrier when the wrapped Conn is a SyncWatcher, otherwise
	// (and List, ListDir) a read through the store under
	// topo.WithLinearizableRead, linearizable whatever the wrapped Conn's
	// options.
	Consistent
	// Bypass calls the wrapped Conn, as if there were no Cache.
	Bypass
)

// String returns "cached", "consistent" or "bypass".
func (m Mode) String() string {
	switch m {
	case Consistent:
		return "consistent"
	case Bypass:
		return "bypass"
	}
	return "cached"
}

type modeKey struct{}

// WithMode returns a context under which reads of a Cache use mode instead
// of the Cache's default (Options.Mode).
func WithMode(ctx context.Context, mode Mode) context.Context {
	return context.WithValue(ctx, modeKey{}, mode)
}

// modeOf returns the mode ctx asks for, or def.
func modeOf(ctx context.Context, def Mode) Mode {
	if m, ok := ctx.Value(modeKey{}).(Mode); ok {
		return m
	}
	return def
}
