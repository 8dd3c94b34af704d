package consultopo

import (
	"log/slog"
	"time"

	"github.com/topokit/topokit/topo/claims"
)

// monitorGrace is how long Monitor leaves its query in flight after the
// claim ended before cancelling it.
const monitorGrace = 5 * time.Second

// isDone reports whether done is closed.
func isDone(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// Monitor implements claims.Monitor: until done closes (or the session
// ends, or the Conn closes), consistent blocking queries on the store key
// (each waiting up to Options.WatchPollDuration); when one shows the key
// gone, held by another session or written since the acquire (another
// ModifyIndex), the claim ends as lost (Session.LoseEntry): a lock's Done
// closes, a term's leadership context is cancelled. Store errors are
// retried; an ACL refusal ends the watch, leaving the other causes to end
// the claim.
func (d driver) Monitor(q claims.Queue, v *claims.Session, e claims.Entry, done <-chan struct{}) {
	c := d.c
	sess := sessionOf(v)
	key, _ := splitGranted(e)
	c.spawn(func() {
		ctx, cancel := c.callCtx(sess.ctx)
		defer cancel()
		go func() {
			select {
			case <-done:
				// The release that ended the claim changes the key at
				// once, which answers the query in flight; cancelling it
				// would close its connection (HTTP/1.1), and the next
				// request would dial a new one, so it gets monitorGrace
				// to end by itself.
				t := time.NewTimer(monitorGrace)
				select {
				case <-t.C:
				case <-ctx.Done():
				}
				t.Stop()
			case <-ctx.Done():
			}
			cancel()
		}()
		// While held the key keeps the acquire's ModifyIndex, the token, so
		// the first query blocks.
		index := uint64(e.Token)
		retry := 50 * time.Millisecond
		for {
			pair, meta, err := c.kv.Get(key, c.consistentBlocking(ctx, index))
			switch {
			case ctx.Err() != nil, isDone(done):
				return
			case isPermanent(err):
				slog.Debug("consultopo: the watch of a held key was refused", "key", key, "err", err)
				return
			case err != nil:
				if !sleepCtx(ctx, retry) {
					return
				}
				retry = min(2*retry, watchRetryMax)
				continue
			case !holds(pair, sess.id, e.Token):
				v.LoseEntry(e.Key, e.Token)
				return
			}
			retry = 50 * time.Millisecond
			index = nextIndex(index, meta.LastIndex)
		}
	})
}
