package etcd2topo

// Native elections: leader elections in etcd's own layout, that of
// go.etcd.io/etcd/client/v3/concurrency.Election and `etcdctl elect`
// (NewNativeElection describes it). What its doc leaves out:
//
//   - every key under <prefix>/ is a candidate, whatever its depth and
//     whether or not it has a lease: concurrency.Election counts them all,
//     so topokit must too, or the two could lead at once;
//   - a key put there by hand is known by what follows <prefix>/; Campaign
//     publishes its own value instead of the id; Resign deletes the key,
//     compared on its CreateRevision;
//   - the token (the leader key's CreateRevision) grows: the leader is the
//     oldest key, so every later term's key was created later, whoever
//     campaigned with it;
//   - a second participation of one prefix through one Conn takes the
//     next shared lease;
//   - a prefix inside the root that no canonical path can start with (a
//     leading "/" after the root, an empty segment, ...) is accepted, as is
//     every prefix outside the root; other Conns' roots are not known to
//     the Conn: keep native prefixes out of every topokit tree.

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

// nativeLayout names the layout in ResumeInfo.
const nativeLayout = "etcd-native"

// NewNativeElection joins the election on the etcd-native prefix prefix
// (the raw etcd key given to concurrency.NewElection or `etcdctl elect`,
// not relative to the Conn's root) as a participant that publishes id
// when it joins with WaitForLeadership. The layout is etcd's own: a
// candidate is the key <prefix>/<lease id in hex> on that lease, holding
// the value; every key under <prefix>/ is a candidate and the one with the
// lowest CreateRevision leads; so concurrency.Election campaigners and
// observers, and topokit's, see one leader and one value and never lead
// at once. The returned participation is the claims engine's (see
// claims.Engine.Participate: the same driver as the Vitess layout, in its
// native variant), with these differences from the Vitess layout:
// Leader.ID (and GetCurrentLeaderID, WaitForNewLeader) is the leader
// key's name under <prefix>/ (its lease id in hex), not id;
// WaitForLeadership publishes id as the value (Leader.Value is then id,
// not nil); Token is the key's CreateRevision; Proclaim rewrites the key
// in place, guarded on its CreateRevision and lease; ResumeInfo is taken
// back with ResumeNativeElection. The candidate key rests on the Conn's
// shared lease (or one of its own), and leadership ends when the lease
// can no longer be proven alive, as for NewLeaderParticipation.
//
// It returns InvalidArgument for an empty prefix or id, or a prefix whose
// range contains the Conn's root; InvalidPath for a prefix inside the
// root whose remainder is a canonical path (reserved or not: its keys
// would be the Conn's files or lock and election entries); Closed after
// Close. Nothing is written until WaitForLeadership or Campaign. The
// participation is safe for concurrent use.
func (c *Conn) NewNativeElection(prefix, id string) (topo.LeaderParticipation, error) {
	if err := c.checkNative(prefix, id); err != nil {
		return nil, err
	}
	return c.eng.Participate(claims.Queue{Path: prefix, Native: true}, id, []byte(id)), nil
}

// checkNative runs NewNativeElection's checks: the prefix (refused when
// empty or overlapping the Conn's own tree, see the head of native.go),
// the id, then Closed.
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

// The native variant of the driver: its entries are every key under
// <prefix>/ (any depth, with a lease or not), ordered by CreateRevision,
// which is the token; a Proclaim rewrites the entry in place, so an entry
// is ours while its CreateRevision and lease are (its ModRevision moves).
// An entry's Contents is its name under the prefix when read from the
// store (List, Head: what Leader.ID reports), and the participant's id
// for our own entries (Create, Resume: what ResumeInfo carries). Its
// Session is leaseName of its lease (decimal, though the key names the
// lease in hexadecimal), as for every other entry: SessionTTL reads it.

// nativeEntry is the engine's view of kv, a key under q's prefix.
func nativeEntry(q claims.Queue, kv *mvccpb.KeyValue) claims.Entry {
	e := claims.Entry{Token: kv.CreateRevision, Key: string(kv.Key), Session: leaseName(kv.Lease),
		Contents: string(kv.Key[len(q.Path)+1:]), ValueRev: kv.ModRevision}
	if len(kv.Value) > 0 {
		e.Value = kv.Value
	}
	return e
}

// nativeHeldCmps are the compares that hold exactly while the native
// entry e lives in the store: its key created at its token, on lease l.
func nativeHeldCmps(e claims.Entry, l *lease) []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(e.Key), "=", e.Token),
		clientv3.Compare(clientv3.LeaseValue(e.Key), "=", l.id),
	}
}

// nativeKey returns the key of lease id's candidate under prefix.
func nativeKey(prefix string, id clientv3.LeaseID) string {
	return fmt.Sprintf("%s/%x", prefix, int64(id))
}

// ResumeNativeElection takes back, through this Conn, the candidacy that a
// native participation (of prefix and id, typically in a process that
// restarted) described with ResumeInfo, like concurrency.ResumeElection:
// it renews the candidacy's lease once (and from then on keeps it alive
// from this Conn), checks that the key still exists with the same
// CreateRevision on that lease, and returns a participation that owns the
// key: WaitForLeadership and Campaign wait from the key's place (or
// return at once, with the same term token, if it leads), Resign and
// Stop revoke the lease (everything else the old process had on that
// lease goes with it; until then this Conn keeps all of it alive). The
// earlier process must be gone: a live one is not told, and leads with
// the same term until the lease is revoked (see ResumeLeaderParticipation). It
// returns LockLost when the lease or key is gone; InvalidArgument for
// info that is malformed or was issued for another prefix, id, backend
// or layout, or whose key another participation of this Conn owns;
// NodeExists when this Conn holds the lease already; the
// errors of NewNativeElection; Timeout, Interrupted, Unavailable,
// PermissionDenied from etcd.
func (c *Conn) ResumeNativeElection(ctx context.Context, prefix, id string, info []byte) (topo.LeaderParticipation, error) {
	if err := c.checkNative(prefix, id); err != nil {
		return nil, err
	}
	return c.eng.ResumeParticipation(ctx, claims.Queue{Path: prefix, Native: true}, id, []byte(id), info)
}
