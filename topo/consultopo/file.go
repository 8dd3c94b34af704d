package consultopo

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// isLockPair reports whether pair is a lock or election key, not a file.
func isLockPair(pair *api.KVPair) bool {
	return pair.Flags == api.LockFlagValue || pair.Session != ""
}

// value returns pair's contents, never nil.
func value(pair *api.KVPair) []byte {
	if pair.Value == nil {
		return []byte{}
	}
	return pair.Value
}

// txn runs ops as one Consul transaction: ok=false with the response
// when it was rolled back, an error when it could not be run;
// errSessionGone when the first error Consul reports is its refusal of a
// session it no longer knows (only a lock operation checks that the
// session exists; an earlier failed condition hides the refusal, and the
// caller then sees ok=false: its session's loss shows at its next
// renewal). Consul 1.13 reports the state store's errors per operation,
// with 409.
func (c *Conn) txn(ctx context.Context, ops api.TxnOps) (bool, *api.TxnResponse, error) {
	var resp api.TxnResponse
	_, err := c.client.Raw().Write("/v1/txn", ops, &resp, c.writeOptions(ctx))
	if err == nil {
		return true, &resp, nil
	}
	var se api.StatusError
	if errors.As(err, &se) && se.Code == http.StatusConflict {
		var failed api.TxnResponse
		if jerr := json.Unmarshal([]byte(se.Body), &failed); jerr == nil {
			if classifyRollback(&failed) == rollbackBadSession {
				return false, nil, errSessionGone
			}
			return false, &failed, nil
		}
	}
	return false, nil, err
}

// maxTxnValue is the largest value written in a transaction (512 KiB
// bodies, base64 values); larger ones go through writeLarge.
const maxTxnValue = 360 * 1024

// Create implements topo.Conn.Create: a transaction with a check-and-set
// on index 0, returning the new ModifyIndex. It returns NodeExists if the
// key exists, InvalidPath or InvalidArgument for bad input,
// PermissionDenied for an ACL refusal, Timeout or Interrupted when ctx
// ends, Closed after Close, Unavailable when the agent cannot be reached.
func (c *Conn) Create(ctx context.Context, filePath string, contents []byte) (topo.Version, error) {
	p, err := backendkit.Begin(ctx, filePath, func(p string) (string, error) { return backendkit.CheckCreate(p, contents) }, c.isClosed)
	if err != nil {
		return nil, err
	}
	return c.write(ctx, backendkit.TxnOp{Kind: topo.TxnCreate, Path: p, Contents: contents})
}

