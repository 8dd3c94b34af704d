package connect_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/connect"
	_ "github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/zk2topo"
)

func TestEtcdOptions(t *testing.T) {
	s := connect.Settings{Etcd: connect.Etcd{User: "u", Password: "p", CAFile: "ca.pem", AutoSync: time.Minute}}
	o := s.EtcdOptions(" 127.0.0.1:2379, ,127.0.0.1:22379")
	assert.Equal(t, []string{"127.0.0.1:2379", "127.0.0.1:22379"}, o.Endpoints)
	assert.Equal(t, "u", o.Username)
	assert.Equal(t, "p", o.Password)
	assert.Equal(t, "ca.pem", o.TLSCAFile)
	assert.Equal(t, time.Minute, o.AutoSyncInterval)
}

// Implementations other than the three with settings come from the
// registry; an unknown one is NoImplementation.
func TestFactoryRegistry(t *testing.T) {
	var s connect.Settings
	_, err := s.Factory("no-such-backend")
	assert.True(t, topo.IsErrType(err, topo.NoImplementation), "%v", err)
	for _, impl := range []string{"etcd2", "zk2", "consul", "memory"} {
		f, err := s.Factory(impl)
		require.NoError(t, err, impl)
		assert.NotNil(t, f, impl)
	}
	srv, err := s.Open(t.Context(), "memory", "connect-test", "/g")
	require.NoError(t, err)
	defer srv.Close()
	_, err = srv.GlobalCell().Create(t.Context(), "f", []byte("x"))
	require.NoError(t, err)
}

func TestLockLifetimeOf(t *testing.T) {
	lt, ok := connect.LockLifetimeOf("etcd2", 1500*time.Millisecond)
	require.True(t, ok)
	assert.Equal(t, 2*time.Second, lt.Min, "etcd leases are whole seconds")
	lt, ok = connect.LockLifetimeOf("zk2", time.Hour)
	require.True(t, ok)
	assert.True(t, lt.Session)
	lt, ok = connect.LockLifetimeOf("consul", time.Millisecond)
	require.True(t, ok)
	assert.Equal(t, lt.Floor, lt.Min, "raised to the least session TTL")
	assert.Equal(t, 2*lt.Min, lt.Max)
	_, ok = connect.LockLifetimeOf("memory", time.Second)
	assert.False(t, ok)
}

// ClaimTTL is etcd2's LockTTL and zk2's session timeout.
func TestClaimTTL(t *testing.T) {
	s := connect.Settings{ClaimTTL: 7 * time.Second}
	assert.Equal(t, 7*time.Second, s.EtcdOptions("127.0.0.1:2379").LockTTL)
	f, err := s.Factory("zk2")
	require.NoError(t, err)
	zf, ok := f.(zk2topo.Factory)
	require.True(t, ok, "%T", f)
	assert.Equal(t, 7*time.Second, zf.Options.SessionTimeout)
	assert.Zero(t, connect.Settings{}.EtcdOptions("127.0.0.1:2379").LockTTL, "zero keeps the backend's default")
}

// DialTimeout is each bundled backend's dial bound; zero keeps their
// default.
func TestDialTimeout(t *testing.T) {
	s := connect.Settings{DialTimeout: 700 * time.Millisecond}
	assert.Equal(t, 700*time.Millisecond, s.EtcdOptions("127.0.0.1:2379").DialTimeout)
	f, err := s.Factory("zk2")
	require.NoError(t, err)
	zf, ok := f.(zk2topo.Factory)
	require.True(t, ok, "%T", f)
	assert.Equal(t, 700*time.Millisecond, zf.Options.DialTimeout)
	assert.Zero(t, connect.Settings{}.EtcdOptions("127.0.0.1:2379").DialTimeout, "zero keeps the backend's default")
}
