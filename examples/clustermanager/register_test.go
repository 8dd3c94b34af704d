package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// probeBeforeLock is a Conn whose first Lock of dir is preceded by what a
// leader's liveness probe does when it finds the directory unlocked: it
// deletes the member's info (and so, on etcd, the directory).
type probeBeforeLock struct {
	topo.Conn
	dir    string
	probed atomic.Bool
}

func (c *probeBeforeLock) Lock(ctx context.Context, dir, contents string) (topo.LockDescriptor, error) {
	if dir == c.dir && c.probed.CompareAndSwap(false, true) {
		if err := c.Conn.Delete(ctx, dir+"/info", nil); err != nil {
			return nil, err
		}
	}
	return c.Conn.Lock(ctx, dir, contents)
}

// TestRegisterThroughProbe: a leader's probe that removes a member's info
// between the member's write of it and its Lock (the member's directory
// is then gone) does not fail the registration: the member writes its
// info again and locks. It failed with NoNode before, and the member was
// unregistered, with a warning, until its next attempt a fifth of Resync
// later (seen in CI as a member without its lock).
func TestRegisterThroughProbe(t *testing.T) {
	addr := etcdtest.Start(t)
	inner, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{addr}}, "/clustermanager-probe")
	require.NoError(t, err)
	defer inner.Close()
	conn := &probeBeforeLock{Conn: inner, dir: memberDir("m1")}
	ctx := t.Context()
	m, err := NewManager(ctx, conn, Config{ID: "m1", Addr: "127.0.0.1:1", Resync: time.Hour,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	lock, err := m.registerOnce(ctx, []byte(`{"id":"m1"}`))
	require.NoError(t, err)
	require.True(t, conn.probed.Load())
	defer lock.Unlock(context.WithoutCancel(ctx))
	require.NoError(t, lock.Check(ctx))
	data, _, err := inner.Get(ctx, memberInfoPath("m1"))
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"m1"}`, string(data))
}
