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

// isLockPair reports whether pair is a lock or election key rather than a
// file: it carries the api package's lock flags or is held by a session.
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

// txn runs the KV operations ops as one Consul transaction. It returns
// ok=false with the response (whose Errors say which operation failed) when
// the transaction was rolled back, and an error when it could not be run.
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
			return false, &failed, nil
		}
	}
	return false, nil, err
}

// maxTxnValue is the largest value written through a transaction. Consul
// caps a transaction's request body at 512 KiB (txn_max_req_len) and
// transactions carry values in base64, so larger values (up to
// topo.MaxValueSize, which is also Consul's kv_max_value_size) are written
// through the plain KV endpoint instead (see writeLarge).
const maxTxnValue = 360 * 1024

// Create implements topo.Conn.Create: a transaction writing the key with a
// check-and-set on index 0 (only if absent), so the new ModifyIndex comes
// back in the same round trip. It returns NodeExists if the key exists,
// InvalidPath (reserved or malformed path) / InvalidArgument for bad input,
// PermissionDenied when the ACL token may not write the key,
// Timeout/Interrupted when ctx ends, Closed after Close and Unavailable
// when the agent cannot be reached.
func (c *Conn) Create(ctx context.Context, filePath string, contents []byte) (topo.Version, error) {
	p, err := backendkit.Begin(ctx, filePath, func(p string) (string, error) { return backendkit.CheckCreate(p, contents) }, c.isClosed)
	if err != nil {
		return nil, err
	}
	return c.write(ctx, backendkit.TxnOp{Kind: topo.TxnCreate, Path: p, Contents: contents})
}

// write runs the write op of Create, Update or Delete as the Consul
// operations Txn plans for it, sent as a plain write (no ?consistent), and
// explains a rollback as Txn does, without a *topo.TxnError around it.
// Values above maxTxnValue go through writeLarge instead.
func (c *Conn) write(ctx context.Context, op backendkit.TxnOp) (topo.Version, error) {
	if len(op.Contents) > maxTxnValue {
		return c.writeLarge(ctx, op)
	}
	cops := []backendkit.TxnOp{op}
	plan, err := c.planTxn(cops, nil)
	if err != nil {
		return nil, err
	}
	plan, ok, resp, err := c.runTxn(ctx, cops, plan, func(ops api.TxnOps) (bool, *api.TxnResponse, error) { return c.txn(ctx, ops) },
		func(err error) error { return c.convertError(ctx, err, op.Path) })
	switch {
	case err != nil:
		return nil, err
	case !ok:
		_, err := c.rollbackCause(ctx, cops, plan, resp, op.Path)
		return nil, err
	}
	vs, err := txnVersions(cops, plan, resp)
	if err != nil {
		return nil, err
	}
	return vs[0], nil
}

// writeNonce returns the Flags of a file write. Consul skips a write that
// changes nothing (same value, same flags) without bumping the key's
// ModifyIndex, but every Update must yield a new version, so each write
// stores a fresh random 64-bit nonce in the key's Flags (never
// api.LockFlagValue, the flags of lock keys). The nonce also lets a large
// write recognise its own value when it reads the key back (writeLarge). A
// rewrite of an identical value keeps its version only if it draws the very
// same nonce (a 2^-64 chance), which leaves the store in an identical state
// anyway.
func writeNonce() uint64 {
	for {
		if n := rand.Uint64(); n != api.LockFlagValue {
			return n
		}
	}
}

