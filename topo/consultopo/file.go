package consultopo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
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

// txnError describes a rolled-back transaction.
func txnError(resp *api.TxnResponse) error {
	if resp == nil || len(resp.Errors) == 0 {
		return errors.New("transaction rolled back")
	}
	return fmt.Errorf("transaction rolled back: %s", resp.Errors[0].What)
}

// lastIndex returns the ModifyIndex in the last result of a successful
// transaction (the write that ended it; deletes report no result).
func lastIndex(p string, resp *api.TxnResponse) (topo.Version, error) {
	if resp == nil || len(resp.Results) == 0 || resp.Results[len(resp.Results)-1].KV == nil {
		return nil, topo.Wrap(topo.Unavailable, p, errors.New("transaction returned no result"))
	}
	return topo.NumericVersion(resp.Results[len(resp.Results)-1].KV.ModifyIndex), nil
}

// maxTxnValue is the largest value written through a transaction. Consul
// caps a transaction's request body at 512 KiB (txn_max_req_len) and
// transactions carry values in base64, so larger values (up to
// topo.MaxValueSize, which is also Consul's kv_max_value_size) are written
// through the plain KV endpoint instead.
const maxTxnValue = 360 * 1024

// Create implements topo.Conn.Create: a transaction writing the key with a
// check-and-set on index 0 (only if absent), so the new ModifyIndex comes
// back in the same round trip. It returns NodeExists if the key exists,
// InvalidPath/InvalidArgument for bad input, Timeout/Interrupted when ctx
// ends, Closed after Close and Unavailable when the agent cannot be reached.
func (c *Conn) Create(ctx context.Context, filePath string, contents []byte) (topo.Version, error) {
	p, err := topo.CheckCreate(filePath, contents)
	if err != nil {
		return nil, err
	}
	if err := c.begin(ctx, p); err != nil {
		return nil, err
	}
	if len(contents) > maxTxnValue {
		return c.writeLarge(ctx, p, contents, true, 0)
	}
	ok, resp, err := c.txn(ctx, api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: c.key(p), Value: contents, Index: 0}}})
	if err != nil {
		return nil, c.convertError(ctx, err, p)
	}
	if !ok {
		return nil, topo.Wrap(topo.NodeExists, p, txnError(resp))
	}
	return lastIndex(p, resp)
}

// writeNonce returns the Flags of a file write. Consul skips a write that
// changes nothing (same value, same flags) without bumping the key's
// ModifyIndex, but every Update must yield a new version, so each write
// stores a fresh random nonce below 2^32 in the key's Flags (lock keys carry
// api.LockFlagValue, far above that range). A rewrite of an identical value
// keeps its version only if it draws the very same nonce (a 2^-32 chance),
// which leaves the store in an identical state anyway.
func writeNonce() uint64 { return uint64(rand.Uint32()) }

// Update implements topo.Conn.Update. A nil version is an unconditional
// write (creating the key if absent); a non-nil one is a check-and-set on
// the key's ModifyIndex, which never creates the key: BadVersion when the
// index differs, NoNode when the key is absent (version 0, which no key
// ever has, gives one of those too). It is one transaction returning the
// new ModifyIndex; every Update yields a new version, even of identical
// contents (see writeNonce). Errors as for Create; a foreign or negative
// version gives InvalidArgument.
func (c *Conn) Update(ctx context.Context, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	p, index, err := topo.CheckUpdate(filePath, contents, version)
	if err != nil {
		return nil, err
	}
	if err := c.begin(ctx, p); err != nil {
		return nil, err
	}
	if version != nil && index == 0 {
		return nil, c.missingOrBadVersion(ctx, p)
	}
	if len(contents) > maxTxnValue {
		// writeLarge takes index 0, not topo.AnyVersion, for unconditional.
		return c.writeLarge(ctx, p, contents, false, uint64(max(index, 0)))
	}
	op := &api.KVTxnOp{Verb: api.KVSet, Key: c.key(p), Value: contents, Flags: writeNonce()}
	if version != nil {
		op.Verb, op.Index = api.KVCAS, uint64(index)
	}
	ok, resp, err := c.txn(ctx, api.TxnOps{{KV: op}})
	if err != nil {
		return nil, c.convertError(ctx, err, p)
	}
	if !ok {
		return nil, c.missingOrBadVersion(ctx, p)
	}
	return lastIndex(p, resp)
}

