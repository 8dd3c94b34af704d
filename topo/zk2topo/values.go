package zk2topo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Leader values.
//
// The candidate entry keeps Vitess's layout: an ephemeral-sequential
// child of <root>/elections/<name>/ holding exactly the participant id.
// The published value lives in a second ephemeral znode of the same
// session, created in the same multi as the candidate (so one zxid: the
// value znode's Czxid equals the candidate's), under the container znode
// <root>/elections/<name>/values/, named "<session id, 16 hex digits>-"
// plus a sequence. Its data is one flag byte (0: nothing published, as
// after WaitForLeadership; 1: a value follows) and the value.
//
// Vitess never takes "values" for a candidate: it sorts the children of
// the election directory and treats the first as the leader and the one
// before its own as its predecessor; "values" sorts after every
// ten-digit sequence name, so it is only ever first when no candidate
// exists, and then Vitess reads its (empty) data as the id "" (nobody
// leads).
//
// A candidate's value is the value znode whose name starts with the
// candidate's owner session and whose Czxid and EphemeralOwner equal the
// candidate's. A candidate without one (a Vitess process) has a nil
// Value.

// valuesDir is the child of an election directory that holds the values.
const valuesDir = "values"

// resignGrace bounds Resign's removal when its context has already ended.
const resignGrace = 5 * time.Second

// encodeValue returns the data of a value znode.
func encodeValue(v []byte, published bool) []byte {
	if !published {
		return []byte{0}
	}
	return append([]byte{1}, v...)
}

// decodeValue returns the value a value znode's data holds (nil when
// nothing was published).
func decodeValue(d []byte) []byte {
	if len(d) == 0 || d[0] == 0 {
		return nil
	}
	return append([]byte{}, d[1:]...)
}

// valuePrefix is the name prefix of session sid's value znodes.
func valuePrefix(sid int64) string { return fmt.Sprintf("%016x-", uint64(sid)) }

// createCandidate makes the candidate entry (holding id) and its value
// znode (holding value, encoded) in one multi on session s.
func (c *Conn) createCandidate(ctx context.Context, s *zkSession, p, dirZp string, id, value []byte) (string, string, error) {
	if value == nil {
		value = encodeValue(nil, false)
	}
	return c.createEntryWith(ctx, s, p, dirZp, false, func() (string, string, error) {
		res, err := s.zk.Multi(
			&zk.CreateRequest{Path: dirZp + "/", Data: id, Acl: c.acl, Flags: zk.FlagEphemeralSequential},
			&zk.CreateRequest{Path: dirZp + "/" + valuesDir + "/" + valuePrefix(s.zk.SessionID()), Data: value, Acl: c.acl, Flags: zk.FlagEphemeralSequential})
		if err != nil {
			for _, r := range res {
				if r.Error != nil {
					return "", "", r.Error
				}
			}
			return "", "", err
		}
		if len(res) != 2 {
			return "", "", errors.New("zk2topo: short multi answer")
		}
		return res[0].String, res[1].String, nil
	})
}

