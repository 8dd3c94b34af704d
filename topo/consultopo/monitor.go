package consultopo

import (
	"log/slog"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// monitorGrace is how long Monitor's query may outlive its claim.
const monitorGrace = 5 * time.Second

// Monitor implements claims.Monitor: consistent blocking queries on the
// store key until done, the session's end or Close; when the key is no
// longer the acquire's (holds), the claim is lost (Session.LoseEntry).
// Errors are retried; an ACL refusal ends the watch, not the claim.
func (d driver) Monitor(q claims.Queue, v *claims.Session, e claims.Entry, done <-chan struct{}) {
	c := d.c
	sess := sessionOf(v)
	key, _ := splitGranted(e)
	c.spawn(func() {
		ctx, cancel := backendkit.Linked(claimContext(sess.ctx, prioClaimOther), c.ctx)
		defer cancel()
		go func() {
			select {
			case <-done:
				// The release answers the query: cancelling it would
				// close its HTTP/1.1 connection.
				backendkit.Sleep(ctx, monitorGrace)
			case <-ctx.Done():
			}
			cancel()
		}()
		var pair *api.KVPair // the answer to the last query
		// While held the key is at the token: the first query blocks.
		err := c.pollLoop(ctx, uint64(e.Token), func(opts *api.QueryOptions) (meta *api.QueryMeta, err error) {
			opts.RequireConsistent = true
			pair, meta, err = c.kv.Get(key, opts)
			select {
			case <-done:
				cancel() // the claim ended: no retry, no loss
			default:
			}
			return meta, err
		}, func(uint64) bool {
			if !holds(pair, sess.id, e.Token) {
				v.LoseEntry(e.Key, e.Token)
				return false
			}
			return true
		})
		if isPermanent(err) {
			slog.Debug("consultopo: the watch of a held key was refused", "key", key, "err", err)
		}
	})
}
