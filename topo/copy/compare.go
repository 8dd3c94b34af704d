package copy

import (
	"bytes"

	"github.com/topokit/topokit/topo"
)

// DiffKind says on which side a Difference is.
type DiffKind int

const (
	// OnlyInFrom: the file is only in the first tree.
	OnlyInFrom DiffKind = iota
	// OnlyInTo: the file is only in the second tree.
	OnlyInTo
	// Differs: both trees hold the file, with other bytes.
	Differs
)

// String returns "only-in-from", "only-in-to" or "differs".
func (k DiffKind) String() string {
	return [...]string{"only-in-from", "only-in-to", "differs"}[k]
}

// Difference is one file that two trees do not hold alike.
type Difference struct {
	// Path is the file's canonical path.
	Path string
	Kind DiffKind
	// FromBytes and ToBytes are the sizes on each side that has the file
	// (0 on a side that has not).
	FromBytes, ToBytes int
}

// Compare returns the differences between the trees a and b, both sorted
// by path (as tree.List returns them), in path order. Versions are not
// compared (each store numbers its own); it returns nil when the trees
// hold the same files with the same bytes.
func Compare(a, b []topo.KVInfo) []Difference {
	var out []Difference
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].Path < b[j].Path):
			out = append(out, Difference{Path: a[i].Path, Kind: OnlyInFrom, FromBytes: len(a[i].Value)})
			i++
		case i == len(a) || b[j].Path < a[i].Path:
			out = append(out, Difference{Path: b[j].Path, Kind: OnlyInTo, ToBytes: len(b[j].Value)})
			j++
		default:
			if !bytes.Equal(a[i].Value, b[j].Value) {
				out = append(out, Difference{Path: a[i].Path, Kind: Differs, FromBytes: len(a[i].Value), ToBytes: len(b[j].Value)})
			}
			i++
			j++
		}
	}
	return out
}
