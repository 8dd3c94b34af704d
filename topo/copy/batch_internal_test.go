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

// phases puts a delete after the deletes below it, and everything else
// (and a tree without files below files) in the first phase, in order.
func TestPhases(t *testing.T) {
	ps := []string{"a", "a/b", "a/b/c", "x", "a/d", "w/v"}
	del := []bool{true, true, true, true, false, true}
	got := phases(len(ps), func(i int) string { return ps[i] }, func(i int) bool { return del[i] })
	assert.Equal(t, [][]int{{2, 3, 4, 5}, {1}, {0}}, got)
	flat := phases(3, func(i int) string { return []string{"a/x", "b", "a/y"}[i] }, func(int) bool { return true })
	assert.Equal(t, [][]int{{0, 1, 2}}, flat)
	assert.Empty(t, phases(0, nil, nil))
}
