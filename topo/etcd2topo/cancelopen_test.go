package etcd2topo

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// silentListener accepts TCP connections on 127.0.0.1 and answers nothing
// (a SIGSTOPped member: the kernel accepts, nobody speaks). accepted is
// closed at the first connection; Close closes the listener and every
// connection it accepted.
type silentListener struct {
	ln       net.Listener
	accepted chan struct{}
	mu       sync.Mutex
	conns    []net.Conn
}

func newSilentListener(t *testing.T) *silentListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &silentListener{ln: ln, accepted: make(chan struct{})}
	go func() {
		first := true
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			if first {
				first = false
				close(s.accepted)
			}
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *silentListener) addr() string { return s.ln.Addr().String() }

func (s *silentListener) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		_ = c.Close()
	}
}

// TestOpenEndsWithContext: an open with a Username, whose authentication
// clientv3 runs under its own context and DialTimeout, ends when ctx is
// cancelled, with Interrupted, instead of running to DialTimeout (10
// minutes here) on a member that accepts connections and answers
// nothing. Without a Username too.
func TestOpenEndsWithContext(t *testing.T) {
	for _, user := range []string{"root", ""} {
		t.Run("user="+user, func(t *testing.T) {
			sl := newSilentListener(t)
			opts := Options{Endpoints: []string{sl.addr()}, Username: user, Password: "pw", DialTimeout: 10 * time.Minute}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				c, err := NewConnContext(ctx, opts, newRoot())
				if err == nil {
					c.Close()
				}
				done <- err
			}()
			<-sl.accepted // the dial is under way
			cancel()
			select {
			case err := <-done:
				require.ErrorIs(t, err, topo.Interrupted, "%v", err)
				require.ErrorIs(t, err, context.Canceled, "%v", err)
			case <-time.After(time.Minute):
				t.Fatal("the open still runs a minute after its context was cancelled")
			}
		})
	}
}
