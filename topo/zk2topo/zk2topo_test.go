package zk2topo

import (
	"testing"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
)

func TestConformance(t *testing.T) {
	test.Run(t, func(t *testing.T) func() topo.Conn {
		root := freshRoot(t)
		return func() topo.Conn {
			c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout}, root)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
	}, test.Options{
		GetVersionUnsupported: true,
		ExpireSession: func(t *testing.T, conn topo.Conn) {
			expireSession(t, conn, testServer)
		},
	})
}
