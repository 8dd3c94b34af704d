package ui

import (
	"net/http"
	"slices"
	"strings"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/copy"
	"github.com/topokit/topokit/topo/tree"
)

// maxCompare bounds the differences one compare answers with.
const maxCompare = 1000

// differenceJSON is one difference of two trees, with both sides decoded
// when the decoder knows the record.
type differenceJSON struct {
	// Path is relative to both compared directories.
	Path string `json:"path"`
	// Kind is "only-in-a", "only-in-b" or "differs".
	Kind string    `json:"kind"`
	A    *fileJSON `json:"a,omitempty"`
	B    *fileJSON `json:"b,omitempty"`
}

// compare answers the differences of two subtrees: GET
// /api/compare?a=DIR&b=DIR[&store=NAME], b in the store NAME of
// Options.Stores when given, else in the main store (topo/copy's Compare
// on what tree.List reads). Versions are not compared. Files that cannot
// be compared (tree.Listing's Reserved and Odd) are named, per side, in
// notComparedA and notComparedB, as topoctl diff names them.
func (s *Server) compare(w http.ResponseWriter, r *http.Request) {
	a, err := dirParam(r, "a")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	b, err := dirParam(r, "b")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	other := s.opts.Conn
	if name := r.URL.Query().Get("store"); name != "" {
		c, ok := s.opts.Stores[name]
		if !ok {
			s.fail(w, r, badRequest("no store named "+name))
			return
		}
		other = c
	}
	ctx, cancel := s.callCtx(r)
	defer cancel()
	la, err := tree.List(ctx, s.opts.Conn, a)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	lb, err := tree.List(ctx, other, b)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	fa, fb := relative(la.Files, a), relative(lb.Files, b)
	diffs := copy.Compare(fa, fb)
	byPath := func(fs []topo.KVInfo) map[string]topo.KVInfo {
		m := make(map[string]topo.KVInfo, len(fs))
		for _, f := range fs {
			m[f.Path] = f
		}
		return m
	}
	ma, mb := byPath(fa), byPath(fb)
	out := []differenceJSON{}
	for _, d := range diffs {
		if len(out) == maxCompare {
			break
		}
		dj := differenceJSON{Path: d.Path}
		switch d.Kind {
		case copy.OnlyInFrom:
			dj.Kind = "only-in-a"
		case copy.OnlyInTo:
			dj.Kind = "only-in-b"
		default:
			dj.Kind = "differs"
		}
		if f, ok := ma[d.Path]; ok {
			fj := s.describe(join(a, d.Path), f.Value, f.Version)
			dj.A = &fj
		}
		if f, ok := mb[d.Path]; ok {
			fj := s.describe(join(b, d.Path), f.Value, f.Version)
			dj.B = &fj
		}
		out = append(out, dj)
	}
	writeJSON(w, http.StatusOK, map[string]any{"a": "/" + a, "b": "/" + b, "filesA": len(fa), "filesB": len(fb),
		"differences": out, "truncated": len(diffs) > maxCompare,
		"notComparedA": notCompared(la), "notComparedB": notCompared(lb)})
}

// notCompared are the files of l that cannot be compared, as topoctl
// diff names them ("not compared: PATH"): those at reserved paths that
// another tool wrote, and those under keys that are no canonical path;
// sorted, each with a leading "/".
func notCompared(l tree.Listing) []string {
	out := []string{}
	for _, p := range l.Reserved {
		out = append(out, "/"+p)
	}
	for _, p := range l.Odd {
		out = append(out, "/"+p)
	}
	slices.Sort(out)
	return out
}

// relative returns files with paths relative to dir (canonical), still
// sorted.
func relative(files []topo.KVInfo, dir string) []topo.KVInfo {
	out := make([]topo.KVInfo, len(files))
	for i, f := range files {
		f.Path = strings.TrimPrefix(strings.TrimPrefix(f.Path, dir), "/")
		out[i] = f
	}
	return out
}

// join is dir/p for a canonical dir ("" the root).
func join(dir, p string) string {
	if dir == "" {
		return p
	}
	return dir + "/" + p
}
