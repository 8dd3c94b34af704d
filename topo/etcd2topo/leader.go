package etcd2topo

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo/claims"
)

// valuesDir is the segment of the published values under
// <root>/elections/ (doc.go).
const valuesDir = "\x00values"

// valuesPrefix returns the prefix of election n's published values.
func (c *Conn) valuesPrefix(n string) string {
	return c.key(electionsDir + "/" + valuesDir + "/" + n + "/")
}

// Head implements claims.Driver: one read of the queue and the values at
// one revision (doc.go says which value is the head's). With watch, two
// watches of them, opened before the read, close changed at their first
// event after it, or when they end (the engine reads again).
func (d driver) Head(ctx context.Context, q claims.Queue, watch bool) (claims.Entry, bool, <-chan struct{}, error) {
	c := d.c
	var ws []clientv3.WatchChan
	cancel := func() {}
	if watch {
		var wctx context.Context
		wctx, cancel = c.watchContext(ctx)
		watched := []string{c.queuePrefix(q), c.valuesPrefix(q.Path)}
		if q.Native {
			watched = watched[:1] // values are in the entries
		}
		for _, p := range watched {
			ws = append(ws, c.cli.Watch(wctx, p, clientv3.WithPrefix(), clientv3.WithCreatedNotify()))
		}
		for _, w := range ws {
			if err := c.watchCreated(ctx, w, q.Path); err != nil {
				cancel()
				if errors.Is(err, errRewatch) {
					err = rpctypes.ErrNoLeader
				}
				return claims.Entry{}, false, nil, err
			}
		}
	}
	head, ok, rev, err := d.readHead(ctx, q)
	if err != nil || !watch {
		cancel()
		return head, ok, nil, err
	}
	changed := make(chan struct{})
	go func() {
		defer cancel()
		defer close(changed)
		for {
			var wr clientv3.WatchResponse
			var open bool
			select {
			case wr, open = <-ws[0]:
			case wr, open = <-ws[len(ws)-1]:
			}
			if !open || wr.Canceled || wr.Err() != nil {
				return
			}
			for _, ev := range wr.Events {
				if ev.Kv.ModRevision > rev {
					return
				}
			}
		}
	}()
	return head, ok, changed, nil
}

// readHead is Head's read, at revision rev; native: the first-created
// key, as concurrency.Election's Leader reads it.
func (d driver) readHead(ctx context.Context, q claims.Queue) (head claims.Entry, ok bool, rev int64, err error) {
	c := d.c
	prefix, vprefix := c.queuePrefix(q), c.valuesPrefix(q.Path)
	if q.Native {
		resp, err := c.cli.Get(ctx, prefix, clientv3.WithFirstCreate()...)
		if err != nil {
			return head, false, 0, err
		}
		if ok = len(resp.Kvs) > 0; ok {
			head = nativeEntry(q, resp.Kvs[0])
		}
		return head, ok, resp.Header.Revision, nil
	}
	resp, err := c.cli.Txn(ctx).Then(
		clientv3.OpGet(prefix, clientv3.WithPrefix()),
		clientv3.OpGet(vprefix, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return head, false, 0, err
	}
	var kv *mvccpb.KeyValue // the oldest entry
	for _, x := range resp.Responses[0].GetResponseRange().Kvs {
		if queueEntry(x, prefix) && (kv == nil || x.ModRevision < kv.ModRevision) {
			kv = x
		}
	}
	ok = kv != nil
	if ok {
		head = entryOf(kv)
		vkey := c.valueKey(q, head.Key)
		for _, val := range resp.Responses[1].GetResponseRange().Kvs {
			if string(val.Key) == vkey && val.Lease == kv.Lease && val.ModRevision >= kv.CreateRevision {
				if len(val.Value) > 0 {
					head.Value = val.Value
				}
				head.ValueRev = val.ModRevision
			}
		}
	}
	return head, ok, resp.Header.Revision, nil
}

// SetValue implements claims.Driver: one transaction puts the value key
// on the entry's lease if the entry's ModRevision is its token, the whole
// guard: then the key was last written by the entry's own put (one
// revision, one transaction), on that lease; a deleted entry has
// ModRevision 0, and a gone lease fails the put.
func (d driver) SetValue(ctx context.Context, q claims.Queue, s *claims.Session, e claims.Entry, value []byte) error {
	l := s.Ref().(*lease)
	txn := d.c.cli.Txn(ctx)
	if q.Native {
		txn = txn.If(nativeHeldCmps(e, l)...).Then(clientv3.OpPut(e.Key, string(value), clientv3.WithLease(l.id)))
	} else {
		txn = txn.If(clientv3.Compare(clientv3.ModRevision(e.Key), "=", e.Token)).
			Then(clientv3.OpPut(d.c.valueKey(q, e.Key), string(value), clientv3.WithLease(l.id)))
	}
	resp, err := txn.Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || err == nil && !resp.Succeeded {
		return claims.ErrNotHeld
	}
	return err
}
