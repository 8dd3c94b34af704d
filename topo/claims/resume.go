package claims

import (
	"context"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// ResumeInfo implements topo.LeaderParticipation: the driver's description
// (Driver.ResumeInfo) of the current candidacy's entry and session. NoNode
// when there is no live candidacy, Closed once the engine is closed.
func (p *participation) ResumeInfo() ([]byte, error) {
	if err := p.e.closedErr(p.q.Path); err != nil {
		return nil, err
	}
	p.mu.Lock()
	cl := p.cur
	p.mu.Unlock()
	if cl == nil || cl.err() != nil {
		return nil, topo.NewError(topo.NoNode, p.q.Path)
	}
	return p.e.d.ResumeInfo(p.q, cl.sess, cl.current())
}

// ResumeLeaderParticipation implements topo.Conn.ResumeLeaderParticipation: the checks of
// backendkit.CheckContext and backendkit.CheckElection, then the driver
// takes the candidacy back (Driver.Resume: the Conn adopts its session,
// the previous holder's claim on it is lost). The new participant's
// candidacy keeps its place in the queue and its token: if it led,
// WaitForLeadership and Campaign return at once with the same Token (and
// when the driver resumes a granted entry, Entry.Granted, it leads at
// once: Term returns the term). It
// returns LockLost when the session or the entry is gone, the driver's
// InvalidArgument for foreign or malformed info, Closed after Close.
func (e *Engine) ResumeLeaderParticipation(ctx context.Context, name, id string, info []byte) (topo.LeaderParticipation, error) {
	if err := backendkit.CheckContext(ctx, name); err != nil {
		return nil, err
	}
	n, err := backendkit.CheckElection(name, id)
	if err != nil {
		return nil, err
	}
	// No Closed check here: malformed or foreign info is InvalidArgument
	// even on a closed Conn (the driver checks it before its request).
	p := e.participation(n, id)
	ent, s, err := e.d.Resume(ctx, p.q, id, info)
	if err == ErrNotHeld {
		return nil, backendkit.Wrap(topo.LockLost, n, err)
	}
	if err != nil {
		return nil, e.d.MapError(ctx, err, n)
	}
	lctx, cancel := context.WithCancelCause(context.Background())
	p.cur, p.lctx = newClaim(e, p.q, ent, s, cancel), lctx
	if ent.Granted {
		// The store granted it (a driver with Acquirer): it leads now,
		// Term included.
		p.leading, p.term = p.cur, &term{p.cur}
	}
	p.cur.monitor()
	return p, nil
}
