package zktest

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"
)

func TestStart(t *testing.T) {
	addr := Start(t)
	mode, err := Mode(addr)
	require.NoError(t, err)
	require.Equal(t, "standalone", mode)

	c, _, err := zk.Connect([]string{addr}, 2*time.Second, zk.WithLogInfo(false))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Create("/x", []byte("v"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	b, _, err := c.Get("/x")
	require.NoError(t, err)
	require.Equal(t, "v", string(b))
}

func TestLaunch(t *testing.T) {
	s, err := Launch()
	require.NoError(t, err)
	_, err = Mode(s.Addr())
	require.NoError(t, err)
	s.Stop()
	s.Stop()
	_, err = Mode(s.Addr())
	require.Error(t, err)
}

func TestEnsemble(t *testing.T) {
	e := StartEnsemble(t, 3)
	leader := e.WaitLeader(time.Minute)
	c, _, err := zk.Connect(e.Addrs(), 10*time.Second, zk.WithLogInfo(false))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Create("/x", []byte("v"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	e.Kill(leader)
	require.False(t, e.Running(leader))
	newLeader := e.WaitLeader(time.Minute)
	require.NotEqual(t, leader, newLeader)
	require.Eventually(t, func() bool {
		_, err := c.Set("/x", []byte("w"), -1)
		return err == nil
	}, time.Minute, 50*time.Millisecond)

	e.Restart(leader)
	mode, err := e.Mode(leader)
	require.NoError(t, err)
	require.Equal(t, "follower", mode)
}

// TestMaxSizeWorkingSet: the server holds 400 values of 512 KiB (the
// topo.MaxValueSize) at once.
func TestMaxSizeWorkingSet(t *testing.T) {
	addr := Start(t)
	c, _, err := zk.Connect([]string{addr}, 20*time.Second, zk.WithLogInfo(false))
	require.NoError(t, err)
	defer c.Close()
	val := make([]byte, 512*1024)
	for i := range val {
		val[i] = byte(i)
	}
	_, err = c.Create("/big", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	for i := range 400 {
		_, err := c.Create(fmt.Sprintf("/big/%03d", i), val, 0, zk.WorldACL(zk.PermAll))
		require.NoErrorf(t, err, "write %d of 512 KiB", i)
	}
	got, _, err := c.Get("/big/399")
	require.NoError(t, err)
	require.Equal(t, val, got)
}

// TestPause: Pause returns only once every thread of the server is
// stopped (a request sent afterwards gets no answer until Resume), and
// Resume lets the server answer again.
func TestPause(t *testing.T) {
	s, err := Launch()
	require.NoError(t, err)
	defer s.Stop()
	c, _, err := zk.Connect([]string{s.Addr()}, 30*time.Second, zk.WithLogInfo(false))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Create("/x", []byte("v"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	for range 5 {
		require.NoError(t, s.Pause())
		stopped, err := s.proc.allThreadsStopped()
		require.NoError(t, err)
		require.True(t, stopped, "every thread is stopped when Pause returns")
		answered := make(chan error, 1)
		go func() { _, _, err := c.Get("/x"); answered <- err }()
		require.NoError(t, s.Resume())
		require.NoError(t, <-answered, "the request sent while paused is answered after Resume")
	}
}
