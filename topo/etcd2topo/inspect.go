package etcd2topo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// StoreMeta returns what etcd keeps about the key <root>/p: the key, its
// create and mod revisions, version and lease (hex, "" for none). It
// returns nil for the root and when there is no such key (an implicit
// directory), InvalidPath for a bad p, and a read's errors. Safe for
// concurrent use; topo/inspect calls it.
func (c *Conn) StoreMeta(ctx context.Context, p string) ([]backendkit.MetaField, error) {
	d, err := topo.CleanDirPath(p)
	if err != nil || d == "" {
		return nil, err
	}
	key := c.key(d)
	resp, err := c.cli.Get(ctx, key)
	if err != nil {
		return nil, c.convertError(ctx, err, d)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	kv := resp.Kvs[0]
	lease := ""
	if kv.Lease != 0 {
		lease = fmt.Sprintf("%x", kv.Lease)
	}
	return []backendkit.MetaField{
		{Name: "key", Value: key},
		{Name: "create_revision", Value: kv.CreateRevision},
		{Name: "mod_revision", Value: kv.ModRevision},
		{Name: "key_version", Value: kv.Version},
		{Name: "lease", Value: lease},
	}, nil
}

// SessionTTL returns the time left, in whole seconds, on the lease an
// entry's Session names ("lease N"), with one LeaseTimeToLive request:
// how long the entry would outlive its holder stopping now. ok is false
// when session names no lease or it expired. Errors are the request's.
// Safe for concurrent use; topo/inspect calls it.
func (c *Conn) SessionTTL(ctx context.Context, session string) (ttl time.Duration, ok bool, err error) {
	s, found := strings.CutPrefix(session, leaseNamePrefix)
	id, perr := strconv.ParseInt(s, 10, 64)
	if !found || perr != nil || id == 0 {
		return 0, false, nil
	}
	resp, err := c.cli.TimeToLive(ctx, clientv3.LeaseID(id))
	if err != nil {
		return 0, false, c.convertError(ctx, err, "")
	}
	if resp.TTL <= 0 {
		return 0, false, nil
	}
	return time.Duration(resp.TTL) * time.Second, true, nil
}
