package zk2topo

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// BenchmarkSortOrder measures the radix sort of ListDir (sortedOrder) on
// 1,000 shuffled names: numbered files (f0000...) and tablet aliases that
// share a prefix longer than 8 bytes.
//
//	go test -run '^$' -bench SortOrder ./topo/zk2topo/
func BenchmarkSortOrder(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, g := range []struct {
		name string
		f    func(i int) string
	}{{"numbered", func(i int) string { return fmt.Sprintf("f%04d", i) }}, {"aliases", func(i int) string { return fmt.Sprintf("zone1-%010d", 100+i*7) }}} {
		orig := make([]string, 1000)
		for i := range orig {
			orig[i] = g.f(i)
		}
		r.Shuffle(len(orig), func(i, j int) { orig[i], orig[j] = orig[j], orig[i] })
		var pool sync.Pool
		names := make([]string, 1000)
		b.Run(g.name, func(b *testing.B) {
			for b.Loop() {
				copy(names, orig)
				sc := getScratch(&pool)
				sc.sortedOrder(names)
				pool.Put(sc)
			}
		})
	}
}