// deleteCandidate deletes the candidate entry node and its value znode
// val (if any) of session s in one multi, forgetting the entry. Nothing is
// sent once the session is over.
func (c *Conn) deleteCandidate(ctx context.Context, s *zkSession, node, val string) error {
	s.forget(node)
	if c.closed.Load() || s.isLost() {
		return nil
	}
	p := c.relPath(node)
	err := c.do(ctx, p, func() error {
		if val == "" {
			return s.zk.Delete(node, -1)
		}
		res, err := s.zk.Multi(&zk.DeleteRequest{Path: val, Version: -1}, &zk.DeleteRequest{Path: node, Version: -1})
		if err != nil && len(res) == 2 && errors.Is(res[0].Error, zk.ErrNoNode) {
			// The value znode is gone (deleted behind our back): the entry
			// alone.
			return s.zk.Delete(node, -1)
		}
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil && s.isLost() {
		return nil // gone with the session
	}
	if err != nil {
		return c.convert(err, p)
	}
	return nil
}

// Campaign joins with value (see LeaderParticipation.Campaign): the value
// znode is created with the candidate entry, in one multi, so a leader is
// never observed without it. While leading it proclaims value and
// returns the leadership context. Errors: InvalidArgument (oversized
// value), Timeout or Interrupted when ctx ends first (the candidate is
// removed), Interrupted after Stop, Closed, Unavailable, NotLeader or
// LockLost when a Proclaim while leading finds the term over.
func (p *participation) Campaign(ctx context.Context, value []byte) (context.Context, error) {
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return nil, err
	}
	if err := backendkit.CheckValue(p.name, value); err != nil {
		return nil, err
	}
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil, topo.NewError(topo.Interrupted, p.name)
	}
	lctx := p.lctx
	leading := lctx != nil && lctx.Err() == nil
	enc := encodeValue(value, true)
	p.value = enc
	node, sess, val := p.node, p.nodeSess, p.valNode
	p.mu.Unlock()
	if leading {
		if err := p.Proclaim(ctx, value); err != nil {
			return nil, err
		}
		return lctx, nil
	}
	if node != "" && val != "" && !sess.isLost() {
		// A candidate waiting from an earlier call: publish the new value
		// on it before waiting.
		err := p.c.onSession(ctx, sess, p.name, func(z *zk.Conn) error {
			_, err := z.Set(val, enc, -1)
			return err
		})
		if err != nil && err != errSessionOver && !errors.Is(err, zk.ErrNoNode) {
			return nil, p.c.convert(err, p.name)
		}
	}
	return p.waitLead(ctx)
}

// Proclaim replaces the published value with one multi on the term's
// session: a check of the candidate entry (it exists, at version 0: its
// data is never changed) and a set of its value znode. The server refuses
// it once the session ended, and the entry's deletion fails the check.
// Errors: NotLeader when this participant does not lead (locally, or the
// store no longer has its entry), InvalidArgument (oversized value),
// Closed after the Conn's Close (after the argument checks),
// Timeout/Interrupted, Unavailable (the outcome is unknown).
func (p *participation) Proclaim(ctx context.Context, value []byte) error {
	if err := backendkit.CheckContext(ctx, p.name); err != nil {
		return err
	}
	if err := backendkit.CheckValue(p.name, value); err != nil {
		return err
	}
	if p.c.closed.Load() {
		return topo.NewError(topo.Closed, p.name)
	}
	p.mu.Lock()
	t, val := p.term, p.valNode
	p.mu.Unlock()
	if t == nil || t.ended() || val == "" || t.sess.isLost() {
		return topo.NewError(topo.NotLeader, p.name)
	}
	enc := encodeValue(value, true)
	type answer struct {
		res []zk.MultiResponse
		err error
	}
	got := make(chan answer, 1) // fn may finish after do gave up
	err := p.c.do(ctx, p.name, func() error {
		if t.sess.isLost() {
			return errSessionOver
		}
		res, err := t.sess.zk.Multi(
			&zk.CheckVersionRequest{Path: t.node, Version: 0},
			&zk.SetDataRequest{Path: val, Data: enc, Version: -1})
		got <- answer{res, err}
		return err
	})
	switch {
	case err == nil:
		p.mu.Lock()
		if p.term == t {
			p.value = enc
		}
		p.mu.Unlock()
		return nil
	case err == errSessionOver || t.sess.isLost():
		return topo.NewError(topo.NotLeader, p.name)
	case topo.CodeOf(err) == topo.Timeout || topo.CodeOf(err) == topo.Interrupted || topo.CodeOf(err) == topo.Closed:
		return err
	}
	a := <-got
	for _, r := range a.res {
		if errors.Is(r.Error, zk.ErrNoNode) || errors.Is(r.Error, zk.ErrBadVersion) {
			return topo.NewError(topo.NotLeader, p.name)
		}
	}
	if errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrClosing) {
		return topo.NewError(topo.NotLeader, p.name) // never sent: the session is over
	}
	return p.c.convert(err, p.name)
}

