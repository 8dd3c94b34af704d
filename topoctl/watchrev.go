package topoctl

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/etcd2topo"
)

// checkWatchRev refuses watch --rev on a backend that keeps no history to
// watch from: only etcd does (a revision is etcd's store-wide version;
// ZooKeeper, Consul and memorytopo cannot replay past changes).
func (o *options) checkWatchRev() error {
	if o.impl == etcd2topo.FactoryName {
		return nil
	}
	return usagef("watch --rev: NoImplementation: the %s backend keeps no history of changes to replay from a revision (only etcd2 does); watch without --rev prints the current value, then every change", o.impl)
}

// watchFromRevision is watch --rev: it prints every change of the file p
// (or, with prefix, of every file whose path starts with p) from etcd's
// history, from revision rev on, then the live changes, until ctx ends.
// A deletion does not end it. It resumes from the revision after the last
// one printed when the watch breaks (no leader, a member gone), and fails
// with Compacted when the history it needs was compacted.
func (o *options) watchFromRevision(ctx context.Context, st *store, p string, prefix bool, rev int64) error {
	cctx, cancel := o.callCtx(ctx)
	conn, err := etcd2topo.NewConnContext(cctx, o.etcdOptions(st.spec.addr), st.spec.root)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	cli := conn.Client()
	// The layout of docs/layout-etcd.md: the key of p is <root>/p.
	rootPrefix := ""
	if st.spec.root != "" {
		rootPrefix = strings.TrimRight(st.spec.root, "/") + "/"
	}
	key := rootPrefix + p
	next := rev
	for {
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		opts := []clientv3.OpOption{clientv3.WithRev(next)}
		if prefix {
			opts = append(opts, clientv3.WithPrefix())
		}
		var werr error
		for wr := range cli.Watch(wctx, key, opts...) {
			if wr.CompactRevision != 0 {
				wcancel()
				return backendkit.Wrap(topo.Compacted, displayPath(p), fmt.Errorf("revision %d was compacted: the oldest revision etcd still has is %d (watch --rev %d or later)", next, wr.CompactRevision, wr.CompactRevision))
			}
			if werr = wr.Err(); werr != nil {
				break
			}
			for _, ev := range wr.Events {
				rel := strings.TrimPrefix(string(ev.Kv.Key), rootPrefix)
				next = ev.Kv.ModRevision + 1
				if topo.IsReserved(rel) {
					continue // lock and election entries are not files
				}
				we := watchEvent{Path: displayPath(rel), Revision: ev.Kv.ModRevision}
				if ev.Type == mvccpb.DELETE {
					we.Deleted = true
				} else {
					we.Version, we.Value = jsonVersion(strconv.FormatInt(ev.Kv.ModRevision, 10)), ev.Kv.Value
				}
				if err := o.printEvent(we); err != nil {
					wcancel()
					return err
				}
			}
		}
		wcancel()
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(werr, rpctypes.ErrPermissionDenied) || errors.Is(werr, rpctypes.ErrGRPCPermissionDenied) {
			return backendkit.Wrap(topo.PermissionDenied, displayPath(p), werr)
		}
		if werr == nil {
			werr = errors.New("the watch channel closed")
		}
		if err := o.rewatchWait(ctx, ctx, p, backendkit.Wrap(topo.Unavailable, p, werr)); err != nil {
			return endOfWatch(ctx, err)
		}
	}
}
