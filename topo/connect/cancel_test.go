package connect_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/connect"
)

// TestEtcdOpenEndsWithContext: Ctrl-C (ctx cancelled) during an etcd2
// open through Settings ends the dial itself, with Interrupted, not only
// Open's wait for it: the factory's dial (seen through EtcdDialError)
// returns at once instead of running to its 10-minute DialTimeout against
// a member that accepts connections and answers nothing.
func TestEtcdOpenEndsWithContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan struct{})
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for first := true; ; first = false {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			if first {
				close(accepted)
			}
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})

	dialEnded := make(chan error, 1)
	s := connect.Settings{DialTimeout: 10 * time.Minute, EtcdDialError: func(_ string, err error) error {
		dialEnded <- err
		return err
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opened := make(chan error, 1)
	go func() {
		srv, err := s.Open(ctx, "etcd2", ln.Addr().String(), "/g")
		if err == nil {
			srv.Close()
		}
		opened <- err
	}()
	<-accepted
	cancel()
	require.ErrorIs(t, <-opened, topo.Interrupted)
	select {
	case err := <-dialEnded:
		require.ErrorIs(t, err, topo.Interrupted, "%v", err)
	case <-time.After(time.Minute):
		t.Fatal("the etcd2 dial still runs a minute after Open's context was cancelled")
	}
}
