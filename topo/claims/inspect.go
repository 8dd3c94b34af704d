package claims

import (
	"context"

	"github.com/topokit/topokit/topo/backendkit"
)

// Describer is an optional part of a Driver whose List leaves out what
// only a reader of the whole queue needs (ZooKeeper: the tokens, sessions
// and contents of other clients' entries). Describe returns q's entries,
// oldest first, each with Token, Session and Contents as the store has
// them, in as few reads as the store allows. Engine.Inspect calls it in
// place of List.
type Describer interface {
	Describe(ctx context.Context, q Queue) ([]Entry, error)
}

// QueueState is one queue as Engine.Inspect reads it.
type QueueState struct {
	// Holder is the entry that holds the lock or leads the election, when
	// Held; its Token is the fencing token of that claim.
	Holder Entry
	Held   bool
	// Waiting are the entries behind the holder, oldest (next to be
	// served) first: a lock's waiters, an election's other candidates.
	Waiting []Entry
}

// Inspect reads the queue q (a lock's directory, or with q.Election an
// election's name) without joining it: the holder and the entries waiting
// behind it, in the order they are served, each with its Token, Session
// ("" where the store has none, e.g. memorytopo) and Contents (a lock
// entry's description, a candidate's id; "" for a Consul waiter, whose
// queue entry carries no value). On a driver with the Acquirer step
// (Consul) the holder is read from the store's own key (Driver.Head),
// which Vitess's holders take too, and Waiting is the fair queue beside
// it; otherwise the holder is the queue's oldest entry. The two reads of
// an Acquirer driver are not one snapshot: a handover between them may
// show the new holder also as a waiter. Nothing is written and no Hooks
// run. Errors: InvalidPath (InvalidArgument) for a malformed or reserved
// q.Path as Lock (NewLeaderParticipation) reports it, ctx's Timeout or
// Interrupted, Closed after Close, and the store's errors through
// MapError. Safe for concurrent use.
func (e *Engine) Inspect(ctx context.Context, q Queue) (QueueState, error) {
	if err := backendkit.CheckContext(ctx, q.Path); err != nil {
		return QueueState{}, err
	}
	var err error
	if q.Election {
		q.Path, err = checkElection(q.Path, "inspect")
	} else {
		q.Path, err = backendkit.CheckLockPath(q.Path)
	}
	if err != nil {
		return QueueState{}, err
	}
	if err := e.closedErr(q.Path); err != nil {
		return QueueState{}, err
	}
	var es []Entry
	if d, ok := e.d.(Describer); ok {
		es, err = d.Describe(ctx, q)
	} else {
		es, err = e.d.List(ctx, q)
	}
	if err != nil {
		return QueueState{}, e.d.MapError(ctx, err, q.Path)
	}
	var st QueueState
	if _, ok := e.d.(Acquirer); ok {
		h, held, _, err := e.d.Head(ctx, q, false)
		if err != nil {
			return QueueState{}, e.d.MapError(ctx, err, q.Path)
		}
		st.Holder, st.Held, st.Waiting = h, held, es
		return st, nil
	}
	if len(es) > 0 {
		st.Holder, st.Held, st.Waiting = es[0], true, es[1:]
	}
	return st, nil
}