// Resign withdraws the candidacy: it cancels the leadership context (and
// makes a waiting Campaign or WaitForLeadership return Interrupted), then
// deletes the candidate entry and its value znode in one multi on their
// session (within ctx, or within resignGrace when ctx has already ended).
// The election's znode stays, as with Stop. It returns nil when there is nothing to resign, Timeout or Interrupted
// when the removal did not finish within the grace (the entry then goes
// with its session at the latest), Closed after Close (also when there
// is nothing to resign).
func (p *participation) Resign(ctx context.Context) error {
	p.mu.Lock()
	if p.lcancel != nil {
		p.lcancel()
	}
	if p.resigned != nil {
		close(p.resigned) // a waiting Campaign or WaitForLeadership returns
	}
	p.resigned = make(chan struct{})
	node := p.node
	p.mu.Unlock()
	p.monitor.Wait()
	if node == "" {
		if p.c.closed.Load() {
			return topo.NewError(topo.Closed, p.name)
		}
		return nil
	}
	if p.c.closed.Load() {
		p.mu.Lock()
		p.node, p.valNode = "", ""
		p.mu.Unlock()
		return topo.NewError(topo.Closed, p.name)
	}
	rctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(context.Background(), resignGrace)
		defer cancel()
	}
	err := p.removeCandidateCtx(rctx)
	if err != nil && rctx.Err() != nil {
		return backendkit.FromContext(ctx, p.name)
	}
	return err
}

// electionState is what readState read: the lowest candidate (node ""
// when none), its Leader, and the watches that fire on the next change.
type electionState struct {
	node   string
	leader topo.Leader
	dirW   <-chan zk.Event // children of the election directory (or its creation)
	valW   <-chan zk.Event // the leader's value znode, nil when none
	val    string          // the leader's value znode, "" when none
	czxid  int64           // its (and the candidate's) Czxid
	owner  int64           // its (and the candidate's) session
}

