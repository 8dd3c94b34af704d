package etcd2topo

import (
	"context"
	"errors"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// Create creates filePath (key <root>/<filePath>) holding contents, in one
// transaction that writes only if the key has no CreateRevision. It returns
// the new ModRevision as the version; NodeExists if the file exists;
// InvalidPath, InvalidArgument (value too large), Timeout, Interrupted,
// Closed, Unavailable as documented on topo.Conn.
func (c *Conn) Create(ctx context.Context, filePath string, contents []byte) (topo.Version, error) {
	p, err := backendkit.Begin(ctx, filePath, func(fp string) (string, error) { return backendkit.CheckCreate(fp, contents) }, c.isClosed)
	if err != nil {
		return nil, err
	}
	k := c.key(p)
	rev, err := c.writeIf(ctx, p, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(k), "=", 0)}, clientv3.OpPut(k, string(contents)),
		func() error { return topo.NewError(topo.NodeExists, p) })
	if err != nil {
		return nil, err
	}
	return topo.NumericVersion(rev), nil
}

// Update writes contents to filePath. A nil version is a plain put (it
// creates the file if absent). A non-nil version (a topo.NumericVersion,
// the file's ModRevision) is a transaction that writes only if the key's
// ModRevision still equals it: BadVersion if it differs, NoNode if the file
// is absent; version 0 never matches and never creates the file. It
// returns the new ModRevision. A failed compare-and-set costs one more
// read, to tell NoNode from BadVersion. On a Conn rooted at a reserved
// place (inside a "locks" directory, say), a key with a lease is a lock or
// election entry, not a file: Update returns NodeExists and writes
// nothing (the write is a transaction comparing the lease with none).
func (c *Conn) Update(ctx context.Context, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	p, want, err := backendkit.BeginVersioned(ctx, filePath, func(p string) (string, int64, error) { return backendkit.CheckUpdate(p, contents, version) }, c.isClosed)
	if err != nil {
		return nil, err
	}
	k := c.key(p)
	var rev int64
	switch op := clientv3.OpPut(k, string(contents)); {
	case version != nil:
		rev, err = c.casWrite(ctx, p, want, op)
	case c.inClaims:
		rev, err = c.writeIf(ctx, p, []clientv3.Cmp{leaseless(k)}, op, func() error { return entryError(p, false) })
	default:
		var resp *clientv3.PutResponse
		if resp, err = c.cli.Put(ctx, k, string(contents)); err != nil {
			return nil, c.convertError(ctx, err, p)
		}
		rev = resp.Header.Revision
	}
	if err != nil {
		return nil, err
	}
	return topo.NumericVersion(rev), nil
}

// casWrite runs op (a put or a delete of p's key) in one transaction
// that applies it only if the key's ModRevision is want, and returns the
// transaction's revision; casMismatch's error when it is not.
// With the root at a reserved place (Conn.inClaims), the transaction
// also compares the key's lease with none (leaseless).
func (c *Conn) casWrite(ctx context.Context, p string, want int64, op clientv3.Op) (int64, error) {
	if want == 0 {
		// ModRevision 0 means "absent" to etcd: comparing with it would
		// create the file. No file has version 0, so this cannot match.
		return 0, c.casMismatch(ctx, p, op.IsDelete())
	}
	k := c.key(p)
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(k), "=", want)}
	if c.inClaims {
		cmps = append(cmps, leaseless(k))
	}
	return c.writeIf(ctx, p, cmps, op, func() error { return c.casMismatch(ctx, p, op.IsDelete()) })
}

// errEntry is the cause of the error of a write that would land on a lock
// or election entry (a leased key at a reserved place: see Conn.inClaims).
var errEntry = errors.New("etcd2topo: the key is a lock or election entry (it has a lease, at a reserved place): not a file")

// entryError is the error of a write of p (a delete, with del) that would
// land on a lock or election entry: as memorytopo, an update finds it
// there (NodeExists), a delete finds no file (NoNode).
func entryError(p string, del bool) error {
	if del {
		return backendkit.Wrap(topo.NoNode, p, errEntry)
	}
	return backendkit.Wrap(topo.NodeExists, p, errEntry)
}

// leaseless is the compare that key k has no lease: it holds for an
// absent key too (etcd compares an absent key's lease as 0). A Conn rooted
// at a reserved place (Conn.inClaims) adds it to every write, so that a
// file write never rewrites another holder's entry (a put without a
// lease would also detach the entry from its lease) nor deletes it, as
// memorytopo refuses them.
func leaseless(k string) clientv3.Cmp { return clientv3.Compare(clientv3.LeaseValue(k), "=", 0) }

