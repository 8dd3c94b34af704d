package ui

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/copy"
	"github.com/topokit/topokit/topo/tree"
)

// writeRequest is the body of PUT /api/file.
type writeRequest struct {
	Path string `json:"path"`
	// Version is the version the page showed: the write is a
	// compare-and-set on it. Empty creates the file (NodeExists when it
	// exists).
	Version string `json:"version"`
	// Base, when set, is the value the page showed at Version (hex): the
	// write is refused as a conflict unless the file holds it, so that a
	// file deleted and created again by another writer at the same
	// version (ZooKeeper numbers the versions of a file created again
	// from 0) is not overwritten unseen.
	Base *string `json:"base,omitempty"`
	// BaseSHA256, when set, is the SHA-256 of that value (hex; the
	// sha256 of GET /api/file), checked as Base is: the page sends it
	// rather than the value itself, twice the value's size in hex, which
	// for a value over topo.MaxValueSize (another tool's) is more than a
	// request may hold.
	BaseSHA256 *string `json:"baseSha256,omitempty"`
	// Format says how Value is written: "text" (as it is), "hex", or
	// "json" (the record's message type, encoded as protobuf).
	Format string `json:"format"`
	Value  string `json:"value"`
}

// conflictJSON is the answer to a write that lost a compare-and-set: the
// value the store holds now, which the page diffs against its edit.
type conflictJSON struct {
	apiError
	Current *fileJSON `json:"current,omitempty"`
	// Gone says the file is absent: the read of its current value found
	// no file (NoNode). A conflict with neither Current nor Gone could not
	// read the current value (the store failed): the file may be there.
	Gone bool `json:"gone,omitempty"`
}

// decodeBody reads r's JSON body into v, rejecting unknown fields.
func decodeBody(r *http.Request, v any) error {
	d := json.NewDecoder(r.Body)
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return badRequest("request body: " + err.Error())
	}
	return nil
}

// encode turns the page's value into the bytes to store at p.
func (s *Server) encode(p string, req writeRequest) ([]byte, error) {
	switch req.Format {
	case "text", "":
		return []byte(req.Value), nil
	case "hex":
		b, err := hex.DecodeString(req.Value)
		if err != nil {
			return nil, badRequest("value is not hex: " + err.Error())
		}
		return b, nil
	case "json":
		md, err := s.opts.Decoder.TypeFor(p)
		if err != nil {
			return nil, badRequest("no record type for " + p + ": " + err.Error())
		}
		m := dynamicpb.NewMessage(md)
		if err := protojson.Unmarshal([]byte(req.Value), m); err != nil {
			return nil, badRequest("value is not a " + string(md.FullName()) + ": " + err.Error())
		}
		return proto.MarshalOptions{Deterministic: true}.Marshal(m)
	}
	return nil, badRequest("format " + strconv.Quote(req.Format) + ": want text, hex or json")
}

