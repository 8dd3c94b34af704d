package zk2topo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo/claims"
)

// Leader values (layout in the package doc): a candidate's value znode is
// made in the same multi as the candidate, so its Czxid equals the
// candidate's; its data is one flag byte (0: nothing published, as after
// WaitForLeadership; 1: a value follows) and the value. A candidate's
// value is the value znode named with the candidate's owner session whose
// Czxid and EphemeralOwner equal the candidate's; a candidate without one
// (a Vitess process) has a nil Value. Why "values" never misleads Vitess:
// the package doc.

// valuesDir is the child of an election directory that holds the values.
const valuesDir = "values"

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

// deleteCandidate deletes the candidate entry node and its value znode
// val (if any) of session s in one multi, on that session. The error is
// ZooKeeper's (ErrNoNode when the entry is gone).
func (c *Conn) deleteCandidate(ctx context.Context, s *zkSession, node, val string) error {
	if s.isLost() {
		return errSessionOver
	}
	return c.do(ctx, c.relPath(node), func() error {
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
}

// enterElection creates the candidate entry of id in the election p (its
// entries under dirZp) with its value znode, on session s, creating the
// election's directory and "values" container when needed. value is the
// published value (nil: nothing published yet).
func (c *Conn) enterElection(ctx context.Context, s *zkSession, p, dirZp, id string, value []byte) (string, error) {
	enc := encodeValue(value, value != nil)
	for attempt := 0; ; attempt++ {
		// The candidate and its value znode, in one multi.
		cr, err := c.createEntryWith(ctx, s, p, dirZp, false, func() (created, error) {
			res, err := s.zk.Multi(
				&zk.CreateRequest{Path: dirZp + "/", Data: []byte(id), Acl: c.acl, Flags: zk.FlagEphemeralSequential},
				&zk.CreateRequest{Path: dirZp + "/" + valuesDir + "/" + valuePrefix(s.zk.SessionID()), Data: enc, Acl: c.acl, Flags: zk.FlagEphemeralSequential})
			for _, r := range res {
				if err != nil && r.Error != nil {
					return created{}, r.Error
				}
			}
			if err == nil && len(res) != 2 {
				err = errors.New("zk2topo: short multi answer")
			}
			if err != nil {
				return created{}, err
			}
			return created{node: res[0].String, extra: res[1].String}, nil
		})
		if err == nil {
			return cr.node, nil
		}
		if !errors.Is(err, zk.ErrNoNode) || attempt >= 10 {
			return "", c.convert(err, p)
		}
		if err := c.makeDirs(ctx, p, dirZp+"/"+valuesDir, nil); err != nil {
			return "", err
		}
	}
}

// Head implements claims.Driver (Leader, GetCurrentLeaderID, Observe): a
// children read of the election directory, the lowest candidate's data
// and Stat (its id and token), and its value znode, re-checked to belong
// to that candidate (same owner session and creation zxid), and then a
// second children read to check that the candidate still leads (it may
// have left while its value was read, and its value with it). Reads run
// on the Conn's current session, retried on a new one. With watch, the
// children read and the value's read set watches, and changed is closed
// when either fires (or the Conn closes).
func (d driver) Head(ctx context.Context, q claims.Queue, watch bool) (claims.Entry, bool, <-chan struct{}, error) {
	c := d.c
	dirZp := d.parent(q)
	for {
		var valW <-chan zk.Event
		kids, err := c.childrenOn(ctx, nil, q.Path, dirZp, watch)
		dirW := kids.ch
		if errors.Is(err, zk.ErrNoNode) {
			if !watch {
				return claims.Entry{}, false, nil, nil
			}
			r := c.statOn(ctx, nil, q.Path, dirZp, true)
			if dirW, err = r.ch, r.err; err == nil && r.exists {
				continue
			}
		}
		if err != nil {
			return claims.Entry{}, false, nil, err
		}
		children := entryNames(kids.names)
		if len(children) == 0 {
			return claims.Entry{}, false, c.changed(dirW, nil), nil
		}
		node := dirZp + "/" + children[0]
		cand, err := c.getOn(ctx, nil, q.Path, node, false)
		if errors.Is(err, zk.ErrNoNode) {
			continue // the leader went meanwhile: read again
		}
		if err != nil {
			return claims.Entry{}, false, nil, err
		}
		cst := cand.st
		h := claims.Entry{Token: cst.Czxid, Key: node, Session: sessionName(cst.EphemeralOwner), Contents: string(cand.data)}
		if cst.EphemeralOwner == 0 {
			return h, true, c.changed(dirW, nil), nil
		}
		vdir := dirZp + "/" + valuesDir
		vals, err := c.childrenOn(ctx, nil, q.Path, vdir, false)
		if errors.Is(err, zk.ErrNoNode) {
			return h, true, c.changed(dirW, nil), nil // no values: a Vitess candidate
		}
		if err != nil {
			return claims.Entry{}, false, nil, err
		}
		prefix := valuePrefix(cst.EphemeralOwner)
		for _, v := range vals.names {
			if !strings.HasPrefix(v, prefix) {
				continue
			}
			val, err := c.getOn(ctx, nil, q.Path, vdir+"/"+v, watch)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return claims.Entry{}, false, nil, err
			}
			if val.st.Czxid == cst.Czxid && val.st.EphemeralOwner == cst.EphemeralOwner {
				h.Value, h.ValueRev, valW = decodeValue(val.data), val.st.Mzxid, val.ch
				break
			}
		}
		again, err := c.childrenOn(ctx, nil, q.Path, dirZp, false)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return claims.Entry{}, false, nil, err
		}
		if names := entryNames(again.names); len(names) == 0 || names[0] != children[0] {
			continue
		}
		return h, true, c.changed(dirW, valW), nil
	}
}

