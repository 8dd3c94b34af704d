package zk2topo

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSortNames: sortNames orders like slices.Sort, for small and large
// sets, names with long common prefixes (tablet aliases), names that are
// prefixes of others, ties in the first 8 bytes after the common prefix,
// bytes above 0x7f and duplicates.
func TestSortNames(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var pool sync.Pool
	gens := map[string]func(i int) string{
		"numbered": func(i int) string { return fmt.Sprintf("f%04d", i) },
		"aliases":  func(i int) string { return fmt.Sprintf("zone1-%010d", r.IntN(1e9)) },
		"ties":     func(i int) string { return fmt.Sprintf("prefix-%08d-%d", r.IntN(4), r.IntN(100)) },
		"prefixes": func(i int) string { return "ab"[:1+r.IntN(2)] + string([]byte{byte(r.IntN(3))})[:r.IntN(2)] },
		"random": func(i int) string {
			b := make([]byte, r.IntN(12))
			for j := range b {
				b[j] = byte(r.IntN(256))
			}
			return string(b)
		},
		"duplicates": func(i int) string { return fmt.Sprintf("d%d", r.IntN(10)) },
	}
	for name, gen := range gens {
		for _, n := range []int{0, 1, 5, 63, 64, 65, 1000, 3000} {
			names := make([]string, n)
			for i := range names {
				names[i] = gen(i)
			}
			r.Shuffle(n, func(i, j int) { names[i], names[j] = names[j], names[i] })
			want := slices.Clone(names)
			slices.Sort(want)
			sortNames(names, &pool)
			require.Equal(t, want, names, "%s, %d names", name, n)
		}
	}
}

// FuzzSortNames: sortNames orders like slices.Sort any set of names (the
// input split at '/' bytes, a character no child name holds, and as many
// copies of those names with a digit appended, so that the sets reach the
// radix sort's sizes).
func FuzzSortNames(f *testing.F) {
	f.Add([]byte("zone1-0000000100/zone1-0000000101/zone1-0000000099"), uint8(30))
	f.Add([]byte("a/ab/a\x00/a\x00b/\xff/"), uint8(64))
	f.Add([]byte("a\x00/a/b\x00\x00/b"), uint8(0))
	f.Add([]byte("f0001/f0010/f0100/f1000"), uint8(250))
	var pool sync.Pool
	f.Fuzz(func(t *testing.T, data []byte, copies uint8) {
		parts := strings.Split(string(data), "/")
		names := slices.Clone(parts)
		for i := range int(copies) {
			for _, p := range parts {
				// Vary the names between copies, as directories of
				// numbered children do.
				names = append(names, p+string(rune('0'+i%10)))
			}
		}
		want := slices.Clone(names)
		slices.Sort(want)
		sortNames(names, &pool)
		if !slices.Equal(want, names) {
			t.Fatalf("sortNames gave %q, want %q", names, want)
		}
	})
}
