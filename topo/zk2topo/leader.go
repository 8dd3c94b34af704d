package zk2topo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo/claims"
)

// Leader values (layout: the package doc): a value znode's data is a flag
// byte (0: nothing published; 1: a value follows) and the value. A
// candidate's value is the one named with its session whose Czxid and
// EphemeralOwner equal the candidate's; a Vitess candidate has none (nil).

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

// deleteCandidate deletes s's candidate node and its value znode val (if
// any) in one multi on s. The error is ZooKeeper's.
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
			// The value znode is gone: the entry alone.
			return s.zk.Delete(node, -1)
		}
		return err
	})
}

// enterElection creates the candidate of id under dirZp with its value
// znode (value nil: nothing published) on session s, creating the
// directory and "values" container when needed.
func (c *Conn) enterElection(ctx context.Context, s *zkSession, p, dirZp, id string, value []byte) (string, error) {
	enc := encodeValue(value, value != nil)
	for attempt := 0; ; attempt++ {
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
		if err := c.makeDirs(ctx, p, dirZp+"/"+valuesDir); err != nil {
			return "", err
		}
	}
}

// Head implements claims.Driver (Leader, GetCurrentLeaderID, Observe) on
// the current session: the election's children, the lowest candidate's
// data and Stat, its value znode (same owner and Czxid), then the children
// again to check it still leads (it may have left meanwhile, its value
// with it). With watch, the first children read and the value read set
// watches, and changed closes when either fires or the Conn closes.
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
// closes; nil when both are nil.
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

// SetValue implements claims.Driver (Proclaim, Campaign): one multi on
// the candidacy's session, a check of the entry (version 0: its data
// never changes) and a set of its value znode; ErrNotHeld once the session
// ended or the entry is gone.
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

// stepDown, run when the connection drops (the server may then expire the
// session unseen), ends as lost the claims of the session's candidates
// that may lead (markHead).
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

// removeStepped removes, on s, the entries stepDown gave up under dirZp,
// before the Conn enters that election again, so that it is not queued
// behind its own old entry (Stop and Resign remove them too; reconnection
// does not, which would cost requests on every reconnection).
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
