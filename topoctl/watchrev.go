package topoctl

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// revisionWatcher is implemented by a backend's Conn whose store keeps a
// history of changes to watch from (etcd2topo's).
type revisionWatcher interface {
	WatchFromRevision(ctx context.Context, p string, prefix bool, rev int64, fn func(backendkit.RevisionEvent) error) (int64, error)
}

// historyBackend is the one bundled backend whose store keeps a history
// of changes (etcd's revisions).
const historyBackend = "etcd2"

// checkWatchRev refuses watch --rev on a backend that keeps no history to
// watch from: only etcd does (a revision is etcd's store-wide version;
// ZooKeeper, Consul and memorytopo cannot replay past changes).
func (o *watching) checkWatchRev() error {
	if o.stores.impl == historyBackend {
		return nil
	}
	return usagef("watch --rev: NoImplementation: the %s backend keeps no history of changes to replay from a revision (only etcd2 does); watch without --rev prints the current value, then every change", o.stores.impl)
}

// watchFromRevision is watch --rev: it prints every change of the file p
// (or, with prefix, of every file whose path starts with p) from the
// store's history, from revision rev on, then the live changes, until ctx
// ends. A deletion does not end it. It resumes from the revision after
// the last one printed when the watch breaks (no leader, a member gone),
// and fails with Compacted when the history it needs was compacted.
func (o *watching) watchFromRevision(ctx context.Context, st *store, p string, prefix bool, rev int64) error {
	rw, ok := topo.ConnAs[revisionWatcher](st.conn)
	if !ok {
		return &topo.Error{Code: topo.NoImplementation, Path: displayPath(p), Err: errNoHistory}
	}
	next := rev
	for {
		var err error
		next, err = rw.WatchFromRevision(ctx, p, prefix, next, func(ev backendkit.RevisionEvent) error {
			we := watchEvent{Path: displayPath(ev.Path), Revision: ev.Revision, Deleted: ev.Deleted}
			if !ev.Deleted {
				we.Version, we.Value = jsonVersion(strconv.FormatInt(ev.Revision, 10)), ev.Value
			}
			return o.printEvent(we)
		})
		var ce *backendkit.CompactedError
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &ce):
			return backendkit.Wrap(topo.Compacted, displayPath(p), fmt.Errorf("revision %d was compacted: the oldest revision etcd still has is %d (watch --rev %d or later)", ce.Revision, ce.Oldest, ce.Oldest))
		case topo.IsErrType(err, topo.Unavailable):
			if err := o.rewatchWait(ctx, ctx, p, err); err != nil {
				return endOfWatch(ctx, err)
			}
		default:
			return err
		}
	}
}

// errNoHistory is watch --rev's error on a store that keeps no history.
var errNoHistory = errors.New("the store keeps no history of changes to replay from a revision")
