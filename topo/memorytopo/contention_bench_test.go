package memorytopo_test

import (
	"fmt"
	"testing"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/test"
)

// BenchmarkContention: n contenders, over 10 Conns, looping on one lock,
// election or semaphore with no hold time (see test.BenchContention).
func BenchmarkContention(b *testing.B) {
	for _, kind := range []string{"lock", "election", "semaphore"} {
		for _, n := range []int{1, 10, 100, 300} {
			b.Run(fmt.Sprintf("%s/n=%d", kind, n), func(b *testing.B) {
				f := memorytopo.NewFactory()
				conns := make([]topo.Conn, 10)
				for i := range conns {
					c, err := f.NewConn("mem", "/root")
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(c.Close)
					conns[i] = c
				}
				test.BenchContention(b, conns, kind, n)
			})
		}
	}
}