// write runs the write op of Create, Update or Delete as Txn would, but
// without ?consistent nor a *topo.TxnError; large values via writeLarge.
func (c *Conn) write(ctx context.Context, op backendkit.TxnOp) (topo.Version, error) {
	if op.Kind != topo.TxnCreate && op.Version == 0 {
		return nil, c.missingOrBadVersion(ctx, op.Path, op.Kind) // no key is at index 0
	}
	if len(op.Contents) > maxTxnValue {
		return c.writeLarge(ctx, op)
	}
	cops := []backendkit.TxnOp{op}
	plan, _ := c.planTxn(cops, nil) // only an IfHeld op fails planning
	vs, _, err := c.runTxn(ctx, cops, plan, op.Path, func(ops api.TxnOps) (bool, *api.TxnResponse, error) { return c.txn(ctx, ops) },
		func(err error) error { return c.convertError(ctx, err, op.Path) })
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

// writeNonce returns the Flags of a file write: a random nonce (never
// api.LockFlagValue), since Consul keeps the ModifyIndex of a write that
// changes neither value nor flags, and every Update must yield a new
// version (a repeated nonce, a 2^-64 chance, rewrites an identical
// state). writeLarge also recognises its own write by it.
func writeNonce() uint64 {
	for {
		if n := rand.Uint64(); n != api.LockFlagValue {
			return n
		}
	}
}

// Update implements topo.Conn.Update, yielding a new version even for
// identical contents. A nil version writes unconditionally (creating the
// key); otherwise a check-and-set on the ModifyIndex, which never creates
// the key: BadVersion when it differs, NoNode when the key is absent.
// Up to 360 KiB it is one transaction; larger values take two or three
// requests (see writeLarge: Unavailable with ErrVersionUnknown). Errors
// as for Create; InvalidArgument for a foreign or negative version. A key
// at a reserved place (guard.go) is read first, one request more: a lock
// or election key is NodeExists, left alone; any other is written at the
// index read (ResourceExhausted with ErrGuardedContention when it keeps
// changing).
func (c *Conn) Update(ctx context.Context, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	p, index, err := backendkit.BeginVersioned(ctx, filePath, func(p string) (string, int64, error) { return backendkit.CheckUpdate(p, contents, version) }, c.isClosed)
	if err != nil {
		return nil, err
	}
	return c.write(ctx, backendkit.TxnOp{Kind: topo.TxnUpdate, Path: p, Contents: contents, Version: index})
}

// ErrVersionUnknown is the cause of the Unavailable error of an Update or
// Create of a value over 360 KiB that was applied but already
// overwritten when its version was read back (Consul's KV PUT returns no
// index, and it keeps no history): like a timeout, an indeterminate
// outcome. No version is made up, so none is returned for two writes.
var ErrVersionUnknown = errors.New("the large value was written but overwritten by another writer before its version could be read; consul keeps no history")

// writeLarge writes through the KV endpoint with a fresh nonce in Flags
// (cas for Create, a versioned Update, and a guarded Update at the index
// read, read again when the key changed; else a PUT), then reads back
// consistently: a key still carrying the nonce has this write's
// ModifyIndex (else ErrVersionUnknown; docs/layout-consul.md).
func (c *Conn) writeLarge(ctx context.Context, op backendkit.TxnOp) (topo.Version, error) {
	p, key := op.Path, c.key(op.Path)
	nonce := writeNonce()
	pair := &api.KVPair{Key: key, Value: op.Contents, Flags: nonce, ModifyIndex: uint64(max(op.Version, 0))}
	guarded, ok := c.guardedWrite(op), false
	for attempt := 0; !ok; attempt++ {
		if guarded {
			states, err := c.readGuarded(ctx, []backendkit.TxnOp{op}, attempt)
			if err != nil {
				return nil, err
			}
			refused, index := guardedPlan(op, states[key])
			if refused != nil {
				return nil, refused
			}
			pair.ModifyIndex = index
		}
		var err error
		if !guarded && op.Kind == topo.TxnUpdate && op.Version == backendkit.AnyVersion {
			_, err = c.kv.Put(pair, c.writeOptions(ctx))
			ok = true
		} else {
			ok, _, err = c.kv.CAS(pair, c.writeOptions(ctx))
		}
		switch {
		case err != nil:
			return nil, c.convertError(ctx, err, p)
		case ok, guarded: // written, or to read again
		case op.Kind == topo.TxnCreate:
			return nil, topo.NewError(topo.NodeExists, p)
		default:
			return nil, c.missingOrBadVersion(ctx, p, op.Kind)
		}
	}
	cur, _, err := c.kv.Get(key, c.consistentOptions(ctx))
	switch {
	case err != nil:
		return nil, c.convertError(ctx, err, p)
	case cur != nil && cur.Flags == nonce:
		return topo.NumericVersion(cur.ModifyIndex), nil
	}
	return nil, backendkit.Wrap(topo.Unavailable, p, ErrVersionUnknown)
}

// missingOrBadVersion explains a failed check-and-set of kind on p with a
// consistent read: NoNode, BadVersion, or entryError's.
func (c *Conn) missingOrBadVersion(ctx context.Context, p string, kind topo.TxnOpKind) error {
	pair, _, err := c.kv.Get(c.key(p), c.consistentOptions(ctx))
	switch {
	case err != nil:
		return c.convertError(ctx, err, p)
	case pair == nil:
		return topo.NewError(topo.NoNode, p)
	case isLockPair(pair) && guardedKey(c.key(p)):
		return entryError(kind, p)
	default:
		return topo.NewError(topo.BadVersion, p)
	}
}

// Get implements topo.Conn.Get: one KV read. NoNode when the key is
// absent; other errors as for Create.
func (c *Conn) Get(ctx context.Context, filePath string) ([]byte, topo.Version, error) {
	p, err := backendkit.Begin(ctx, filePath, topo.CleanFilePath, c.isClosed)
	if err != nil {
		return nil, nil, err
	}
	pair, _, err := c.kv.Get(c.key(p), c.queryOptions(ctx))
	if err != nil {
		return nil, nil, c.convertError(ctx, err, p)
	}
	if pair == nil {
		return nil, nil, topo.NewError(topo.NoNode, p)
	}
	return value(pair), topo.NumericVersion(pair.ModifyIndex), nil
}

// GetVersion implements topo.Conn.GetVersion: Consul keeps no history, so
// after checking its arguments it returns NoImplementation.
func (c *Conn) GetVersion(ctx context.Context, filePath string, version int64) ([]byte, error) {
	return nil, backendkit.NoHistory(ctx, filePath, version, c.isClosed, "consul keeps no history of a key's values")
}

// List implements topo.Conn.List: one recursive KV read of the prefix,
// without lock and election keys. Another tool's files at reserved paths
// (a d/Lock without lock flags or session) are named by the PartialResult
// error of backendkit.ReservedFiles returned with the other files; keys
// that are no canonical path are listed under their raw paths. NoNode
// when no file matches and none is reserved; PermissionDenied when the
// ACL token may not read every key under the prefix (Consul would leave
// those out; etcd refuses such a range too); other errors as for Get.
func (c *Conn) List(ctx context.Context, filePathPrefix string) ([]topo.KVInfo, error) {
	prefix, err := backendkit.Begin(ctx, filePathPrefix, topo.CleanPrefix, c.isClosed)
	if err != nil {
		return nil, err
	}
	pairs, meta, err := c.kv.List(c.dirPrefix("")+prefix, c.queryOptions(ctx))
	if err := unfiltered(meta, err); err != nil {
		return nil, c.convertError(ctx, err, prefix)
	}
	files, reserved, raw := c.files(pairs)
	out := make([]topo.KVInfo, 0, len(files)+len(raw))
	for _, f := range files {
		out = append(out, topo.KVInfo{Path: f.Path, Value: f.Contents, Version: topo.NumericVersion(f.Version)})
	}
	out = append(out, raw...)
	return backendkit.ListResult(prefix, out, reserved)
}

// files returns the files under the root, sorted by path; the sorted
// reserved paths; and the keys that are no canonical path ("t/" holding a
// value, "a//b"), which List lists raw, as etcd2topo does. An empty
// "folder" key (as Consul's UI makes) is no file.
func (c *Conn) files(pairs api.KVPairs) (files []backendkit.FileState, reserved []string, raw []topo.KVInfo) {
	files = make([]backendkit.FileState, 0, len(pairs))
	for _, pair := range pairs {
		p, ok := strings.CutPrefix(pair.Key, c.dirPrefix(""))
		if !ok || p == "" || isLockPair(pair) {
			continue
		}
		if _, err := topo.CleanFilePath(p); err != nil {
			if !strings.HasSuffix(p, "/") || len(pair.Value) > 0 {
				raw = append(raw, topo.KVInfo{Path: p, Value: value(pair), Version: topo.NumericVersion(pair.ModifyIndex)})
			}
			continue
		}
		if topo.IsReserved(p) {
			reserved = append(reserved, p)
			continue
		}
		files = append(files, backendkit.FileState{Path: p, Contents: value(pair), Version: int64(pair.ModifyIndex), Created: int64(pair.CreateIndex)})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	sort.Strings(reserved)
	return files, reserved, raw
}

// Delete implements topo.Conn.Delete: one transaction reading (nil
// version) or checking the ModifyIndex of the key, then deleting it:
// NoNode when absent, BadVersion when the index differs; other errors as
// for Create. An emptied directory vanishes (directories are implicit). A
// key at a reserved place (see Update) is read first: a lock or election
// key is NoNode, left alone; any other is deleted at the index read.
func (c *Conn) Delete(ctx context.Context, filePath string, version topo.Version) error {
	p, index, err := backendkit.BeginVersioned(ctx, filePath, func(p string) (string, int64, error) { return backendkit.CheckDelete(p, version) }, c.isClosed)
	if err != nil {
		return err
	}
	_, err = c.write(ctx, backendkit.TxnOp{Kind: topo.TxnDelete, Path: p, Version: index})
	return err
}
