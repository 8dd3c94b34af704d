package zk2topo

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
)

// BenchmarkContention: n contenders, over 10 Conns, looping on one lock
// or election with no hold time (see test.BenchContention): acquisitions
// per second, CPU per acquisition (of this process and of the ZooKeeper
// server's JVM) and how many contenders acquired.
func BenchmarkContention(b *testing.B) {
	for _, kind := range []string{"lock", "election", "semaphore"} {
		for _, n := range []int{1, 10, 100, 300} {
			b.Run(fmt.Sprintf("%s/n=%d", kind, n), func(b *testing.B) {
				root := freshRoot(b)
				conns := make([]topo.Conn, 10)
				for i := range conns {
					c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout}, root)
					require.NoError(b, err)
					b.Cleanup(c.Close)
					conns[i] = c
				}
				test.BenchContentionServer(b, conns, kind, n, testServerCPU)
			})
		}
	}
}
