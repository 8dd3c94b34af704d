package zk2topo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkNameEntries measures a names-only ListDir's work after the
// Children read (nameEntries: the sort, the reserved-name checks and the
// result) on 1,000 shuffled names, as BenchmarkListDir lists them, without
// the server: numbered files (f0000...) and tablet aliases that share a
// prefix longer than 8 bytes. Each iteration gets names it has not seen
// (fresh strings, as the client decodes them), built outside the timer.
//
//	go test -run '^$' -bench NameEntries ./topo/zk2topo/
func BenchmarkNameEntries(b *testing.B) {
	for _, g := range []struct {
		name string
		f    func(i int) string
	}{{"numbered", func(i int) string { return fmt.Sprintf("f%04d", i) }}, {"aliases", func(i int) string { return fmt.Sprintf("zone1-%010d", 100+i*7) }}} {
		b.Run(g.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			orig := make([]string, listDirEntries)
			for i := range orig {
				orig[i] = g.f(i)
			}
			c := &Conn{root: "/bench"}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				r.Shuffle(len(orig), func(i, j int) { orig[i], orig[j] = orig[j], orig[i] })
				names := make([]string, len(orig))
				for i, s := range orig {
					names[i] = string([]byte(s))
				}
				b.StartTimer()
				entries, err := c.nameEntries(ctx, "d", "/bench/d", nil, names)
				if err != nil || len(entries) != len(orig) {
					b.Fatal(err, len(entries))
				}
			}
		})
	}
}
