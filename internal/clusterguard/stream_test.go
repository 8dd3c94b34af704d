package clusterguard

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/internal/freeport"
)

// switchProxy forwards TCP connections to its current target; switchTo
// changes the target and cuts every connection, as a member's address
// taken over by another cluster's member would.
type switchProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
}

func newSwitchProxy(t *testing.T, target string) *switchProxy {
	ln, err := freeport.Listen()
	require.NoError(t, err)
	p := &switchProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.switchTo("") })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *switchProxy) serve(c net.Conn) {
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	d, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[d] = struct{}{}, struct{}{}
	p.mu.Unlock()
	go func() { _, _ = io.Copy(d, c); d.Close() }()
	_, _ = io.Copy(c, d)
	c.Close()
}

func (p *switchProxy) switchTo(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func startMember(t *testing.T) string {
	addrs, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	m, err := etcdembed.Start(etcdembed.Config{Dir: t.TempDir(), ClientURL: "http://" + addrs[0], PeerURL: "http://" + addrs[1], TickMs: 10, ElectionMs: 100, NoFsync: true})
	require.NoError(t, err)
	t.Cleanup(m.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, m.WaitReady(ctx))
	return addrs[0]
}

// TestWatchRefusesAnotherCluster: a watch whose connection comes back at
// an address another cluster now serves (a member that lost its data and
// bootstrapped anew at its old address) never delivers that cluster's
// events: it ends with the ErrMismatch error (etcd2topo's watch then
// opens it again, after a pause). Before the stream check, the guard
// checked unary answers only and the watch delivered the other cluster's
// write.
func TestWatchRefusesAnotherCluster(t *testing.T) {
	a, b := startMember(t), startMember(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rawB, err := clientv3.New(clientv3.Config{Endpoints: []string{b}})
	require.NoError(t, err)
	defer rawB.Close()
	// b's revisions run ahead of a's, so that its events are past any
	// revision the watch resumes from.
	for range 20 {
		_, err := rawB.Put(ctx, "filler", "x")
		require.NoError(t, err)
	}

	p := newSwitchProxy(t, a)
	var g Guard
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.ln.Addr().String()}, DialTimeout: 5 * time.Second, DialOptions: g.DialOptions()})
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.Put(ctx, "k", "a1")
	require.NoError(t, err)
	require.NotZero(t, g.ID())

	wch := cli.Watch(ctx, "k")
	_, err = cli.Put(ctx, "k", "a2")
	require.NoError(t, err)
	resp := <-wch
	require.NoError(t, resp.Err())
	require.Len(t, resp.Events, 1)
	require.Equal(t, "a2", string(resp.Events[0].Kv.Value))

	p.switchTo(b)
	_, err = rawB.Put(ctx, "k", "rogue")
	require.NoError(t, err)
	var mismatch bool
	for resp := range wch {
		for _, ev := range resp.Events {
			t.Fatalf("the watch delivered the other cluster's event: %s=%s", ev.Kv.Key, ev.Kv.Value)
		}
		if err := resp.Err(); err != nil {
			t.Logf("watch: %v", err)
			mismatch = mismatch || errors.Is(err, ErrMismatch)
		}
	}
	require.True(t, mismatch, "the watch ended without the mismatch error")
	require.NoError(t, ctx.Err(), "the watch ended only with the test's context")
}
