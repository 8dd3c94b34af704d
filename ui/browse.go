package ui

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/decode"
	"github.com/topokit/topokit/topo/inspect"
	"github.com/topokit/topokit/topo/tree"
)

// maxSearch bounds the files a search answers with.
const maxSearch = 500

// getParallel bounds the Gets in flight for one page of a directory.
const getParallel = 16

// entryJSON is one directory entry as the page shows it: what stat says.
type entryJSON struct {
	Name      string `json:"name"`
	Path      string `json:"path"`
	Dir       bool   `json:"dir"`
	File      bool   `json:"file"`
	Ephemeral bool   `json:"ephemeral,omitempty"`
	Version   string `json:"version,omitempty"`
	Size      *int   `json:"size,omitempty"`
	// Owner is what owns an ephemeral file, as the store names it
	// (ownerOf: "lease ID" on etcd, "session ID" on ZooKeeper and
	// Consul); empty for other entries and on stores that do not say.
	Owner string `json:"owner,omitempty"`
}

// ownerFields are the inspect.StoreMeta fields that name what owns an
// ephemeral file, with the word the page shows before the value: etcd's
// lease, ZooKeeper's ephemeral owner (a session), Consul's session.
var ownerFields = map[string]string{"lease": "lease", "ephemeral_owner": "session", "session": "session"}

// ownerOf returns the owner of the ephemeral file p (canonical) as
// StoreMeta reads it ("lease 6502a2...", "session 0x1000..."), or ""
// when the store does not say.
func (s *Server) ownerOf(ctx context.Context, p string) string {
	meta, err := inspect.StoreMeta(ctx, s.opts.Conn, p)
	if err != nil {
		return ""
	}
	for _, m := range meta {
		if word, ok := ownerFields[m.Name]; ok {
			if v, ok := m.Value.(string); ok && v != "" {
				return word + " " + v
			}
		}
	}
	return ""
}

// dirPath reads and checks a directory path parameter.
func dirParam(r *http.Request, name string) (string, error) {
	return topo.CleanDirPath(r.URL.Query().Get(name))
}

// maxDirLimit bounds the entries one answer of /api/dir carries when the
// page asks for more than a page (limit), unless Options.PageSize is
// larger.
const maxDirLimit = 10000

