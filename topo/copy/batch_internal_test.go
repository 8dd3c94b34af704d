package copy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// absentDirs names, per batch, the new directories of its creates that
// the listing did not show and that no earlier batch writes under (and
// never a path a file is written at).
func TestTreeDirectoryHints(t *testing.T) {
	create := func(p string) Op { return Op{Kind: Create, Path: p} }
	plan := &Plan{dir: "ks", held: map[string]bool{"ks": true, "ks/old": true}}
	bs := [][]Op{
		{create("ks/a/b/f"), create("ks/a/c/f"), create("ks/old/g")},
		{create("ks/a/b/g"), create("ks/d/e"), create("ks/x/y")},
		{create("ks/x")},
	}
	assert.Equal(t, [][]string{{"ks/a/b", "ks/a", "ks/a/c"}, {"ks/d"}, nil}, plan.absentDirs(bs))
}

// batches cuts at n writes, and a value above batchBytes goes alone.
func TestBatches(t *testing.T) {
	ops := []Op{{Path: "a"}, {Path: "b"}, {Path: "c"}, {Path: "big", Value: make([]byte, batchBytes+1)}, {Path: "d"}}
	var got [][]string
	for _, b := range batches(ops, 2) {
		var ps []string
		for _, o := range b {
			ps = append(ps, o.Path)
		}
		got = append(got, ps)
	}
	assert.Equal(t, [][]string{{"a", "b"}, {"big"}, {"c", "d"}}, got)
	assert.Len(t, batches(ops, 1), 5, "no batching below 2")
}
