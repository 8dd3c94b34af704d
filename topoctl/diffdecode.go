package topoctl

// diff --decode: the two sides of a file that differs, decoded by its
// path, shown as a line diff.

import (
	"strings"

	"github.com/pmezard/go-difflib/difflib"

	"github.com/topokit/topokit/topo"
)

// decodedDifference is what diff --decode adds to a file that differs:
// each side's value decoded (JSON output), its readable text, and why a
// side does not decode.
type decodedDifference struct {
	FromDecoded any    `json:"from_decoded,omitempty"`
	ToDecoded   any    `json:"to_decoded,omitempty"`
	DecodeError string `json:"decode_error,omitempty"`
	// fromText and toText are the readable forms diff prints a line diff
	// of.
	fromText, toText string
}

// decodeDifferences decodes, with dec, both sides of every difference of
// kind "differs" in diffs (a, b: the files of each side), in place.
func decodeDifferences(dec *recordDecoder, diffs []difference, a, b []topo.KVInfo, multiline bool) {
	values := func(kvs []topo.KVInfo) map[string][]byte {
		m := make(map[string][]byte, len(kvs))
		for _, kv := range kvs {
			m[displayPath(kv.Path)] = kv.Value
		}
		return m
	}
	av, bv := values(a), values(b)
	for i := range diffs {
		d := &diffs[i]
		if d.Kind != "differs" {
			continue
		}
		p := strings.TrimPrefix(d.Path, "/")
		dd := &decodedDifference{}
		var ferr, terr error
		dd.FromDecoded, dd.fromText, ferr = dec.decode(p, av[d.Path], multiline)
		dd.ToDecoded, dd.toText, terr = dec.decode(p, bv[d.Path], multiline)
		switch {
		case ferr != nil:
			dd.DecodeError = "from: " + ferr.Error()
		case terr != nil:
			dd.DecodeError = "to: " + terr.Error()
		}
		d.decodedDifference = dd
	}
}

// text is the lines diff --decode prints below "differs: PATH": a
// unified diff of the two decoded values, or why they do not decode.
func (dd *decodedDifference) text(path string) string {
	if dd.DecodeError != "" {
		return "  not decoded: " + escapeControl(dd.DecodeError) + "\n"
	}
	s, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A:        difflib.SplitLines(strings.TrimSuffix(dd.fromText, "\n")),
		B:        difflib.SplitLines(strings.TrimSuffix(dd.toText, "\n")),
		FromFile: "from " + path, ToFile: "to " + path, Context: 3,
	})
	if err != nil {
		// Writing to a strings.Builder does not fail.
		return "  not decoded: " + err.Error() + "\n"
	}
	if s == "" {
		// The bytes differ, their decoded forms do not (e.g. fields in
		// another order).
		return "  decoded, the same: " + path + "\n"
	}
	return s
}