// Update implements topo.Conn.Update. A nil version is an unconditional
// write (creating the key if absent); a non-nil one is a check-and-set on
// the key's ModifyIndex, which never creates the key: BadVersion when the
// index differs, NoNode when the key is absent (version 0, which no key
// ever has, gives one of those too). Up to 360 KiB it is one transaction
// returning the new ModifyIndex; larger values take two or three requests
// and, when another writer overwrites them before their version can be
// read back, return Unavailable with ErrVersionUnknown (see writeLarge).
// Every Update yields a new version, even of identical contents (see
// writeNonce). Errors as for Create; a foreign or negative version gives
// InvalidArgument. A key at a reserved place (a "locks", "Lock" or
// "elections" segment in its KV path: a Conn rooted at <root>/elections
// or inside a "locks" directory, say) is read first: a lock or election
// key (held by a session, or with the lock flags) is left alone,
// NodeExists, and any other is written at the ModifyIndex read (one
// request more; ResourceExhausted, nothing written, when the key changed
// between every read and write of guardedAttempts; see guard.go).
func (c *Conn) Update(ctx context.Context, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	p, index, err := backendkit.BeginVersioned(ctx, filePath, func(p string) (string, int64, error) { return backendkit.CheckUpdate(p, contents, version) }, c.isClosed)
	if err != nil {
		return nil, err
	}
	if version != nil && index == 0 {
		return nil, c.missingOrBadVersion(ctx, p, topo.TxnUpdate)
	}
	return c.write(ctx, backendkit.TxnOp{Kind: topo.TxnUpdate, Path: p, Contents: contents, Version: index})
}

// ErrVersionUnknown is the cause of the Unavailable error of an Update or
// Create of a value larger than 360 KiB that was applied, but replaced or
// deleted by another writer before its version could be read back (Consul
// keeps no history, and its KV PUT does not return the new index). Like a
// timeout, the outcome for the caller is indeterminate: the write happened
// and is already overwritten. No version is made up for it, so no version
// is ever returned for two writes.
var ErrVersionUnknown = errors.New("the large value was written but overwritten by another writer before its version could be read; consul keeps no history")