// writeIf runs op in one transaction that applies it only if cmps hold,
// and returns the transaction's revision; failed's error when one fails.
func (c *Conn) writeIf(ctx context.Context, p string, cmps []clientv3.Cmp, op clientv3.Op, failed func() error) (int64, error) {
	resp, err := c.cli.Txn(ctx).If(cmps...).Then(op).Commit()
	if err != nil {
		return 0, c.convertError(ctx, err, p)
	}
	if !resp.Succeeded {
		return 0, failed()
	}
	return resp.Header.Revision, nil
}

// casMismatch returns the error of a compare-and-set that failed or cannot
// match: NoNode if the file is absent, BadVersion otherwise. It costs one
// more read, on the failure path only: an Else branch in the transaction
// would answer in the same round trip but measurably slows every
// successful compare-and-set. With the root at a reserved place
// (Conn.inClaims), a leased key is a lock or election entry, not a file:
// NodeExists for an update, NoNode for a delete (as memorytopo).
func (c *Conn) casMismatch(ctx context.Context, p string, del bool) error {
	if c.inClaims {
		// Values included: etcd 3.7 leaves the Lease out of keys-only reads.
		resp, err := c.cli.Get(ctx, c.key(p))
		if err != nil {
			return c.convertError(ctx, err, p)
		}
		switch {
		case len(resp.Kvs) == 0:
			return topo.NewError(topo.NoNode, p)
		case resp.Kvs[0].Lease != 0:
			return entryError(p, del)
		}
		return topo.NewError(topo.BadVersion, p)
	}
	resp, err := c.cli.Get(ctx, c.key(p), clientv3.WithCountOnly())
	if err != nil {
		return c.convertError(ctx, err, p)
	}
	if resp.Count == 0 {
		return topo.NewError(topo.NoNode, p)
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

// GetVersion returns the contents filePath held at version, a ModRevision
// it was written at, by reading the key at that revision. It returns NoNode
// if the key was not written at that revision (or version is 0 or in the
// future), Compacted if etcd compacted that revision away, and
// InvalidArgument for a negative version.
func (c *Conn) GetVersion(ctx context.Context, filePath string, version int64) ([]byte, error) {
	p, err := backendkit.Begin(ctx, filePath, func(fp string) (string, error) { return backendkit.CheckGetVersion(fp, version) }, c.isClosed)
	if err != nil {
		return nil, err
	}
	if version == 0 {
		// Revision 0 would read the latest value.
		return nil, topo.NewError(topo.NoNode, p)
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
// ModRevision, sorted by path (one linearizable range read over the
// prefix). It returns NoNode when no file matches. Keys at reserved paths
// (topo.IsReserved) are never listed as files: those attached to a lease
// (lock entries, election candidates, other tools' ephemeral keys) are
// left out silently; those without one are files another tool wrote where
// topokit keeps its locks and elections, and List reports them: it returns
// every other matching file together with the PartialResult error of
// backendkit.ReservedFiles naming them (NoNode is then not returned, even when
// no other file matches).
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
	// etcd returns keys sorted, and rel keeps that order.
	return backendkit.ListResult(p, out, reserved)
}

// Delete deletes filePath. A nil version deletes unconditionally; a
// non-nil one is a transaction on the key's ModRevision (BadVersion if
// stale; version 0 never matches). It returns NoNode if the file is absent,
// and on a Conn rooted at a reserved place for a key with a lease (a lock
// or election entry, no file; see Update).
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
	var deleted int64
	if c.inClaims {
		// A leased key there is a lock or election entry: no file.
		resp, err := c.cli.Txn(ctx).If(leaseless(k)).Then(clientv3.OpDelete(k)).Commit()
		if err != nil {
			return c.convertError(ctx, err, p)
		}
		if !resp.Succeeded {
			return entryError(p, true)
		}
		deleted = resp.Responses[0].GetResponseDeleteRange().Deleted
	} else {
		resp, err := c.cli.Delete(ctx, k)
		if err != nil {
			return c.convertError(ctx, err, p)
		}
		deleted = resp.Deleted
	}
	if deleted == 0 {
		return topo.NewError(topo.NoNode, p)
	}
	return nil
}

// locksDir is the name of the directory, under a locked directory or an
// election, that holds the queue of entries; electionsDir is the
// top-level directory of leader elections. Both are Vitess's names (and
// topo's reserved names).
const (
	locksDir     = backendkit.LocksDirName
	electionsDir = backendkit.ElectionsDirName
)