// writeLarge writes a value too large for a transaction through the KV
// endpoint: Create as a check-and-set on index 0, Update as an
// unconditional write (index 0) or a check-and-set on index. The KV
// endpoint does not return the new ModifyIndex, so it is read back
// afterwards (a concurrent writer may have moved it further by then).
func (c *Conn) writeLarge(ctx context.Context, p string, contents []byte, create bool, index uint64) (topo.Version, error) {
	key := c.key(p)
	pair := &api.KVPair{Key: key, Value: contents, ModifyIndex: index}
	if !create {
		pair.Flags = writeNonce()
	}
	var ok bool
	var err error
	if create || index != 0 {
		ok, _, err = c.kv.CAS(pair, c.writeOptions(ctx))
	} else {
		_, err = c.kv.Put(pair, c.writeOptions(ctx))
		ok = true
	}
	switch {
	case err != nil:
		return nil, c.convertError(ctx, err, p)
	case !ok && create:
		return nil, topo.NewError(topo.NodeExists, p)
	case !ok:
		return nil, c.missingOrBadVersion(ctx, p)
	}
	cur, _, err := c.kv.Get(key, c.queryOptions(ctx))
	switch {
	case err != nil:
		return nil, c.convertError(ctx, err, p)
	case cur == nil:
		return nil, topo.Wrap(topo.NoNode, p, errors.New("deleted right after the write"))
	}
	return topo.NumericVersion(cur.ModifyIndex), nil
}

// missingOrBadVersion explains a failed check-and-set on p: NoNode when the
// key is absent, BadVersion otherwise.
func (c *Conn) missingOrBadVersion(ctx context.Context, p string) error {
	pair, _, err := c.kv.Get(c.key(p), c.queryOptions(ctx))
	switch {
	case err != nil:
		return c.convertError(ctx, err, p)
	case pair == nil:
		return topo.NewError(topo.NoNode, p)
	default:
		return topo.NewError(topo.BadVersion, p)
	}
}

// Get implements topo.Conn.Get: one KV read. It returns NoNode when the key
// is absent; other errors as for Create.
func (c *Conn) Get(ctx context.Context, filePath string) ([]byte, topo.Version, error) {
	p, err := topo.CleanFilePath(filePath)
	if err != nil {
		return nil, nil, err
	}
	if err := c.begin(ctx, p); err != nil {
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
	p, err := topo.CleanFilePath(filePath)
	if err != nil {
		return nil, err
	}
	if version < 0 {
		return nil, topo.Wrap(topo.InvalidArgument, p, fmt.Errorf("negative version %d", version))
	}
	if err := c.begin(ctx, p); err != nil {
		return nil, err
	}
	return nil, topo.Wrap(topo.NoImplementation, p, errors.New("consul keeps no history of a key's values"))
}

// List implements topo.Conn.List: one recursive KV read of the prefix. Lock
// and election keys are left out. It returns NoNode when no file matches;
// other errors as for Create.
func (c *Conn) List(ctx context.Context, filePathPrefix string) ([]topo.KVInfo, error) {
	prefix, err := topo.CleanPrefix(filePathPrefix)
	if err != nil {
		return nil, err
	}
	if err := c.begin(ctx, prefix); err != nil {
		return nil, err
	}
	pairs, _, err := c.kv.List(c.dirPrefix("")+prefix, c.queryOptions(ctx))
	if err != nil {
		return nil, c.convertError(ctx, err, prefix)
	}
	files := c.files(pairs)
	if len(files) == 0 {
		return nil, topo.NewError(topo.NoNode, prefix)
	}
	out := make([]topo.KVInfo, 0, len(files))
	for _, f := range files {
		out = append(out, topo.KVInfo{Path: f.path, Value: value(f.pair), Version: topo.NumericVersion(f.pair.ModifyIndex)})
	}
	return out, nil
}

type file struct {
	path string
	pair *api.KVPair
}

// files keeps the pairs that are files under the root (not locks, not
// election keys, not Consul "folder" keys ending in "/"), sorted by path.
func (c *Conn) files(pairs api.KVPairs) []file {
	out := make([]file, 0, len(pairs))
	for _, pair := range pairs {
		if isLockPair(pair) {
			continue
		}
		p, ok := c.relPath(pair.Key)
		if !ok {
			continue
		}
		if _, err := topo.CleanFilePath(p); err != nil {
			continue
		}
		out = append(out, file{path: p, pair: pair})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// Delete implements topo.Conn.Delete. A nil version deletes the key in a
// transaction that first reads it, so an absent key gives NoNode in one
// round trip; a non-nil one checks the ModifyIndex in the same transaction
// (BadVersion if it differs, NoNode if the key is absent). Other errors as
// for Create. Directories are implicit in Consul, so a directory emptied by
// the delete vanishes from its parent's listing.
func (c *Conn) Delete(ctx context.Context, filePath string, version topo.Version) error {
	p, index, err := topo.CheckDelete(filePath, version)
	if err != nil {
		return err
	}
	if err := c.begin(ctx, p); err != nil {
		return err
	}
	key := c.key(p)
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVGet, Key: key}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: key}},
	}
	if version != nil {
		if index == 0 {
			return c.missingOrBadVersion(ctx, p)
		}
		ops = api.TxnOps{
			{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: key, Index: uint64(index)}},
			{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: key}},
		}
	}
	ok, _, err := c.txn(ctx, ops)
	if err != nil {
		return c.convertError(ctx, err, p)
	}
	if !ok {
		if version == nil {
			return topo.NewError(topo.NoNode, p)
		}
		return c.missingOrBadVersion(ctx, p)
	}
	return nil
}