// readState reads the election's leader: a children read (with a watch)
// of the election directory, the lowest candidate's data and Stat, and
// its value znode (with a data watch), re-checked to belong to that
// candidate (same owner session and creation zxid). Reads run on the
// Conn's current session, retried on a new one.
func (p *participation) readState(ctx context.Context) (electionState, error) {
	c := p.c
	for {
		var st electionState
		var children []string
		err := c.read(ctx, p.name, func(z *zk.Conn) error {
			cs, _, w, err := z.ChildrenW(p.dirZp)
			children, st.dirW = cs, w
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			var exists bool
			err = c.read(ctx, p.name, func(z *zk.Conn) error {
				ok, _, w, err := z.ExistsW(p.dirZp)
				exists, st.dirW = ok, w
				return err
			})
			if err == nil && exists {
				continue
			}
		}
		if err != nil {
			return electionState{}, err
		}
		children = entryNames(children)
		if len(children) == 0 {
			return st, nil
		}
		node := p.dirZp + "/" + children[0]
		var data []byte
		var cst *zk.Stat
		err = c.read(ctx, p.name, func(z *zk.Conn) error {
			d, s, err := z.Get(node)
			data, cst = d, s
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // the leader went meanwhile: read again
		}
		if err != nil {
			return electionState{}, err
		}
		st.node = node
		st.leader = topo.Leader{ID: string(data), Token: cst.Czxid}
		if cst.EphemeralOwner == 0 {
			return st, nil
		}
		var vals []string
		vdir := p.dirZp + "/" + valuesDir
		err = c.read(ctx, p.name, func(z *zk.Conn) error {
			vs, _, err := z.Children(vdir)
			vals = vs
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return st, nil // no values: a Vitess candidate
		}
		if err != nil {
			return electionState{}, err
		}
		prefix := valuePrefix(cst.EphemeralOwner)
		for _, v := range vals {
			if !strings.HasPrefix(v, prefix) {
				continue
			}
			var vdata []byte
			var vst *zk.Stat
			var w <-chan zk.Event
			err := c.read(ctx, p.name, func(z *zk.Conn) error {
				d, s, ch, err := z.GetW(vdir + "/" + v)
				vdata, vst, w = d, s, ch
				return err
			})
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return electionState{}, err
			}
			if vst.Czxid == cst.Czxid && vst.EphemeralOwner == cst.EphemeralOwner {
				st.leader.Value = decodeValue(vdata)
				st.valW, st.val, st.czxid, st.owner = w, vdir+"/"+v, vst.Czxid, vst.EphemeralOwner
				break
			}
		}
		// The value read belongs to the candidate read; check that the
		// candidate is still the leader (it may have left while the value
		// was read, and its value with it).
		var again []string
		err = c.read(ctx, p.name, func(z *zk.Conn) error {
			cs, _, err := z.Children(p.dirZp)
			again = cs
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return electionState{}, err
		}
		again = entryNames(again)
		if len(again) == 0 || again[0] != children[0] {
			continue
		}
		return st, nil
	}
}

// rereadValue reads the leader's value znode again with a data watch,
// keeping the rest of st; false when it is gone or not the same znode.
func (p *participation) rereadValue(ctx context.Context, st electionState) (electionState, bool) {
	var data []byte
	var vst *zk.Stat
	var w <-chan zk.Event
	err := p.c.read(ctx, p.name, func(z *zk.Conn) error {
		d, s, ch, err := z.GetW(st.val)
		data, vst, w = d, s, ch
		return err
	})
	if err != nil || vst.Czxid != st.czxid || vst.EphemeralOwner != st.owner {
		return st, false
	}
	st.valW = w
	st.leader.Value = decodeValue(data)
	return st, true
}

// Leader returns the current leader (id, value, the term's token: the
// candidate entry's Czxid), or NoLeader when nobody leads. Errors:
// Timeout/Interrupted, Closed, Unavailable.
func (p *participation) Leader(ctx context.Context) (topo.Leader, error) {
	if err := p.c.begin(ctx, p.name); err != nil {
		return topo.Leader{}, err
	}
	st, err := p.readState(ctx)
	if err != nil {
		return topo.Leader{}, p.c.convert(err, p.name)
	}
	if st.node == "" {
		return topo.Leader{}, topo.NewError(topo.NoLeader, p.name)
	}
	return st.leader, nil
}

// Observe sends the current leader (Leader{} when nobody leads), then the
// state read after every change of the election directory's children or
// of the leader's value znode (watches re-armed on every read). Only
// changes are sent; a slow reader gets the latest state (an unread older
// one is replaced), so the last value sent is always the latest read.
// When the Conn's session ends (the watches end), or a read fails, it
// reads the state again on the Conn's next session. The channel closes
// when ctx ends or the Conn closes. Errors: Timeout/Interrupted, Closed,
// Unavailable (the first read).
func (p *participation) Observe(ctx context.Context) (<-chan topo.Leader, error) {
	c := p.c
	if err := c.begin(ctx, p.name); err != nil {
		return nil, err
	}
	st, err := p.readState(ctx)
	if err != nil {
		return nil, c.convert(err, p.name)
	}
	out := make(chan topo.Leader, 1)
	out <- st.leader
	c.bg.Add(1)
	go func() {
		defer c.bg.Done()
		defer close(out)
		last := st.leader
		send := func(l topo.Leader) {
			for {
				select {
				case out <- l:
					return
				default:
				}
				select {
				case <-out: // replace the unread, older state
				default:
				}
			}
		}
		for {
			var vev zk.Event
			valEvent := false
			select {
			case <-st.dirW:
			case vev = <-st.valW:
				valEvent = true
			case <-ctx.Done():
				return
			case <-c.closing:
				return
			}
			if valEvent && vev.Type == zk.EventNodeDataChanged {
				// A Proclaim, unless the candidates changed too (that
				// watch fires first: one session's events come in zxid
				// order): read the value znode again, one round trip.
				select {
				case <-st.dirW:
				default:
					if nst, ok := p.rereadValue(ctx, st); ok {
						st = nst
						if !bytes.Equal(st.leader.Value, last.Value) {
							send(st.leader)
							last = st.leader
						}
						continue
					}
				}
			}
			for {
				var err error
				st, err = p.readState(ctx)
				if err == nil {
					break
				}
				select {
				case <-ctx.Done():
					return
				case <-c.closing:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
			if st.leader.ID != last.ID || st.leader.Token != last.Token || !bytes.Equal(st.leader.Value, last.Value) {
				send(st.leader)
				last = st.leader
			}
		}
	}()
	return out, nil
}

// WaitForNewLeader is a view of Observe: the id of each new term (a
// re-elected id again), without "nobody leads" and without Proclaims. The channel
// closes when ctx ends or the Conn closes. Errors: Timeout/Interrupted,
// Closed, Unavailable.
func (p *participation) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	ch, err := p.Observe(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan string, 8)
	p.c.bg.Add(1)
	go func() {
		defer p.c.bg.Done()
		defer close(out)
		var last int64 // the token of the term sent last
		for l := range ch {
			if l.ID == "" || l.Token == last {
				continue
			}
			last = l.Token
			select {
			case out <- l.ID:
			case <-ctx.Done():
				for range ch {
				}
				return
			}
		}
	}()
	return out, nil
}

// resumeInfo is what ResumeInfo encodes (JSON).
type resumeInfo struct {
	Backend  string `json:"backend"`
	Election string `json:"election"`
	ID       string `json:"id"`
	Entry    string `json:"entry"` // the candidate znode
	Value    string `json:"value"` // its value znode
	Session  int64  `json:"session"`
	Password []byte `json:"password"`
}

const resumeBackend = "zk2"

// ResumeInfo returns JSON naming the election, id, candidate and value
// znodes, and the session's id and password (a secret: whoever has it
// can act as the session). NoNode when the participant has no entry,
// Closed after the Conn's Close.
func (p *participation) ResumeInfo() ([]byte, error) {
	if p.c.closed.Load() {
		return nil, topo.NewError(topo.Closed, p.name)
	}
	p.mu.Lock()
	node, sess, val := p.node, p.nodeSess, p.valNode
	p.mu.Unlock()
	if node == "" || sess == nil || sess.isLost() {
		return nil, topo.NewError(topo.NoNode, p.name)
	}
	pw := sess.obs.password()
	if len(pw) != passwdLen {
		return nil, backendkit.Wrap(topo.Unavailable, p.name, errors.New("zk2topo: the session's password is unknown"))
	}
	return json.Marshal(resumeInfo{
		Backend: resumeBackend, Election: p.name, ID: p.id,
		Entry: node, Value: val, Session: sess.zk.SessionID(), Password: pw,
	})
}

// ResumeLeaderParticipation takes back the candidacy info describes (see
// topo.Conn): it attaches a new client to the candidacy's live session
// (ZooKeeper lets a client reconnect to a session with its id and
// password; the connect request of the new client asks for it), checks
// that the candidate entry is the session's and holds id, and returns a
// participation that campaigns on that session while it lives (and on the
// Conn's own sessions after). The server moves the session to the new
// client and drops the old one's connection: the old process must be
// gone, or it steals the session back when it reconnects. The session
// lives until Close (or expiry), with this Conn keeping it alive.
// Errors: InvalidArgument (malformed info, or another backend, election
// or id), LockLost (the session ended, or the entry is gone),
// Timeout/Interrupted, Closed, Unavailable, and those of
// NewLeaderParticipation.
func (c *Conn) ResumeLeaderParticipation(ctx context.Context, name, id string, info []byte) (topo.LeaderParticipation, error) {
	// backendkit's order: the context, the name and id, the resume info,
	// and only then (c.begin) whether c is closed.
	if err := backendkit.CheckContext(ctx, name); err != nil {
		return nil, err
	}
	n, err := backendkit.CheckElection(name, id)
	if err != nil {
		return nil, err
	}
	p := c.newParticipation(n, id)
	var ri resumeInfo
	bad := func(why string) error {
		return backendkit.Wrap(topo.InvalidArgument, p.name, errors.New("zk2topo: resume info: "+why))
	}
	if err := json.Unmarshal(info, &ri); err != nil {
		return nil, bad(err.Error())
	}
	switch {
	case ri.Backend != resumeBackend:
		return nil, bad("not a zk2 candidacy")
	case ri.Election != p.name:
		return nil, bad("issued for another election")
	case ri.ID != id:
		return nil, bad("issued for another id")
	case ri.Session == 0 || len(ri.Password) != passwdLen:
		return nil, bad("no session")
	case zkDir(ri.Entry) != p.dirZp || !isEntryName(ri.Entry[len(p.dirZp)+1:]):
		return nil, bad("not a candidate entry of this election under this Conn's root")
	case ri.Value != "" && (zkDir(ri.Value) != p.dirZp+"/"+valuesDir || !strings.HasPrefix(ri.Value[len(p.dirZp)+len(valuesDir)+2:], valuePrefix(ri.Session))):
		return nil, bad("not a value znode of this candidacy")
	}
	if err := c.begin(ctx, p.name); err != nil {
		return nil, err
	}
	s, err := c.newSessionAs(ri.Session, ri.Password)
	if err != nil {
		return nil, backendkit.Wrap(topo.Unavailable, p.name, err)
	}
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		s.dead.Store(true)
		s.lose()
		return nil, topo.NewError(topo.Closed, p.name)
	}
	c.resumed = append(c.resumed, s)
	c.mu.Unlock()
	fail := func(err error) (topo.LeaderParticipation, error) {
		s.dead.Store(true)
		s.lose()
		return nil, err
	}
	// Wait for the server's answer: the session, or expired.
	bound := time.NewTimer(c.opts.DialTimeout)
	defer bound.Stop()
	for s.zk.State() != zk.StateHasSession || s.zk.SessionID() != ri.Session {
		if s.isLost() || s.zk.State() == zk.StateExpired {
			return fail(backendkit.Wrap(topo.LockLost, p.name, errors.New("zk2topo: the candidacy's session has ended")))
		}
		select {
		case <-ctx.Done():
			return fail(backendkit.FromContext(ctx, p.name))
		case <-bound.C:
			return fail(backendkit.Wrap(topo.Unavailable, p.name, c.noSessionError(strings.Join(c.opts.Servers, ","))))
		case <-s.lost:
		case <-time.After(2 * time.Millisecond):
		}
	}
	if err := s.ensureAuth(ctx, p.name); err != nil {
		return fail(err)
	}
	var exists bool
	var data []byte
	var st *zk.Stat
	err = c.onSession(ctx, s, p.name, func(z *zk.Conn) error {
		d, stt, err := z.Get(ri.Entry)
		if errors.Is(err, zk.ErrNoNode) {
			exists = false
			return nil
		}
		exists, data, st = err == nil, d, stt
		return err
	})
	if err == errSessionOver {
		return fail(backendkit.Wrap(topo.LockLost, p.name, errors.New("zk2topo: the candidacy's session has ended")))
	}
	if err != nil {
		return fail(c.convert(err, p.name))
	}
	if !exists || st.EphemeralOwner != ri.Session || string(data) != id {
		return fail(backendkit.Wrap(topo.LockLost, p.name, errors.New("zk2topo: the candidate entry is gone")))
	}
	value := encodeValue(nil, false)
	if ri.Value != "" {
		var vd []byte
		var vst *zk.Stat
		err = c.onSession(ctx, s, p.name, func(z *zk.Conn) error {
			d, stt, err := z.Get(ri.Value)
			vd, vst = d, stt
			return err
		})
		switch {
		case errors.Is(err, zk.ErrNoNode):
			ri.Value = ""
		case err != nil:
			return fail(c.convert(err, p.name))
		case vst.EphemeralOwner != ri.Session || vst.Czxid != st.Czxid:
			ri.Value = ""
		default:
			value = vd
		}
	}
	s.mu.Lock()
	s.entries[ri.Entry] = true
	s.nextGen++
	s.gens[ri.Entry] = s.nextGen
	s.mu.Unlock()
	p.mu.Lock()
	p.pinned, p.node, p.nodeSess, p.valNode, p.value = s, ri.Entry, s, ri.Value, value
	p.mu.Unlock()
	return p, nil
}