// put writes a file: PUT /api/file with a writeRequest. An update is a
// compare-and-set on the version the page showed; when another writer got
// there first it answers 409 with the current value and writes nothing.
// A write that succeeded answers the file as written (a fileJSON without
// Meta: the value stored and its new version, not read again), which the
// page edits on when the user typed on while the write was asked.
func (s *Server) put(w http.ResponseWriter, r *http.Request) {
	var req writeRequest
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	p, err := topo.CleanFilePath(req.Path)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	value, err := s.encode(p, req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := copy.CheckValue(p, value); err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := s.callCtx(r)
	defer cancel()
	var nv topo.Version
	if req.Version == "" {
		nv, err = s.opts.Files.Create(ctx, p, value)
	} else {
		var v topo.Version
		if v, err = s.shownVersion(ctx, p, req.Version, req.Base, req.BaseSHA256); err == nil {
			nv, err = s.opts.Files.Update(ctx, p, value, v)
		}
	}
	if err != nil {
		s.conflict(w, r, p, err)
		return
	}
	writeJSON(w, http.StatusOK, s.describe(p, value, nv))
}

// shownVersion returns the store's Version of p if its String is shown,
// the version the page displayed, for a compare-and-set on it: the Version
// value comes from the store itself (one Get), so editing works whatever
// Version type the backend uses (a custom backend need not use
// topo.NumericVersion). A file changed since is BadVersion, a file gone
// NoNode, as the store's own compare-and-set would answer; the write that
// follows is still a compare-and-set, so a change between this read and
// it is refused by the store too. When base is not nil it is the value
// the page showed (hex): a file holding another value at that version
// (created again since, on a store that numbers its versions from the
// start again: ZooKeeper) is BadVersion too; so when baseSum is not nil
// and is not the SHA-256 (hex) of the value.
func (s *Server) shownVersion(ctx context.Context, p, shown string, base, baseSum *string) (topo.Version, error) {
	value, v, err := s.opts.Conn.Get(ctx, p)
	if err != nil {
		return nil, err
	}
	if v.String() != shown {
		return nil, &topo.Error{Code: topo.BadVersion, Path: p, Err: fmt.Errorf("the page showed version %s; the file is at version %s now", shown, v)}
	}
	if (base != nil && *base != hex.EncodeToString(value)) || (baseSum != nil && *baseSum != valueSum(value)) {
		return nil, &topo.Error{Code: topo.BadVersion, Path: p, Err: fmt.Errorf("the page showed another value at version %s: the file was created again since", shown)}
	}
	return v, nil
}

// conflict answers a failed write; a lost compare-and-set (BadVersion,
// NodeExists, NoNode) carries the file's current value, or gone when the
// file is absent (neither when that read failed).
func (s *Server) conflict(w http.ResponseWriter, r *http.Request, p string, err error) {
	err = tree.WithPath(err, p)
	if !topo.IsErrType(err, topo.BadVersion) && !topo.IsErrType(err, topo.NodeExists) && !topo.IsErrType(err, topo.NoNode) {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := s.callCtx(r)
	defer cancel()
	out := conflictJSON{apiError: apiError{Error: err.Error(), Code: "Conflict"}}
	if value, v, gerr := s.opts.Conn.Get(ctx, p); gerr == nil {
		f := s.describe(p, value, v)
		out.Current = &f
	} else if topo.IsErrType(gerr, topo.NoNode) {
		out.Gone = true
	}
	writeJSON(w, http.StatusConflict, out)
}

// del deletes a file: DELETE /api/file?path=FILE&version=V, a
// compare-and-set on V (required). An optional JSON body {"base": HEX},
// the value shown, or {"baseSha256": HEX}, its SHA-256, refuses the
// delete as a conflict when the file holds another value at V (see
// writeRequest.Base).
func (s *Server) del(w http.ResponseWriter, r *http.Request) {
	p, err := topo.CleanFilePath(r.URL.Query().Get("path"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	shown := r.URL.Query().Get("version")
	if shown == "" {
		s.fail(w, r, &topo.Error{Code: topo.InvalidArgument, Path: p, Err: errors.New("no version: a delete is a compare-and-set on the version shown")})
		return
	}
	var body struct {
		// Base, when set, is the value shown (hex), as for a write.
		Base *string `json:"base,omitempty"`
		// BaseSHA256, when set, is its SHA-256 (hex), as for a write.
		BaseSHA256 *string `json:"baseSha256,omitempty"`
	}
	if r.ContentLength != 0 {
		if err := decodeBody(r, &body); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	ctx, cancel := s.callCtx(r)
	defer cancel()
	v, err := s.shownVersion(ctx, p, shown, body.Base, body.BaseSHA256)
	if err == nil {
		err = s.opts.Files.Delete(ctx, p, v)
	}
	if err != nil {
		s.conflict(w, r, p, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": "/" + p, "deleted": 1})
}

// deleteTreeRequest is the body of POST /api/delete-tree.
type deleteTreeRequest struct {
	Path string `json:"path"`
	// Count is the number of files the page showed the user (GET
	// /api/count), optional: when given, the delete is refused when the
	// subtree holds another number now. The listing alone decides
	// otherwise (it covers every file's path), so a request without a
	// count is not refused as changed.
	Count *int `json:"count"`
	// Listing is the "listing" of the same answer (required): the delete
	// is refused unless the subtree holds the very files listed, each at
	// the version and with the value listed, so that it removes only
	// files the user confirmed, as they were confirmed: neither a file
	// created since nor another writer's later write to a file listed.
	Listing string `json:"listing"`
}

// deleteTree deletes every file at or under a directory: POST
// /api/delete-tree. It answers 400, deleting nothing, without the listing
// confirmed (a request with a count only cannot say which files, at which
// versions, the user confirmed; the count is optional), and 409 with the
// current count, deleting
// nothing, when the subtree holds other files than that listing: another
// number, other paths, or a file listed at another version or value.
// Each file is then deleted at the version listed: a file another writer
// changes while the delete runs is kept, and the delete stops there with
// 409 ("deleted" says how many files it had deleted: each one confirmed
// and unchanged). The answer says how many files it deleted ("deleted")
// and how many it could not ("skipped": at reserved paths, or under keys
// that are no canonical path; GET /api/count tells them beforehand).
func (s *Server) deleteTree(w http.ResponseWriter, r *http.Request) {
	var req deleteTreeRequest
	if err := decodeBody(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	p, l, ok := s.deletable(w, r, req.Path)
	if !ok {
		return
	}
	if req.Listing == "" {
		s.fail(w, r, badRequest("no listing: send the listing (and, optionally, the count) that GET /api/count answered, so that only the files confirmed, unchanged, are deleted"))
		return
	}
	if (req.Count != nil && len(l.Files) != *req.Count) || req.Listing != listingOf(l.Files) {
		writeJSON(w, http.StatusConflict, map[string]any{"error": "the subtree changed since it was counted (" + strconv.Itoa(len(l.Files)) + " files now, or files written since): confirm again", "code": "Conflict", "files": len(l.Files)})
		return
	}
	ctx, cancel := s.callCtx(r)
	defer cancel()
	n, err := copy.DeleteTree(ctx, s.opts.Files, l.Files, copy.ExecOptions{Parallel: 8, Batch: 64, AtListedVersion: true})
	var de *copy.DeleteError
	if errors.As(err, &de) && topo.IsErrType(de.Err, topo.BadVersion) {
		writeJSON(w, http.StatusConflict, map[string]any{"error": "another writer changed a file while the subtree was deleted: " + de.Err.Error() + "; it is kept, and the delete stopped after deleting " + strconv.Itoa(n) + " of " + strconv.Itoa(len(l.Files)) + " files", "code": "Conflict", "deleted": n})
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": "/" + p, "deleted": n, "skipped": len(l.Reserved) + len(l.Odd)})
}
