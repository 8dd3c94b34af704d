package etcd2topo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

const nativeLayout = "etcd-native"

// NewNativeElection joins the election on prefix, a raw etcd key (as
// given to concurrency.NewElection or `etcdctl elect`, not under the
// root), as participant id, in etcd's own layout: a candidate is the key
// <prefix>/<lease id in hex> on that lease, holding its value. Every key
// under <prefix>/, at any depth, leased or not, is a candidate (as for
// concurrency.Election, or two could lead at once); the oldest leads, so
// both see one leader and value, and tokens grow.
//
// It differs from NewLeaderParticipation in: Leader.ID (GetCurrentLeaderID,
// WaitForNewLeader) is the leader key's name under <prefix>/, not id;
// WaitForLeadership publishes id as the value, Campaign its value; Token
// is the key's CreateRevision; Proclaim rewrites the key in place, guarded
// on its CreateRevision and lease, and Resign deletes it, on its
// CreateRevision; ResumeInfo goes to ResumeNativeElection. Leases, their
// loss, and a second participation of one prefix through one Conn (the
// next shared lease) are as for NewLeaderParticipation.
//
// It returns InvalidArgument for an empty prefix or id, or a prefix whose
// range contains the root; InvalidPath for a prefix inside the root whose
// rest is a canonical path (its keys would be the Conn's files or
// entries); Closed after Close. Other prefixes inside the root (a leading
// "/" after it, an empty segment) and outside it are accepted, but other
// Conns' roots are unknown: keep native prefixes out of every topokit
// tree. Nothing is written until WaitForLeadership or Campaign. The
// participation is safe for concurrent use.
func (c *Conn) NewNativeElection(prefix, id string) (topo.LeaderParticipation, error) {
	if err := c.checkNative(prefix, id); err != nil {
		return nil, err
	}
	return c.eng.Participate(claims.Queue{Path: prefix, Native: true}, id, []byte(id)), nil
}

// checkNative runs NewNativeElection's checks.
func (c *Conn) checkNative(prefix, id string) error {
	if prefix == "" {
		return backendkit.Wrap(topo.InvalidArgument, prefix, errors.New("etcd2topo: empty native election prefix"))
	}
	kp, rp := prefix+"/", c.rootPrefix
	if rp != "" && strings.HasPrefix(rp, kp) {
		return backendkit.Wrap(topo.InvalidArgument, prefix,
			fmt.Errorf("etcd2topo: native election prefix %q covers the Conn's root %q", prefix, rp))
	}
	if rel, inside := strings.CutPrefix(prefix, rp); inside {
		if p, err := topo.CleanFilePath(rel); err == nil && p == rel {
			why := "its keys would be files of the Conn"
			if topo.IsReserved(p) {
				why = "its keys would be lock or election entries of the Conn (reserved name)"
			}
			return backendkit.Wrap(topo.InvalidPath, prefix,
				fmt.Errorf("etcd2topo: native election prefix %q is inside the Conn's root %q: %s", prefix, rp, why))
		}
	}
	if id == "" {
		return backendkit.Wrap(topo.InvalidArgument, prefix, errors.New("etcd2topo: empty participant id"))
	}
	return c.closedErr(prefix)
}

// nativeEntry is the engine's view of kv, a key under q's prefix. Native
// entries are ordered by CreateRevision, the token; Proclaim moves the
// ModRevision, so an entry is ours while its CreateRevision and lease
// are. Contents is the key's name under the prefix (Leader.ID) when read
// from the store, the participant's id for our own entries (Create,
// Resume); Session is leaseName (decimal, though the key is hex).
func nativeEntry(q claims.Queue, kv *mvccpb.KeyValue) claims.Entry {
	e := claims.Entry{Token: kv.CreateRevision, Key: string(kv.Key), Session: leaseName(kv.Lease),
		Contents: string(kv.Key[len(q.Path)+1:]), ValueRev: kv.ModRevision}
	if len(kv.Value) > 0 {
		e.Value = kv.Value
	}
	return e
}

// nativeHeldCmps hold exactly while native entry e lives, on lease l.
func nativeHeldCmps(e claims.Entry, l *lease) []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(e.Key), "=", e.Token),
		clientv3.Compare(clientv3.LeaseValue(e.Key), "=", l.id),
	}
}

func nativeKey(prefix string, id clientv3.LeaseID) string {
	return fmt.Sprintf("%s/%x", prefix, int64(id))
}

// ResumeNativeElection takes back through this Conn the candidacy a
// native participation of prefix and id described with ResumeInfo, like
// concurrency.ResumeElection, as ResumeLeaderParticipation does in the
// Vitess layout (see there: the precondition, what is kept alive and
// revoked, and the errors); info issued for another layout is
// InvalidArgument. Other errors are NewNativeElection's.
func (c *Conn) ResumeNativeElection(ctx context.Context, prefix, id string, info []byte) (topo.LeaderParticipation, error) {
	if err := c.checkNative(prefix, id); err != nil {
		return nil, err
	}
	return c.eng.ResumeParticipation(ctx, claims.Queue{Path: prefix, Native: true}, id, []byte(id), info)
}
