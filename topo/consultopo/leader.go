package consultopo

import (
	"context"
	"fmt"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// valueKey returns the value key of sessionID in the election key.
func valueKey(key, sessionID string) string { return key + "/" + valuesDir + "/" + sessionID }

// valueOp publishes value at key, locked by sess so that it goes with the
// session, or, without publish, deletes it.
func valueOp(key string, value []byte, publish bool, sess *session) *api.TxnOp {
	if !publish {
		return &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: key}}
	}
	if value == nil {
		value = []byte{}
	}
	return &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: key, Value: value, Flags: api.LockFlagValue, Session: sess.id}}
}

// errLeaderValueSize is the InvalidArgument error of a published value
// over maxTxnValue (360 KiB; topo.MaxValueSize is larger).
func errLeaderValueSize(path string) error {
	return backendkit.Wrap(topo.InvalidArgument, path, fmt.Errorf("a leader value on Consul is at most %d bytes (it is written in a transaction)", maxTxnValue))
}

// Head implements claims.Driver without reading the queue
// (docs/layout-consul.md, "Leader and Observe"): the election key, then
// its holder's value key in a transaction checking the key's ModifyIndex
// (again when it changed), all consistent. With watch, a keys-only read
// of the prefix comes first, and changed closes when a blocking keys-only
// query from its index returns.
func (d driver) Head(ctx context.Context, q claims.Queue, watch bool) (claims.Entry, bool, <-chan struct{}, error) {
	c := d.c
	if err := backendkit.Ready(ctx, q.Path, c.isClosed); err != nil {
		return claims.Entry{}, false, nil, err
	}
	key := d.storeKey(q)
	var since uint64
	if watch {
		_, meta, err := c.kv.Keys(key, "/", c.consistentOptions(ctx))
		if err != nil {
			return claims.Entry{}, false, nil, err
		}
		since = meta.LastIndex
	}
	var head claims.Entry
	var lead *api.KVPair
	for {
		var err error
		if lead, _, err = c.kv.Get(key, c.consistentOptions(ctx)); err != nil {
			return claims.Entry{}, false, nil, err
		}
		if lead == nil || lead.Session == "" {
			lead = nil
			break
		}
		head = grantedEntry(lead, lead.Session, string(lead.Value))
		vk := valueKey(key, lead.Session)
		ok, resp, _, err := c.client.Txn().Txn(api.TxnOps{
			{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: key, Index: lead.ModifyIndex}},
			{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: vk}},
		}, c.consistentOptions(ctx))
		if err != nil {
			return claims.Entry{}, false, nil, err
		}
		if !ok {
			continue // the key changed between the two reads
		}
		if kv := result(resp, vk); kv != nil && kv.Session == lead.Session {
			head.Value, head.ValueRev = value(kv), int64(kv.ModifyIndex)
		}
		break
	}
	if !watch {
		return head, lead != nil, nil, nil
	}
	changed := make(chan struct{})
	go func() {
		defer close(changed)
		wctx, cancel := backendkit.Linked(ctx, c.ctx)
		defer cancel()
		_, _, _ = c.kv.Keys(key, "/", c.blocking(c.consistentOptions(wctx), nextIndex(0, since)))
	}()
	return head, lead != nil, changed, nil
}

// SetValue implements claims.Driver (Proclaim): one transaction
// (checkedTxn) checking the election key's token and writing the value
// key, which only this session locks. ErrNotHeld, nothing written, ends
// the term (Session.LoseEntry).
func (d driver) SetValue(ctx context.Context, q claims.Queue, v *claims.Session, e claims.Entry, val []byte) error {
	if len(val) > maxTxnValue {
		return errLeaderValueSize(q.Path)
	}
	sess := sessionOf(v)
	if !e.Granted || !sess.alive() {
		return claims.ErrNotHeld
	}
	key, _ := splitGranted(e)
	_, err := d.c.checkedTxn(ctx, q.Path, api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: key, Index: uint64(e.Token)}},
		valueOp(valueKey(key, sess.id), val, true, sess),
	})
	if err == claims.ErrNotHeld {
		v.LoseEntry(e.Key, e.Token)
	}
	return err
}
