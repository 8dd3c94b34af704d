package etcd2topo

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Create creates filePath holding contents, in one transaction writing
// only if the key has no CreateRevision, and returns the new ModRevision.
// NodeExists if the file exists; other errors as on topo.Conn.
func (c *Conn) Create(ctx context.Context, filePath string, contents []byte) (topo.Version, error) {
	p, err := backendkit.Begin(ctx, filePath, func(fp string) (string, error) { return backendkit.CheckCreate(fp, contents) }, c.isClosed)
	if err != nil {
		return nil, err
	}
	k := c.key(p)
	rev, _, err := c.writeIf(ctx, p, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", 0)}, clientv3.OpPut(k, string(contents)),
		func() error { return topo.NewError(topo.NodeExists, p) })
	if err != nil {
		return nil, err
	}
	return topo.NumericVersion(rev), nil
}

// Update writes contents to filePath and returns the new ModRevision. A
// nil version is a plain put (creating the file if absent); otherwise a
// transaction on the key's ModRevision: BadVersion if it differs, NoNode
// if the file is absent (one more read tells which); version 0 never
// matches. At a reserved root, a leased key is NodeExists (package doc).
func (c *Conn) Update(ctx context.Context, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	p, want, err := backendkit.BeginVersioned(ctx, filePath, func(p string) (string, int64, error) { return backendkit.CheckUpdate(p, contents, version) }, c.isClosed)
	if err != nil {
		return nil, err
	}
	k := c.key(p)
	op := clientv3.OpPut(k, string(contents))
	var rev int64
	if version != nil {
		rev, err = c.casWrite(ctx, p, want, op)
	} else {
		rev, _, err = c.writeIf(ctx, p, c.fileCmps(k), op, func() error { return entryError(p, false) })
	}
	if err != nil {
		return nil, err
	}
	return topo.NumericVersion(rev), nil
}

// casWrite applies op (a put or delete of p's key) if the key's
// ModRevision is want (and, at a reserved root, it has no lease), and
// returns the transaction's revision.
func (c *Conn) casWrite(ctx context.Context, p string, want int64, op clientv3.Op) (int64, error) {
	if want == 0 {
		// ModRevision 0 means "absent": no file has it.
		return 0, c.casMismatch(ctx, p, op.IsDelete())
	}
	k := c.key(p)
	rev, _, err := c.writeIf(ctx, p, c.fileCmps(k, clientv3.Compare(clientv3.ModRevision(k), "=", want)), op,
		func() error { return c.casMismatch(ctx, p, op.IsDelete()) })
	return rev, err
}

var errEntry = errors.New("etcd2topo: the key is a lock or election entry (it has a lease, at a reserved place): not a file")

// entryError is the error of a write of p (a delete, with del) that would
// land on an entry: NodeExists, or NoNode for a delete (package doc).
func entryError(p string, del bool) error {
	if del {
		return backendkit.Wrap(topo.NoNode, p, errEntry)
	}
	return backendkit.Wrap(topo.NodeExists, p, errEntry)
}

// leaseless is the compare that k has no lease (absent keys included),
// which every write adds at a reserved root: a put would also detach an
// entry from its lease.
func leaseless(k string) clientv3.Cmp { return clientv3.Compare(clientv3.LeaseValue(k), "=", 0) }

// fileCmps returns cmps, and leaseless(k) with them at a reserved root.
func (c *Conn) fileCmps(k string, cmps ...clientv3.Cmp) []clientv3.Cmp {
	if c.inClaims {
		return append(cmps, leaseless(k))
	}
	return cmps
}

// writeIf applies op, a put or delete of p's key, if cmps hold (failed's
// error when one does not; no compare: a plain Put or Delete), and
// returns the revision and whether op found the key or put it.
func (c *Conn) writeIf(ctx context.Context, p string, cmps []clientv3.Cmp, op clientv3.Op, failed func() error) (int64, bool, error) {
	if len(cmps) == 0 {
		resp, err := c.cli.Do(ctx, op)
		if err != nil {
			return 0, false, c.convertError(ctx, err, p)
		}
		if op.IsDelete() {
			return resp.Del().Header.Revision, resp.Del().Deleted > 0, nil
		}
		return resp.Put().Header.Revision, true, nil
	}
	resp, err := c.cli.Txn(ctx).If(cmps...).Then(op).Commit()
	if err != nil {
		return 0, false, c.convertError(ctx, err, p)
	}
	if !resp.Succeeded {
		return 0, false, failed()
	}
	return resp.Header.Revision, !op.IsDelete() || resp.Responses[0].GetResponseDeleteRange().Deleted > 0, nil
}

