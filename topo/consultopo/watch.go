package consultopo

import (
	"context"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// watchRetryMax caps the backoff between blocking queries that failed (for
// example while the agent restarts).
const watchRetryMax = 2 * time.Second

// nextIndex returns the WaitIndex for the blocking query after one that
// waited on prev and returned last: last, or 0 when the index went backwards
// (the agent lost its state, e.g. a restarted dev agent), which makes the
// next query return at once.
func nextIndex(prev, last uint64) uint64 {
	if last < prev {
		return 0
	}
	return last
}

// pollLoop runs the blocking queries behind Watch, WatchRecursive and
// Monitor from index until handle (given each answer's X-Consul-Index)
// returns false (nil), or wctx ends (wctx's error). Failed queries are
// retried after a backoff from 50ms doubling up to watchRetryMax; a
// permanent error (an ACL refusal, see isPermanent) is not: it is returned.
func (c *Conn) pollLoop(wctx context.Context, index uint64, query func(*api.QueryOptions) (*api.QueryMeta, error), handle func(index uint64) bool) error {
	retry := 50 * time.Millisecond
	for {
		meta, err := query(c.blocking(c.queryOptions(wctx), index))
		switch {
		case wctx.Err() != nil:
			return wctx.Err()
		case isPermanent(err):
			return err
		case err != nil:
			// The agent may come back empty, its index lower (a restarted
			// dev agent): ask for the state at once, not for a change
			// past an index it may not reach for a WatchPollDuration.
			index = 0
			if !backendkit.Sleep(wctx, retry) {
				return wctx.Err()
			}
			retry = min(2*retry, watchRetryMax)
			continue
		}
		retry = 50 * time.Millisecond
		index = nextIndex(index, meta.LastIndex)
		if !handle(meta.LastIndex) {
			return nil
		}
	}
}

// Watch implements topo.Conn.Watch with blocking queries on the file's key
// (each waiting up to Options.WatchPollDuration). The current value comes
// back at once (NoNode, with no channel, when the key is absent). A change
// of ModifyIndex sends the new value; a delete sends NoNode and closes the
// channel, also when the key was created again before the next answer (a
// new CreateIndex: as on etcd and memorytopo, the watch ends with the file
// it watched); ctx ending or Close sends Interrupted and closes it. Store errors
// (agent unreachable or restarting) are retried with backoff; a restarted
// dev agent comes back empty, which the watch reports as a delete. An ACL
// refusal is permanent: it is sent as a PermissionDenied event and the
// channel closes. Other errors as for Get. Revision (see topo.WatchData) is
// the X-Consul-Index of the read that delivered the value (a read of a key
// that exists returns its ModifyIndex; of an absent key, the KV table's
// index), or the highest one seen before if that is lower.
func (c *Conn) Watch(ctx context.Context, filePath string) (*topo.WatchData, <-chan *topo.WatchData, error) {
	p, err := backendkit.Begin(ctx, filePath, topo.CleanFilePath, c.isClosed)
	if err != nil {
		return nil, nil, err
	}
	key := c.key(p)
	pair, meta, err := c.kv.Get(key, c.queryOptions(ctx))
	if err != nil {
		return nil, nil, c.convertError(ctx, err, p)
	}
	if pair == nil {
		return nil, nil, topo.NewError(topo.NoNode, p)
	}
	current := &topo.WatchData{Contents: value(pair), Version: topo.NumericVersion(pair.ModifyIndex), Revision: int64(meta.LastIndex)}

	wctx, cancel := backendkit.Linked(ctx, c.ctx)
	ch := make(chan *topo.WatchData, 1)
	go func() {
		defer close(ch)
		defer cancel()
		version, created, mark := pair.ModifyIndex, pair.CreateIndex, current.Revision
		var got *api.KVPair // the answer to the last query
		err := c.pollLoop(wctx, meta.LastIndex, func(q *api.QueryOptions) (meta *api.QueryMeta, err error) {
			got, meta, err = c.kv.Get(key, q)
			return meta, err
		}, func(index uint64) bool {
			mark = max(mark, int64(index))
			if got != nil && got.CreateIndex != created {
				// Deleted and created again between two answers: the
				// file watched is gone (the new one is another file).
				got = nil
			}
			if got == nil {
				backendkit.Send(wctx, ch, &topo.WatchData{Err: topo.NewError(topo.NoNode, p), Revision: mark})
				return false
			}
			if got.ModifyIndex == version {
				return true
			}
			version = got.ModifyIndex
			return backendkit.Send(wctx, ch, &topo.WatchData{Contents: value(got), Version: topo.NumericVersion(version), Revision: mark})
		})
		switch {
		case isPermanent(err):
			backendkit.Send(wctx, ch, &topo.WatchData{Err: c.convertError(wctx, err, p)})
		case err != nil || got != nil: // wctx ended (else NoNode was the last event)
			// Delivered even though wctx ended: the channel has room or
			// the reader is draining it, as the contract requires.
			ch <- &topo.WatchData{Err: backendkit.Wrap(topo.Interrupted, p, context.Cause(wctx))}
		}
	}()
	return current, ch, nil
}

// WatchRecursive implements topo.Conn.WatchRecursive with blocking queries
// over the key prefix (each waiting up to Options.WatchPollDuration). Each
// answer is compared with the previous one, file by file
// (backendkit.Snapshot): new files and
// files whose ModifyIndex changed are sent with their value, vanished files
// with Err NoNode, in path order; so every file present when the channel
// closes was reported with its last value. Lock and election keys are left
// out, and so are files at reserved paths written by other tools (List
// reports those). ctx ending or Close sends Interrupted and closes the
// channel. Store errors are retried with backoff; an ACL refusal is sent as
// a PermissionDenied event and closes the channel. An empty prefix result
// is not an error. Revision (see topo.WatchData) is the listing's
// X-Consul-Index (the prefix's index) for the initial values and for the
// last difference of each later answer; the other differences of an
// answer carry the Revision reached before it.
func (c *Conn) WatchRecursive(ctx context.Context, prefix string) ([]*topo.WatchDataRecursive, <-chan *topo.WatchDataRecursive, error) {
	pfx, err := backendkit.Begin(ctx, prefix, topo.CleanPrefix, c.isClosed)
	if err != nil {
		return nil, nil, err
	}
	keyPrefix := c.dirPrefix("") + pfx
	pairs, meta, err := c.kv.List(keyPrefix, c.queryOptions(ctx))
	if err != nil {
		return nil, nil, c.convertError(ctx, err, pfx)
	}
	known := backendkit.Snapshot{}
	files, _, _ := c.files(pairs)
	initial := known.Diff(files)
	for _, e := range initial {
		e.Revision = int64(meta.LastIndex)
	}

	wctx, cancel := backendkit.Linked(ctx, c.ctx)
	ch := make(chan *topo.WatchDataRecursive, 8)
	go func() {
		defer close(ch)
		defer cancel()
		var got api.KVPairs // the answer to the last query
		mark := int64(meta.LastIndex)
		err := c.pollLoop(wctx, meta.LastIndex, func(q *api.QueryOptions) (meta *api.QueryMeta, err error) {
			got, meta, err = c.kv.List(keyPrefix, q)
			return meta, err
		}, func(index uint64) bool {
			files, _, _ := c.files(got)
			events := known.Diff(files)
			// The differences of two answers: until the last, the watch
			// has got no further than mark; the last reaches index.
			mark = backendkit.Stamp(events, nil, mark, int64(index))
			for _, e := range events {
				if !backendkit.Send(wctx, ch, e) {
					return false
				}
			}
			return true
		})
		if isPermanent(err) {
			backendkit.Send(wctx, ch, &topo.WatchDataRecursive{Path: pfx, WatchData: topo.WatchData{Err: c.convertError(wctx, err, pfx)}})
		} else { // wctx ended
			ch <- &topo.WatchDataRecursive{Path: pfx, WatchData: topo.WatchData{Err: backendkit.Wrap(topo.Interrupted, pfx, context.Cause(wctx))}}
		}
	}()
	return initial, ch, nil
}
