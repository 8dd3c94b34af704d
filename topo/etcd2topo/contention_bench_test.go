package etcd2topo

import (
	"fmt"
	"testing"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
)

// BenchmarkContention: n contenders, over 10 Conns, looping on one lock,
// election or semaphore with no hold time (see test.BenchContention): acquisitions
// per second, CPU per acquisition (the embedded etcd included) and how
// many contenders acquired.
func BenchmarkContention(b *testing.B) {
	for _, kind := range []string{"lock", "election", "semaphore"} {
		for _, n := range []int{1, 10, 100, 300} {
			b.Run(fmt.Sprintf("%s/n=%d", kind, n), func(b *testing.B) {
				root := newRoot()
				conns := make([]topo.Conn, 10)
				for i := range conns {
					o := testOptions(serverAddr)
					o.LockTTL = 30 * time.Second
					c, err := NewConn(o, root)
					must(b, err)
					b.Cleanup(c.Close)
					conns[i] = c
				}
				test.BenchContention(b, conns, kind, n)
			})
		}
	}
}
