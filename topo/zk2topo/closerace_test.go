package zk2topo

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestCloseRacesCalls: calls made while Close runs fail with Closed (or
// succeed), and start no goroutine that Close's wait for the Conn's
// background goroutines misses. Before, a call whose request slot was
// taken as the Conn closed started a worker (WaitGroup.Add) while Close
// waited (WaitGroup.Wait), which the race detector reports (seen in
// topoctl's elect: a participation's Stop racing the deferred Close).
func TestCloseRacesCalls(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := freshRoot(t)
	setup := openConn(t, []string{testServer}, root)
	_, err := setup.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
	for range 300 {
		c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout}, root)
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 32 {
			wg.Go(func() {
				<-start
				for {
					// As a withdrawal on a session already held does:
					// straight to do, past the Conn's closed check.
					err := c.do(ctx, "f", func() error { return nil })
					if err != nil {
						require.True(t, topo.IsErrType(err, topo.Closed), "do: %v", err)
						return
					}
				}
			})
		}
		close(start)
		c.Close()
		wg.Wait()
	}
}