// changed returns a channel closed once either watch fires or the Conn
// closes; nil when both are nil (Head without watch).
func (c *Conn) changed(a, b <-chan zk.Event) <-chan struct{} {
	if a == nil && b == nil {
		return nil
	}
	out := make(chan struct{})
	if !c.goBG(func() {
		defer close(out)
		select {
		case <-a:
		case <-b:
		case <-c.closing:
		}
	}) {
		close(out)
	}
	return out
}

// SetValue implements claims.Driver (Proclaim, and Campaign on a
// candidacy it keeps): one multi on the candidacy's session, a check of
// the candidate entry (at version 0: its data never changes) and a set of
// its value znode. The server refuses it once the session ended, and the
// entry's deletion fails the check: ErrNotHeld for both.
func (d driver) SetValue(ctx context.Context, q claims.Queue, cs *claims.Session, e claims.Entry, value []byte) error {
	c := d.c
	s := cs.Ref().(*zkSession)
	rec := s.entry(e.Key)
	if s.isLost() || rec == nil || rec.token != e.Token || rec.value == "" {
		return claims.ErrNotHeld
	}
	enc := encodeValue(value, true)
	got := make(chan []zk.MultiResponse, 1) // fn may finish after do gave up
	err := c.do(ctx, q.Path, func() error {
		if s.isLost() {
			return errSessionOver
		}
		res, err := s.zk.Multi(
			&zk.CheckVersionRequest{Path: e.Key, Version: 0},
			&zk.SetDataRequest{Path: rec.value, Data: enc, Version: -1})
		got <- res
		return err
	})
	switch {
	case err == nil:
		return nil
	case err == errSessionOver || s.isLost():
		return claims.ErrNotHeld
	case errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrClosing):
		return claims.ErrNotHeld // never sent: the session is over
	}
	select {
	case res := <-got:
		for _, r := range res {
			if errors.Is(r.Error, zk.ErrNoNode) || errors.Is(r.Error, zk.ErrBadVersion) {
				return claims.ErrNotHeld
			}
		}
	default:
	}
	return err
}

// Leadership ends as soon as the connection drops: from then on the
// server may expire the session (and let another candidate lead) without
// this process knowing. stepDown, run when the session's connection
// drops, ends the claims of the session's candidates that may lead
// (those an Ahead showed heading their election or next in line) as
// lost; removeStepped removes their entries (on that session) before the
// Conn enters the election again, so that the next WaitForLeadership is
// not queued behind its own old entry.
func (s *zkSession) stepDown() {
	type lost struct {
		node  string
		token int64
	}
	var ls []lost
	s.mu.Lock()
	for n, e := range s.entries {
		if e.election && e.head && !e.stepped {
			e.stepped = true
			ls = append(ls, lost{n, e.token})
		}
	}
	s.mu.Unlock()
	for _, l := range ls {
		s.claims.LoseEntry(l.node, l.token)
	}
}

// removeStepped removes the entries stepDown gave up on session s under
// the election directory dirZp, on s: before the Conn enters that
// election again (Create). Stop and Resign remove them too (the engine
// withdraws the lost candidacy). Not at reconnection: that was chosen
// to keep clear of go-zookeeper v1.0.4's lastZxid race, which hideZxid
// now prevents on every path; removing them there too would be a change
// of its own (it adds requests to a reconnection).
func (c *Conn) removeStepped(s *zkSession, dirZp string) {
	s.mu.Lock()
	var nodes []string
	for n, e := range s.entries {
		if e.stepped && zkDir(n) == dirZp {
			nodes = append(nodes, n)
		}
	}
	s.mu.Unlock()
	for _, n := range nodes {
		c.dropEntry(s, n, true)
	}
}
