package consultopo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// resumeInfo is what ResumeInfo returns, as JSON.
type resumeInfo struct {
	Backend   string `json:"backend"`
	Key       string `json:"key"` // the election key, with the root
	ID        string `json:"id"`
	Session   string `json:"session"`
	TTL       string `json:"ttl"`
	Token     uint64 `json:"token"`      // the election key's ModifyIndex
	LockIndex uint64 `json:"lock_index"` // and its LockIndex
}

// ResumeInfo implements claims.Driver: resumeInfo as JSON. Only the
// leader holds the election key, so NoNode unless the participant leads.
func (d driver) ResumeInfo(q claims.Queue, v *claims.Session, e claims.Entry) ([]byte, error) {
	if !e.Granted {
		return nil, backendkit.Wrap(topo.NoNode, q.Path, errors.New("the participant does not lead: on Consul only the leader has an entry"))
	}
	sess := sessionOf(v)
	key, lockIndex := splitGranted(e)
	return json.Marshal(resumeInfo{Backend: FactoryName, Key: key, ID: e.Contents, Session: sess.id,
		TTL: sess.ttl.String(), Token: uint64(e.Token), LockIndex: lockIndex})
}

// Resume implements claims.Driver (docs/layout-consul.md, "Resume"): it
// adopts info's session and checks (Held) that the election key is still
// the term's; the participation's end destroys the session, releasing all
// the earlier process held on it. That process must be gone: a live one
// keeps renewing the session, and both lead the same term (two leaders)
// until it is destroyed. InvalidArgument for malformed info, or info of
// another backend, election, root or id; NodeExists when this Conn holds
// the session already; ErrNotHeld when the term is over.
func (d driver) Resume(ctx context.Context, q claims.Queue, id string, info []byte) (claims.Entry, *claims.Session, error) {
	c := d.c
	key := d.storeKey(q)
	var ri resumeInfo
	if err := json.Unmarshal(info, &ri); err != nil {
		return claims.Entry{}, nil, backendkit.Wrap(topo.InvalidArgument, q.Path, fmt.Errorf("malformed resume info: %w", err))
	}
	ttl, terr := time.ParseDuration(ri.TTL)
	switch {
	case ri.Backend != FactoryName:
		return claims.Entry{}, nil, backendkit.Wrap(topo.InvalidArgument, q.Path, fmt.Errorf("resume info of backend %q", ri.Backend))
	case ri.Key != key:
		return claims.Entry{}, nil, backendkit.Wrap(topo.InvalidArgument, q.Path, fmt.Errorf("resume info of another election (key %q)", ri.Key))
	case ri.ID != id:
		return claims.Entry{}, nil, backendkit.Wrap(topo.InvalidArgument, q.Path, fmt.Errorf("resume info of another participant id (%q)", ri.ID))
	case ri.Session == "" || ri.Token == 0 || terr != nil || ttl < time.Second:
		return claims.Entry{}, nil, backendkit.Wrap(topo.InvalidArgument, q.Path, errors.New("malformed resume info"))
	}
	if err := backendkit.Ready(ctx, q.Path, c.isClosed); err != nil {
		return claims.Entry{}, nil, err
	}
	sess, err := c.adoptSession(ctx, q.Path, ri.Session, ttl)
	if err != nil {
		return claims.Entry{}, nil, err
	}
	e := claims.Entry{Token: int64(ri.Token), Key: grantedKey(key, ri.LockIndex), Session: sess.id, Contents: id, Granted: true}
	held, err := d.Held(ctx, q, sess.view, e)
	if err != nil || !held {
		c.forgetSession(sess, errSessionClosed) // not destroyed: it may hold other keys of the earlier process
		if err == nil {
			err = claims.ErrNotHeld
		}
		return claims.Entry{}, nil, err
	}
	c.grants.set(ri.Token, true)
	return e, sess.view, nil
}

// adoptSession renews the session id and makes it this Conn's, own.
// ErrNotHeld when Consul no longer knows it, NodeExists when this Conn
// holds it already.
func (c *Conn) adoptSession(ctx context.Context, path, id string, ttl time.Duration) (*session, error) {
	c.mu.Lock()
	for s := range c.sessions {
		if s.id == id {
			c.mu.Unlock()
			return nil, backendkit.Wrap(topo.NodeExists, path, errors.New("this Conn holds the session already"))
		}
	}
	c.mu.Unlock()
	sent := time.Now()
	entry, _, err := c.client.Session().Renew(id, c.writeOptions(ctx))
	switch {
	case err != nil:
		return nil, c.convertError(ctx, err, path)
	case entry == nil: // Consul's 404
		return nil, claims.ErrNotHeld
	}
	if d, err := time.ParseDuration(entry.TTL); err == nil && d >= time.Second {
		ttl = d
	}
	return c.startSession(path, id, ttl, true, sent)
}
