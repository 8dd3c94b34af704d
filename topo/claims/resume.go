package claims

import (
	"context"
	"errors"

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
// the previous holder's claim on it is lost; the participation's Stop or
// Resign then end that session, through Driver.Delete, and with it every
// other entry the previous holder had on it). The new participant's
// candidacy keeps its place in the queue and its token: if it led,
// WaitForLeadership and Campaign return at once with the same Token (and
// when the driver resumes a granted entry, Entry.Granted, it leads at
// once: Term returns the term). It
// returns LockLost when the session or the entry is gone, the driver's
// InvalidArgument for foreign or malformed info, Closed after Close.
func (e *Engine) ResumeLeaderParticipation(ctx context.Context, name, id string, info []byte) (topo.LeaderParticipation, error) {
	e.count(CallResumeLeaderParticipation)
	if err := backendkit.CheckContext(ctx, name); err != nil {
		return nil, err
	}
	n, err := checkElection(name, id)
	if err != nil {
		return nil, err
	}
	if err := e.enter(ctx, CallResumeLeaderParticipation, n); err != nil {
		return nil, err
	}
	// No Closed check here: malformed or foreign info is InvalidArgument
	// even on a closed Conn (the driver checks it before its request).
	return e.resume(ctx, e.participation(n, id), info)
}

// ResumeParticipation is ResumeLeaderParticipation for a backend's own
// election entry points (see Participate: q.Native, q.Path the raw
// prefix): the caller has checked q.Path and contents its own way. The
// driver's Resume gets q and contents as the id; the participant
// publishes value (nil: none) when it campaigns anew with
// WaitForLeadership. Errors as ResumeLeaderParticipation's.
func (e *Engine) ResumeParticipation(ctx context.Context, q Queue, contents string, value []byte, info []byte) (topo.LeaderParticipation, error) {
	if err := backendkit.CheckContext(ctx, q.Path); err != nil {
		return nil, err
	}
	return e.resume(ctx, e.Participate(q, contents, value).(*participation), info)
}

// resume takes back the candidacy info describes (Driver.Resume) for p.
func (e *Engine) resume(ctx context.Context, p *participation, info []byte) (topo.LeaderParticipation, error) {
	ent, s, err := e.d.Resume(ctx, p.q, p.id, info)
	if errors.Is(err, ErrNotHeld) {
		return nil, backendkit.Wrap(topo.LockLost, p.q.Path, err)
	}
	if err != nil {
		return nil, e.d.MapError(ctx, err, p.q.Path)
	}
	lctx, cancel := context.WithCancelCause(context.Background())
	p.cur, p.lctx = newClaim(e, p.q, ent, s, cancel), lctx
	if ent.Granted {
		// The store granted it (a driver with Acquirer): it leads now,
		// Term included.
		p.leading = p.cur
	}
	p.cur.monitor()
	return p, nil
}