// casMismatch returns the error of a failed compare-and-set: NoNode,
// BadVersion, or entryError's at a reserved root. It reads once more, on
// the failure path only: an Else branch measurably slows every success.
func (c *Conn) casMismatch(ctx context.Context, p string, del bool) error {
	opts := []clientv3.OpOption{clientv3.WithCountOnly()}
	if c.inClaims {
		opts = nil // with values: the Lease
	}
	resp, err := c.cli.Get(ctx, c.key(p), opts...)
	if err != nil {
		return c.convertError(ctx, err, p)
	}
	switch {
	case resp.Count == 0:
		return topo.NewError(topo.NoNode, p)
	case len(resp.Kvs) > 0 && resp.Kvs[0].Lease != 0:
		return entryError(p, del)
	}
	return topo.NewError(topo.BadVersion, p)
}

// Get returns the contents of filePath and its ModRevision as the version
// (one linearizable range read), or NoNode.
func (c *Conn) Get(ctx context.Context, filePath string) ([]byte, topo.Version, error) {
	p, err := backendkit.Begin(ctx, filePath, topo.CleanFilePath, c.isClosed)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.cli.Get(ctx, c.key(p))
	if err != nil {
		return nil, nil, c.convertError(ctx, err, p)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil, topo.NewError(topo.NoNode, p)
	}
	kv := resp.Kvs[0]
	return kv.Value, topo.NumericVersion(kv.ModRevision), nil
}

// GetVersion returns the contents filePath was written with at version,
// a ModRevision, reading the key at that revision. It returns NoNode if
// the key was not written then (or version is 0 or in the future),
// Compacted if etcd compacted it away, InvalidArgument if negative.
func (c *Conn) GetVersion(ctx context.Context, filePath string, version int64) ([]byte, error) {
	p, err := backendkit.Begin(ctx, filePath, func(fp string) (string, error) { return backendkit.CheckGetVersion(fp, version) }, c.isClosed)
	if err != nil {
		return nil, err
	}
	if version == 0 {
		return nil, topo.NewError(topo.NoNode, p) // WithRev(0) reads the latest
	}
	resp, err := c.cli.Get(ctx, c.key(p), clientv3.WithRev(version))
	if err != nil {
		if errors.Is(err, rpctypes.ErrFutureRev) {
			return nil, backendkit.Wrap(topo.NoNode, p, err)
		}
		return nil, c.convertError(ctx, err, p)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != version {
		return nil, topo.NewError(topo.NoNode, p)
	}
	return resp.Kvs[0].Value, nil
}

// List returns every file whose path starts with filePathPrefix, with its
// ModRevision, sorted by path (one range read), or NoNode. Keys at
// reserved paths are no files: leased ones are left out; leaseless ones,
// which another tool wrote there, make List return the other files with
// backendkit.ReservedFiles's PartialResult error naming them (not
// NoNode).
func (c *Conn) List(ctx context.Context, filePathPrefix string) ([]topo.KVInfo, error) {
	p, err := backendkit.Begin(ctx, filePathPrefix, topo.CleanPrefix, c.isClosed)
	if err != nil {
		return nil, err
	}
	resp, err := c.cli.Get(ctx, c.key(p), clientv3.WithPrefix())
	if err != nil {
		return nil, c.convertError(ctx, err, p)
	}
	out := make([]topo.KVInfo, 0, len(resp.Kvs))
	var reserved []string
	for _, kv := range resp.Kvs {
		rel := c.rel(kv.Key)
		if topo.IsReserved(rel) {
			if kv.Lease == 0 {
				reserved = append(reserved, rel)
			}
			continue
		}
		out = append(out, topo.KVInfo{Path: rel, Value: kv.Value, Version: topo.NumericVersion(kv.ModRevision)})
	}
	return backendkit.ListResult(p, out, reserved)
}

// Delete deletes filePath: unconditionally for a nil version, else as
// Update's compare-and-set. NoNode if the file is absent, and at a
// reserved root for a leased key (package doc).
func (c *Conn) Delete(ctx context.Context, filePath string, version topo.Version) error {
	p, want, err := backendkit.BeginVersioned(ctx, filePath, func(p string) (string, int64, error) { return backendkit.CheckDelete(p, version) }, c.isClosed)
	if err != nil {
		return err
	}
	k := c.key(p)
	if version != nil {
		_, err = c.casWrite(ctx, p, want, clientv3.OpDelete(k))
		return err
	}
	_, found, err := c.writeIf(ctx, p, c.fileCmps(k), clientv3.OpDelete(k), func() error { return entryError(p, true) })
	if err == nil && !found {
		return topo.NewError(topo.NoNode, p)
	}
	return err
}

// Vitess's (and topo's reserved) names: the directory of a queue, and
// the top directory of elections.
const (
	locksDir     = backendkit.LocksDirName
	electionsDir = backendkit.ElectionsDirName
)
