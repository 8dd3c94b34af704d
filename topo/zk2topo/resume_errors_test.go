package zk2topo

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// resumableCandidate: id2 campaigns (value "v2") behind id1's leadership
// on a Conn whose process then vanishes (its proxy blackholed); it
// returns the candidacy's ResumeInfo, decoded too.
func resumableCandidate(ctx context.Context, t *testing.T, root string) ([]byte, resumeInfo) {
	t.Helper()
	px, err := faultproxy.New(testServer)
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	c1 := openConn(t, []string{testServer}, root)
	c2 := openConn(t, []string{px.Addr()}, root)
	p1, err := c1.NewLeaderParticipation("elec", "id1")
	require.NoError(t, err)
	t.Cleanup(p1.Stop)
	_, err = p1.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	p2, err := c2.NewLeaderParticipation("elec", "id2")
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { _, _ = p2.Campaign(cctx, []byte("v2")) }()
	var info []byte
	require.Eventually(t, func() bool {
		info, err = p2.ResumeInfo()
		return err == nil
	}, time.Minute, time.Millisecond)
	px.Blackhole()
	var ri resumeInfo
	require.NoError(t, json.Unmarshal(info, &ri))
	return info, ri
}

// TestResumeCandidateGoneOrNotItsID: Resume on a live session whose
// candidate entry was deleted behind its back, or holds another id, is
// LockLost (claims.ErrNotHeld), and the session it attached is let go
// (also off the Conn's resumed sessions: see requireNoResumed).
func TestResumeCandidateGoneOrNotItsID(t *testing.T) {
	ctx := valuesCtx(t)
	raw, _, err := zk.Connect([]string{testServer}, testSessionTimeout)
	require.NoError(t, err)
	t.Cleanup(raw.Close)

	t.Run("gone", func(t *testing.T) {
		root := freshRoot(t)
		info, ri := resumableCandidate(ctx, t, root)
		require.NoError(t, raw.Delete(ri.Entry, -1))
		c3 := openConn(t, []string{testServer}, root)
		_, err := c3.ResumeLeaderParticipation(ctx, "elec", "id2", info)
		require.True(t, topo.IsErrType(err, topo.LockLost), "got %v", err)
		requireNoResumed(t, c3)
	})
	t.Run("other id", func(t *testing.T) {
		root := freshRoot(t)
		info, ri := resumableCandidate(ctx, t, root)
		_, err := raw.Set(ri.Entry, []byte("id9"), -1)
		require.NoError(t, err)
		c3 := openConn(t, []string{testServer}, root)
		_, err = c3.ResumeLeaderParticipation(ctx, "elec", "id2", info)
		require.True(t, topo.IsErrType(err, topo.LockLost), "got %v", err)
		requireNoResumed(t, c3)
	})
	t.Run("value gone", func(t *testing.T) {
		root := freshRoot(t)
		info, ri := resumableCandidate(ctx, t, root)
		require.NotEmpty(t, ri.Value)
		require.NoError(t, raw.Delete(ri.Value, -1))
		c3 := openConn(t, []string{testServer}, root)
		r, err := c3.ResumeLeaderParticipation(ctx, "elec", "id2", info)
		require.NoError(t, err, "a candidacy whose value is gone still resumes")
		r.Stop()
	})
}

// TestResumeWaitBounds: Resume waits for the server's answer at most
// DialTimeout (Unavailable naming the servers and the last dial error)
// and until ctx ends (Timeout).
func TestResumeWaitBounds(t *testing.T) {
	ctx := valuesCtx(t)
	root := freshRoot(t)
	info, _ := resumableCandidate(ctx, t, root)
	refused := errors.New("dial refused by the test")
	var refuse atomic.Bool
	dial := func(network, address string, timeout time.Duration) (net.Conn, error) {
		if refuse.Load() {
			return nil, refused
		}
		return net.DialTimeout(network, address, timeout)
	}
	c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, DialTimeout: 500 * time.Millisecond, Dialer: dial}, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)

	refuse.Store(true)
	_, err = c.ResumeLeaderParticipation(ctx, "elec", "id2", info)
	require.True(t, topo.IsErrType(err, topo.Unavailable), "got %v", err)
	require.ErrorIs(t, err, refused)
	require.ErrorContains(t, err, "no ZooKeeper server at "+testServer+" gave a session within 500ms")
	requireNoResumed(t, c)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.ResumeLeaderParticipation(cctx, "elec", "id2", info)
	t.Logf("canceled before: %v", err)
	require.True(t, topo.IsErrType(err, topo.Interrupted), "got %v", err)

	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = c.ResumeLeaderParticipation(tctx, "elec", "id2", info)
	t.Logf("deadline while waiting: %v", err)
	require.True(t, topo.IsErrType(err, topo.Timeout), "got %v", err)
	requireNoResumed(t, c)

	c.Close()
	_, err = c.ResumeLeaderParticipation(ctx, "elec", "id2", info)
	require.True(t, topo.IsErrType(err, topo.Closed), "got %v", err)
}

// requireNoResumed fails t unless c keeps no resumed session: a Resume
// that failed took the session it attached off c.resumed (a lost one
// left there would be kept until Close, and would keep the Conn's lock
// queues off their stashed listings: stashValid).
func requireNoResumed(t *testing.T, c *Conn) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Empty(t, c.resumed, "a failed Resume left its session on the Conn")
}
