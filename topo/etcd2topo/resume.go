package etcd2topo

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// vitessLayout names the default layout in ResumeInfo.
const vitessLayout = "vitess"

// resumeInfo is ResumeInfo's JSON: Election in the Vitess layout, Prefix
// in the native one (each layout's JSON keeps its fields and order).
type resumeInfo struct {
	Backend  string `json:"backend"`
	Layout   string `json:"layout"`
	Election string `json:"election,omitempty"`
	Prefix   string `json:"prefix,omitempty"`
	ID       string `json:"id"`
	Key      string `json:"key"`
	Lease    int64  `json:"lease"`
	Rev      int64  `json:"create_revision"`
}

// ResumeInfo implements claims.Driver.
func (d driver) ResumeInfo(q claims.Queue, s *claims.Session, e claims.Entry) ([]byte, error) {
	r := resumeInfo{Backend: FactoryName, Layout: vitessLayout, Election: q.Path, ID: e.Contents,
		Key: e.Key, Lease: int64(s.Ref().(*lease).id), Rev: e.Token}
	if q.Native {
		r.Layout, r.Election, r.Prefix = nativeLayout, "", q.Path
	}
	return json.Marshal(r)
}

// Resume implements claims.Driver: it renews the entry's lease once,
// reads the entry (created at the same revision, on that lease, holding
// id), and keeps the lease alive from this Conn as the entry's own (see
// ResumeLeaderParticipation).
func (d driver) Resume(ctx context.Context, q claims.Queue, id string, info []byte) (claims.Entry, *claims.Session, error) {
	c := d.c
	r, err := c.parseResume(q, id, info)
	if err != nil {
		return claims.Entry{}, nil, err
	}
	if err := backendkit.Ready(ctx, q.Path, c.isClosed); err != nil {
		return claims.Entry{}, nil, err
	}
	c.mu.Lock()
	held := c.holdsLease(clientv3.LeaseID(r.Lease))
	c.mu.Unlock()
	if held {
		return claims.Entry{}, nil, errLeaseHeld(q.Path)
	}
	if !c.takeKey(r.Key) {
		return claims.Entry{}, nil, backendkit.Wrap(topo.InvalidArgument, q.Path,
			errors.New("etcd2topo: resume info: the candidacy is owned by a participation of this Conn"))
	}
	l, err := c.adoptLease(ctx, clientv3.LeaseID(r.Lease), q.Path)
	if err != nil {
		c.freeKey(r.Key)
		return claims.Entry{}, nil, err
	}
	e := claims.Entry{Token: r.Rev, Key: r.Key, Session: leaseName(r.Lease), Contents: id}
	resp, err := c.cli.Get(ctx, r.Key)
	if err != nil || len(resp.Kvs) != 1 || !stillOurs(q, resp.Kvs[0], e, l) || (!q.Native && string(resp.Kvs[0].Value) != id) {
		c.freeKey(r.Key)
		l.markLost()
		if err != nil {
			return claims.Entry{}, nil, err
		}
		return claims.Entry{}, nil, claims.ErrNotHeld
	}
	if err := c.keep(l, q.Path); err != nil {
		c.freeKey(r.Key)
		return claims.Entry{}, nil, err
	}
	return e, l.sess, nil
}

func errLeaseHeld(path string) error {
	return backendkit.Wrap(topo.NodeExists, path, errors.New("etcd2topo: this Conn holds the lease already"))
}

// holdsLease reports whether c keeps lease id alive already; c.mu held,
// so it does not call lost(), which may declare the loss, ending claims.
func (c *Conn) holdsLease(id clientv3.LeaseID) bool {
	for x := range c.leases {
		if x.id == id && x.lostCtx.Err() == nil {
			return true
		}
	}
	return false
}

// parseResume checks info, a ResumeInfo, for q and id.
func (c *Conn) parseResume(q claims.Queue, id string, info []byte) (resumeInfo, error) {
	bad := func(why string) error {
		return backendkit.Wrap(topo.InvalidArgument, q.Path, errors.New("etcd2topo: resume info: "+why))
	}
	var r resumeInfo
	if err := json.Unmarshal(info, &r); err != nil {
		return r, bad(err.Error())
	}
	layout, name, key, what := vitessLayout, r.Election, c.electionPrefix(q.Path)+strconv.FormatInt(r.Lease, 10), "election"
	whose := "an etcd election's"
	if q.Native {
		layout, name, key, what = nativeLayout, r.Prefix, nativeKey(q.Path, clientv3.LeaseID(r.Lease)), "prefix"
		whose = "a native etcd election's"
	}
	switch {
	case r.Backend != FactoryName || r.Layout != layout:
		return r, bad("not " + whose)
	case name != q.Path || r.ID != id:
		return r, bad("issued for another " + what + " or id")
	case r.Lease <= 0 || r.Rev <= 0 || r.Key != key:
		return r, bad("malformed key, lease or revision")
	}
	return r, nil
}

// adoptLease renews lease id once and returns it as an entry's own, not
// kept alive yet; claims.ErrNotHeld when it is gone.
func (c *Conn) adoptLease(ctx context.Context, id clientv3.LeaseID, path string) (*lease, error) {
	sent := time.Now()
	ka, err := c.cli.KeepAliveOnce(ctx, id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || err == nil && ka.TTL <= 0 {
		return nil, claims.ErrNotHeld
	}
	if err != nil {
		return nil, err
	}
	l := newLease(id, time.Duration(ka.TTL)*time.Second, sent)
	l.own = true
	return l, nil
}

// ResumeLeaderParticipation implements topo.Conn; a native election's
// info goes to ResumeNativeElection with name as the prefix. It renews
// the candidacy's lease once, checks that the entry is still there, and
// keeps the lease alive from this Conn until Stop or Resign revokes it,
// with everything else the old process had on it. That process must be
// gone: nothing tells a live one, and both pass Check and IfHeld for the
// same term until the lease is revoked. It returns LockLost when the
// lease or entry is gone; InvalidArgument for info malformed or issued
// for another election, id, backend or layout, or whose entry a
// participation of this Conn owns; NodeExists when this Conn holds the
// lease already (resume one candidacy per lease); the errors of
// NewLeaderParticipation; Timeout, Interrupted, Unavailable and
// PermissionDenied from etcd.
func (c *Conn) ResumeLeaderParticipation(ctx context.Context, name, id string, info []byte) (topo.LeaderParticipation, error) {
	if err := backendkit.CheckContext(ctx, name); err != nil {
		return nil, err
	}
	var r resumeInfo
	if json.Unmarshal(info, &r) == nil && r.Backend == FactoryName && r.Layout == nativeLayout {
		return c.ResumeNativeElection(ctx, name, id, info)
	}
	return c.eng.ResumeLeaderParticipation(ctx, name, id, info)
}