// dir answers one page of a directory's entries: GET
// /api/dir?path=DIR&offset=N&limit=L. A page holds L entries from offset
// N (both optional: 0 and Options.PageSize; L at most the larger of
// maxDirLimit and PageSize, more is cut to that); "next" is the offset of
// the entry after the page, -1 after the last. The page asks for as many
// entries as it shows when it reads a listing again. Files of the page carry their version and
// size (one Get each, several at a time), ephemeral ones (a lock's or an
// election's entries) also their owner, as stat shows them; directories
// do not.
func (s *Server) dir(w http.ResponseWriter, r *http.Request) {
	p, err := dirParam(r, "path")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	offset := 0
	if o := r.URL.Query().Get("offset"); o != "" {
		if offset, err = strconv.Atoi(o); err != nil || offset < 0 {
			s.fail(w, r, badRequest("offset: want a number >= 0"))
			return
		}
	}
	limit := s.opts.PageSize
	if l := r.URL.Query().Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 1 {
			s.fail(w, r, badRequest("limit: want a number >= 1"))
			return
		}
		limit = min(limit, max(maxDirLimit, s.opts.PageSize))
	}
	ctx, cancel := s.callCtx(r)
	defer cancel()
	entries, err := tree.Entries(ctx, s.opts.Files, p, tree.EntriesOptions{})
	if p == "" && topo.IsErrType(err, topo.NoNode) {
		entries, err = nil, nil // an empty store: the root is there, empty
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	total := len(entries)
	// (offset+limit may overflow an int: the page is counted from where
	// it starts, at most the end)
	start := min(offset, total)
	end := start + min(limit, total-start)
	page := entries[start:end]
	out := make([]entryJSON, len(page))
	var wg sync.WaitGroup
	sem := make(chan struct{}, getParallel)
	for i, e := range page {
		out[i] = entryJSON{Name: e.Name, Path: "/" + e.Path, Dir: e.Type == topo.TypeDirectory, File: e.Type == topo.TypeFile, Ephemeral: e.Ephemeral}
		if e.Type != topo.TypeFile {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if e.Ephemeral {
				out[i].Owner = s.ownerOf(ctx, e.Path)
			}
			v, ver, err := s.filesFor(e.Path).Get(ctx, e.Path)
			if err != nil {
				return
			}
			n := len(v)
			out[i].Version, out[i].Size = ver.String(), &n
		}()
	}
	wg.Wait()
	next := -1
	if end < total {
		next = end
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": "/" + p, "entries": out, "total": total, "offset": offset, "next": next})
}

// fileJSON is a file as the page shows it.
type fileJSON struct {
	Path    string `json:"path"`
	Version string `json:"version"`
	Size    int    `json:"size"`
	// Text is the value when it is printable UTF-8; Hex always; SHA256
	// is the value's SHA-256 (hex), which a write or a delete sends as
	// the value it replaces (writeRequest.BaseSHA256).
	Text   *string `json:"text,omitempty"`
	Hex    string  `json:"hex"`
	SHA256 string  `json:"sha256"`
	// Decoded is the value as topoctl get --decode shows it
	// (decode.Registry.Decode: a record as JSON, fields its type lacks
	// under "@unknown"; a lock's, an election's or a metadata file as the
	// JSON or text it holds); DecodeError says why a value of a known
	// type does not decode. Type is the record's message type, and
	// JSONEdit says the record decodes fully as it, so that its JSON
	// encodes back to the same record, and that a save of that JSON fits
	// in a request (Options.MaxBody); JSONEditError, for a record of a
	// known type, says why not (a record with fields its type lacks is
	// edited as text or hex, which keep them; so is one whose JSON is too
	// large to send back, or does not encode back). JSONReencoded says
	// that a save of that JSON, even unchanged, stores other bytes than
	// the value's: the same record, encoded anew (deterministically: map
	// entries sorted by key, fields in number order), which the JSON's
	// diff does not show.
	Type          string `json:"type,omitempty"`
	Decoded       string `json:"decoded,omitempty"`
	DecodeError   string `json:"decodeError,omitempty"`
	JSONEdit      bool   `json:"jsonEdit,omitempty"`
	JSONEditError string `json:"jsonEditError,omitempty"`
	JSONReencoded bool   `json:"jsonReencoded,omitempty"`
	// Meta is what the store keeps about the path (inspect.StoreMeta).
	Meta map[string]any `json:"meta,omitempty"`
}

// describe renders the value of the file at p (canonical).
func (s *Server) describe(p string, value []byte, v topo.Version) fileJSON {
	f := fileJSON{Path: "/" + p, Size: len(value), Hex: hex.EncodeToString(value), SHA256: valueSum(value)}
	if v != nil {
		f.Version = v.String()
	}
	if isText(value) {
		t := string(value)
		f.Text = &t
	}
	js, err := s.opts.Decoder.Decode(p, value, true)
	var noType *decode.TypeError
	switch {
	case err == nil:
		f.Decoded = string(js)
	case !errors.As(err, &noType):
		f.DecodeError = err.Error()
	}
	if content, _ := s.opts.Decoder.Identify(p); content != decode.MessageContent && content != decode.UnknownContent {
		return f // text: a lock's, an election's or a metadata file
	}
	if md, err := s.opts.Decoder.TypeFor(p); err == nil {
		f.Type = string(md.FullName())
		js, err := s.opts.Decoder.JSON(md, value, true)
		if err == nil {
			if n := jsonSaveSize(f, js); n > s.opts.MaxBody {
				err = fmt.Errorf("its JSON is too large to save: a save of it is a request of %d bytes, more than the %d bytes a request may hold", n, s.opts.MaxBody)
			}
		}
		if err == nil {
			// (what a save of the JSON unchanged would store)
			var enc []byte
			if enc, err = s.encode(p, writeRequest{Format: "json", Value: string(js)}); err != nil {
				err = fmt.Errorf("its JSON does not encode back: %w", err)
			}
			f.JSONReencoded = err == nil && !bytes.Equal(enc, value)
		}
		f.JSONEdit = err == nil
		if err != nil {
			f.JSONEditError = err.Error()
		}
	}
	return f
}

// jsonSaveSize is the size in bytes of the page's save of f unchanged as
// JSON (js), its writeRequest with the value's SHA-256 as base, or a
// little more: the JSON is escaped as encoding/json escapes it, which
// escapes more than the page does.
func jsonSaveSize(f fileJSON, js []byte) int64 {
	value, _ := json.Marshal(string(js))
	req, _ := json.Marshal(writeRequest{Path: f.Path, Version: f.Version, BaseSHA256: &f.SHA256, Format: "json"})
	return int64(len(req) + len(value))
}

// valueSum is the SHA-256 of value, in hex (fileJSON.SHA256).
func valueSum(value []byte) string {
	sum := sha256.Sum256(value)
	return hex.EncodeToString(sum[:])
}

// filesFor is the Conn that reads the file at p (canonical): Files, or
// Conn for a lock's or an election's entry (topo.IsReserved), which the
// tree lists but a cache of files (Options.Files) does not hold.
func (s *Server) filesFor(p string) topo.Conn {
	if topo.IsReserved(p) {
		return s.opts.Conn
	}
	return s.opts.Files
}

// file answers a file: GET /api/file?path=FILE; a lock's or an
// election's entry is read from the store (see filesFor).
func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	p, err := topo.CleanFilePath(r.URL.Query().Get("path"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := s.callCtx(r)
	defer cancel()
	value, v, err := s.filesFor(p).Get(ctx, p)
	if err != nil {
		s.fail(w, r, tree.WithPath(err, p))
		return
	}
	f := s.describe(p, value, v)
	if meta, err := inspect.StoreMeta(ctx, s.opts.Conn, p); err == nil && len(meta) > 0 {
		f.Meta = map[string]any{}
		for _, m := range meta {
			if u, ok := m.Value.(uint64); ok {
				// Consul's flags: beyond what a JavaScript number holds exactly.
				f.Meta[m.Name] = strconv.FormatUint(u, 10)
				continue
			}
			f.Meta[m.Name] = m.Value
		}
	}
	writeJSON(w, http.StatusOK, f)
}

// search answers the files whose path starts with a prefix: GET
// /api/search?prefix=P (at most maxSearch, then "truncated"). Files under
// keys that are no canonical path (another tool's "a//b", "t/"), which
// GET /api/file refuses, are not listed: "odd" counts them.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	p, err := topo.CleanPrefix(r.URL.Query().Get("prefix"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := s.callCtx(r)
	defer cancel()
	kvs, err := s.opts.Files.List(ctx, p)
	if err != nil && !topo.IsErrType(err, topo.NoNode) && !topo.IsErrType(err, topo.PartialResult) {
		s.fail(w, r, err)
		return
	}
	out := []entryJSON{}
	odd, truncated := 0, false
	for _, kv := range kvs {
		switch {
		case !tree.CanonicalFile(kv.Path):
			odd++
		case len(out) == maxSearch:
			truncated = true
		default:
			n := len(kv.Value)
			out = append(out, entryJSON{Name: kv.Path, Path: "/" + kv.Path, File: true, Version: versionString(kv.Version), Size: &n})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"prefix": "/" + p, "files": out, "truncated": truncated, "odd": odd})
}

func versionString(v topo.Version) string {
	if v == nil {
		return ""
	}
	return v.String()
}

// count answers how many files a recursive delete of a directory would
// remove: GET /api/count?path=DIR. "listing" names which files they are,
// at which versions and holding what (listingOf), for the delete to remove
// only those, unchanged.
func (s *Server) count(w http.ResponseWriter, r *http.Request) {
	p, l, ok := s.deletable(w, r, r.URL.Query().Get("path"))
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": "/" + p, "files": len(l.Files), "skipped": len(l.Reserved) + len(l.Odd), "listing": listingOf(l.Files)})
}

// listingOf is a digest of files (hex SHA-256) over each one's path,
// version and value: equal for two listings of the same files at the same
// versions holding the same bytes. The value counts too because ZooKeeper
// numbers the versions of a file deleted and created again from 0: another
// writer's file at a version listed is not the file listed.
func listingOf(files []topo.KVInfo) string {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	for _, f := range files {
		field([]byte(f.Path))
		field([]byte(versionString(f.Version)))
		field(f.Value)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// deletable checks the directory dir that the page would delete (any but
// the root) and lists its files, answering the error itself when it fails.
func (s *Server) deletable(w http.ResponseWriter, r *http.Request, dir string) (string, tree.Listing, bool) {
	p, err := topo.CleanDirPath(dir)
	if err == nil && p == "" {
		err = badRequest("the root cannot be deleted from the page")
	}
	if err != nil {
		s.fail(w, r, err)
		return "", tree.Listing{}, false
	}
	ctx, cancel := s.callCtx(r)
	defer cancel()
	l, err := tree.List(ctx, s.opts.Files, p)
	if err != nil {
		s.fail(w, r, err)
		return "", tree.Listing{}, false
	}
	return p, l, true
}

// version answers an earlier value of a file: GET
// /api/version?path=FILE&version=N, where the store keeps history
// (NoImplementation, 501, where it does not; Compacted, 410, once
// discarded).
func (s *Server) version(w http.ResponseWriter, r *http.Request) {
	p, err := topo.CleanFilePath(r.URL.Query().Get("path"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	n, err := strconv.ParseInt(r.URL.Query().Get("version"), 10, 64)
	if err != nil || n <= 0 {
		s.fail(w, r, badRequest("version: want a number > 0"))
		return
	}
	ctx, cancel := s.callCtx(r)
	defer cancel()
	value, err := s.opts.Conn.GetVersion(ctx, p, n)
	if err != nil {
		s.fail(w, r, tree.WithPath(err, p))
		return
	}
	writeJSON(w, http.StatusOK, s.describe(p, value, topo.NumericVersion(n)))
}

// isText reports whether value reads as text: UTF-8 whose only control
// characters are newlines, carriage returns and tabs (decode.Printable
// with line breaks).
func isText(value []byte) bool {
	return utf8.Valid(value) && decode.Printable(bytes.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' {
			return ' '
		}
		return r
	}, value))
}
