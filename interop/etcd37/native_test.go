package etcd37

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo"
)

// runNativeHandover checks etcd2topo's native elections against etcd's own
// concurrency.Election, both built with client v3.7, on the etcd at addr:
// topokit leads and an etcd campaigner waits and sees topokit's value; when
// topokit resigns the etcd campaigner leads, and topokit's Campaign then
// waits until the etcd leader resigns, its term's token greater.
func runNativeHandover(t *testing.T, addr string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := etcd2topo.NewConn(options(addr), newRoot())
	require.NoError(t, err)
	defer c.Close()
	prefix := fmt.Sprintf("/native37-%d", rootSeq.Add(1))
	p, err := c.NewNativeElection(prefix, "tk")
	require.NoError(t, err)
	defer p.Stop()

	_, err = p.Campaign(ctx, []byte("tk-1"))
	require.NoError(t, err)
	first, err := p.Term()
	require.NoError(t, err)

	s, err := concurrency.NewSession(c.Client(), concurrency.WithTTL(5))
	require.NoError(t, err)
	defer s.Close()
	e := concurrency.NewElection(s, prefix)
	won := make(chan error, 1)
	go func() { won <- e.Campaign(ctx, "etcd-1") }()
	require.Eventually(t, func() bool {
		r, err := c.Client().Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && r.Count == 2
	}, time.Minute, time.Millisecond, "the etcd campaigner never queued")
	l, err := e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "tk-1", string(l.Kvs[0].Value), "etcd sees topokit's leader value")
	select {
	case err := <-won:
		t.Fatalf("concurrency.Election won (%v) while topokit leads", err)
	default:
	}

	require.NoError(t, p.Resign(ctx))
	require.NoError(t, <-won)
	require.Greater(t, e.Rev(), first.Token())
	leader, err := p.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, topo.Leader{ID: fmt.Sprintf("%x", int64(s.Lease())), Value: []byte("etcd-1"), Token: e.Rev()}, leader)

	type result struct{ err error }
	again := make(chan result, 1)
	go func() {
		_, err := p.Campaign(ctx, []byte("tk-2"))
		again <- result{err}
	}()
	require.Eventually(t, func() bool {
		r, err := c.Client().Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && r.Count == 2
	}, time.Minute, time.Millisecond, "topokit's campaign never queued")
	select {
	case r := <-again:
		t.Fatalf("topokit won (%v) while concurrency.Election leads", r.err)
	default:
	}
	require.NoError(t, e.Resign(ctx))
	require.NoError(t, (<-again).err)
	second, err := p.Term()
	require.NoError(t, err)
	require.Greater(t, second.Token(), e.Rev())
}

// TestNativeElectionInterop runs it against server v3.6.16.
func TestNativeElectionInterop(t *testing.T) { runNativeHandover(t, serverAddr) }

// TestNativeElectionInteropServer37 runs it against server v3.7.
func TestNativeElectionInteropServer37(t *testing.T) {
	srv := startEtcd37(t, filepath.Join(t.TempDir(), "native"))
	runNativeHandover(t, srv.addr)
}