// writeLarge writes a value too large for a transaction through the KV
// endpoint, whose PUT never returns the new ModifyIndex: with a fresh
// nonce in Flags (cas on index 0 for Create, on the version for a
// versioned Update, else a plain PUT), then a consistent read-back; a key
// still carrying the nonce has this write's ModifyIndex, never another
// writer's (else Unavailable with ErrVersionUnknown; docs/layout-consul.md).
func (c *Conn) writeLarge(ctx context.Context, op backendkit.TxnOp) (topo.Version, error) {
	p, key := op.Path, c.key(op.Path)
	nonce := writeNonce()
	pair := &api.KVPair{Key: key, Value: op.Contents, Flags: nonce, ModifyIndex: uint64(max(op.Version, 0))}
	if c.guardedWrite(op) {
		if err := c.writeLargeGuarded(ctx, op, pair); err != nil {
			return nil, err
		}
	} else {
		ok := true
		var err error
		if op.Kind == topo.TxnUpdate && op.Version == backendkit.AnyVersion {
			_, err = c.kv.Put(pair, c.writeOptions(ctx))
		} else {
			ok, _, err = c.kv.CAS(pair, c.writeOptions(ctx))
		}
		switch {
		case err != nil:
			return nil, c.convertError(ctx, err, p)
		case !ok && op.Kind == topo.TxnCreate:
			return nil, topo.NewError(topo.NodeExists, p)
		case !ok:
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

// writeLargeGuarded is writeLarge's write of pair for a guarded Update
// (see guardedKey): it reads the key first, refuses a lock or election
// key (NodeExists), and writes with a check-and-set at the index read
// (0 when absent), reading again when the key changed in between (see
// runTxn); a version that is not the index read fails as the
// check-and-set would (NoNode, BadVersion).
func (c *Conn) writeLargeGuarded(ctx context.Context, op backendkit.TxnOp, pair *api.KVPair) error {
	for range guardedAttempts {
		states, err := c.readGuarded(ctx, []backendkit.TxnOp{op})
		if err != nil {
			return err
		}
		refused, index := guardedPlan(op, states[pair.Key])
		if refused != nil {
			return refused
		}
		pair.ModifyIndex = index
		ok, _, err := c.kv.CAS(pair, c.writeOptions(ctx))
		if err != nil {
			return c.convertError(ctx, err, op.Path)
		}
		if ok {
			return nil
		}
	}
	return backendkit.Wrap(topo.ResourceExhausted, op.Path, ErrGuardedContention)
}

// missingOrBadVersion explains a failed check-and-set of an op of kind
// (an update or a delete) on p with a consistent read: NoNode when the key
// is absent, BadVersion otherwise; for a guarded write (see guardedKey)
// of a lock or election key, entryError's NodeExists or NoNode.
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

// Get implements topo.Conn.Get: one KV read. It returns NoNode when the key
// is absent; other errors as for Create.
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

// GetVersion implements topo.Conn.GetVersion. Consul keeps no history of a
// key's values, so after validating its arguments it always returns
// NoImplementation.
func (c *Conn) GetVersion(ctx context.Context, filePath string, version int64) ([]byte, error) {
	return nil, backendkit.NoHistory(ctx, filePath, version, c.isClosed, "consul keeps no history of a key's values")
}

// List implements topo.Conn.List: one recursive KV read of the prefix.
// Lock and election keys (lock flags, or held by a session) are left out.
// Files at reserved paths (see topo.IsReserved) that another tool wrote,
// for example a key d/Lock without lock flags or session, are not listed:
// List returns the other files together with the PartialResult error of
// backendkit.ReservedFiles naming them. Keys that are no canonical path
// (another tool's "t/" holding a value) are listed under their raw paths.
// It returns NoNode when no file matches
// (and none is reserved); other errors as for Get.
func (c *Conn) List(ctx context.Context, filePathPrefix string) ([]topo.KVInfo, error) {
	prefix, err := backendkit.Begin(ctx, filePathPrefix, topo.CleanPrefix, c.isClosed)
	if err != nil {
		return nil, err
	}
	pairs, _, err := c.kv.List(c.dirPrefix("")+prefix, c.queryOptions(ctx))
	if err != nil {
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

// files keeps the pairs that are files under the root (not locks, not
// election keys), sorted by path, and returns apart, sorted, the paths of
// the files at reserved paths, and the keys another tool wrote that are no
// canonical path ("t/" holding a value, "a//b"). List lists those under
// their raw paths, after the files, as etcd2topo lists them, so that
// callers can name them instead of losing them; a "folder" key (ending in
// "/", no value, as Consul's UI makes) is no file and stays out.
func (c *Conn) files(pairs api.KVPairs) (files []backendkit.FileState, reserved []string, raw []topo.KVInfo) {
	files = make([]backendkit.FileState, 0, len(pairs))
	for _, pair := range pairs {
		p, ok := c.relPath(pair.Key)
		if !ok || isLockPair(pair) {
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
		files = append(files, backendkit.FileState{Path: p, Contents: value(pair), Version: int64(pair.ModifyIndex)})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	sort.Strings(reserved)
	return files, reserved, raw
}

// Delete implements topo.Conn.Delete. A nil version deletes the key in a
// transaction that first reads it, so an absent key gives NoNode in one
// round trip; a non-nil one checks the ModifyIndex in the same transaction
// (BadVersion if it differs, NoNode if the key is absent); Consul's
// per-operation errors tell the two apart. Other errors as for Create.
// Directories are implicit in Consul, so a directory emptied by the delete
// vanishes from its parent's listing. A key at a reserved place (see
// Update) is read first: a lock or election key is no file, NoNode, and
// is left alone; any other is deleted at the ModifyIndex read.
func (c *Conn) Delete(ctx context.Context, filePath string, version topo.Version) error {
	p, index, err := backendkit.BeginVersioned(ctx, filePath, func(p string) (string, int64, error) { return backendkit.CheckDelete(p, version) }, c.isClosed)
	if err != nil {
		return err
	}
	if version != nil && index == 0 {
		return c.missingOrBadVersion(ctx, p, topo.TxnDelete)
	}
	_, err = c.write(ctx, backendkit.TxnOp{Kind: topo.TxnDelete, Path: p, Version: index})
	return err
}
