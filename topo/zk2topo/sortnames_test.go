package zk2topo

import (
	"fmt"
	"math/rand/v2"
	"slices"
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
