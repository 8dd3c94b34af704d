package consultopo

import (
	"bytes"
	"context"
	"hash/maphash"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// watchRetryMax caps the backoff between failed blocking queries.
const watchRetryMax = 2 * time.Second

// nextIndex returns the WaitIndex after a query on prev that returned
// last: 0 (answered at once) when the index went back (a restarted agent).
func nextIndex(prev, last uint64) uint64 {
	if last < prev {
		return 0
	}
	return last
}

// pollLoop runs blocking queries from index until handle (given each
// answer's X-Consul-Index) returns false (nil), wctx ends (its error), or
// a permanent error (returned). Other failures are retried with backoff.
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

// Watch implements topo.Conn.Watch with blocking queries on the file's
// key. The current value comes back at once (NoNode, no channel, when
// absent). A new ModifyIndex sends the new value; a delete, also one
// followed by a re-creation (a new CreateIndex, as on etcd), sends NoNode
// and closes the channel, and so does a file at the indexes last seen but
// with other contents (an agent that lost its state, a restarted dev
// agent, wrote it again at indexes it reached again); ctx ending or Close
// sends Interrupted. Store errors are retried with backoff (a restarted
// dev agent, empty, shows as a delete); an ACL refusal sends
// PermissionDenied and closes. Other errors as for Get. Revision is the
// highest X-Consul-Index seen. Each blocking query takes one of the Conn's
// Options.MaxBlockingQueries slots: past the bound it waits for one (first
// come, first served) and then asks from the index last seen, so a change
// made meanwhile is delivered late, never lost (package doc,
// "Connections").
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
		contents := current.Contents // of the last value sent
		var got *api.KVPair          // the answer to the last query
		err := c.pollLoop(wctx, meta.LastIndex, func(q *api.QueryOptions) (meta *api.QueryMeta, err error) {
			got, meta, err = c.kv.Get(key, q)
			return meta, err
		}, func(index uint64) bool {
			mark = max(mark, int64(index))
			if got != nil && (got.CreateIndex != created ||
				got.ModifyIndex == version && !bytes.Equal(value(got), contents)) {
				// Another file: re-created between two answers, or
				// written by an agent that lost its state (a
				// restarted dev agent) at indexes the lost file had.
				got = nil
			}
			if got == nil {
				backendkit.Send(wctx, ch, &topo.WatchData{Err: topo.NewError(topo.NoNode, p), Revision: mark})
				return false
			}
			if got.ModifyIndex == version {
				return true
			}
			version, contents = got.ModifyIndex, value(got)
			return backendkit.Send(wctx, ch, &topo.WatchData{Contents: contents, Version: topo.NumericVersion(version), Revision: mark})
		})
		switch {
		case isPermanent(err):
			backendkit.Send(wctx, ch, &topo.WatchData{Err: c.convertError(wctx, err, p)})
		case err != nil || got != nil: // wctx ended (else NoNode was the last event)
			// Sent though wctx ended: the contract has the reader drain.
			ch <- &topo.WatchData{Err: backendkit.Wrap(topo.Interrupted, p, context.Cause(wctx))}
		}
	}()
	return current, ch, nil
}

// WatchRecursive implements topo.Conn.WatchRecursive with blocking
// queries over the prefix, each answer compared with the previous one
// (backendkit.Snapshot, and a hash of each file's contents: see
// contentSums): new and changed files are sent with their value,
// vanished ones with NoNode, in path order. Lock and election keys and
// other tools' files at reserved paths are left out; an empty prefix is
// no error. Interrupted, retries, ACL refusals and the bound on blocking
// queries (a late delivery past it) as for Watch. Revision
// is the listing's X-Consul-Index for the initial values and the last
// difference of an answer; the others carry the one reached before.
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
	sums := contentSums{seed: maphash.MakeSeed(), m: map[string]uint64{}}
	files, _, _ := c.files(pairs)
	sums.check(known, files)
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
			sums.check(known, files)
			events := known.Diff(files)
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

// contentSums is a hash of the contents of every file a WatchRecursive
// knows, by path. Indexes alone cannot tell every change: an agent that
// lost its state (a restarted dev agent) starts its indexes over, and may
// write a file again, with other contents, at the very ModifyIndex the
// watch last reported for it.
type contentSums struct {
	seed maphash.Seed
	m    map[string]uint64
}

// check records the contents of files, a whole answer, and marks in known
// (as version -1, which no file has) every file that has the version known
// but other contents, so that known.Diff reports it.
func (cs *contentSums) check(known backendkit.Snapshot, files []backendkit.FileState) {
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		seen[f.Path] = true
		sum := maphash.Bytes(cs.seed, f.Contents)
		if v, ok := known[f.Path]; ok && v == f.Version && cs.m[f.Path] != sum {
			known[f.Path] = -1
		}
		cs.m[f.Path] = sum
	}
	for p := range cs.m {
		if !seen[p] {
			delete(cs.m, p)
		}
	}
}
