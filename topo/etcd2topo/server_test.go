package etcd2topo

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// TestRoots: the root is a plain key prefix; "/" and "" work too, and
// locks, lists and listings stay inside the root.
func TestRoots(t *testing.T) {
	addr := etcdtest.Start(t) // an empty server: the "" root sees every key
	cli := rawClient(t, addr)
	ctx := context.Background()
	for _, tc := range []struct{ root, key string }{
		{"/a/b/", "/a/b/x/f"},
		{"/", "/x/f"},
		{"", "x/f"},
	} {
		t.Run("root="+tc.root, func(t *testing.T) {
			c := openConn(t, addr, tc.root)
			_, err := c.Create(ctx, "x/f", []byte("v"))
			require.NoError(t, err)
			resp, err := cli.Get(ctx, tc.key)
			require.NoError(t, err)
			require.Len(t, resp.Kvs, 1, "file key")

			ld, err := c.Lock(ctx, "", "root lock")
			require.NoError(t, err)
			ld2, err := c.Lock(ctx, "x", "dir lock")
			require.NoError(t, err)
			kvs, err := c.List(ctx, "")
			require.NoError(t, err)
			require.Len(t, kvs, 1)
			require.Equal(t, "x/f", kvs[0].Path)
			entries, err := c.ListDir(ctx, "", true)
			require.NoError(t, err)
			require.Equal(t, []topo.DirEntry{
				{Name: "locks", Type: topo.TypeDirectory, Ephemeral: true},
				{Name: "x", Type: topo.TypeDirectory},
			}, entries)
			require.NoError(t, ld.Unlock(ctx))
			require.NoError(t, ld2.Unlock(ctx))

			require.NoError(t, c.Delete(ctx, "x/f", nil))
			_, err = c.Lock(ctx, "", "empty root")
			require.ErrorIs(t, err, topo.NoNode)
			all, err := cli.Get(ctx, "\x00", clientv3.WithFromKey(), clientv3.WithCountOnly())
			require.NoError(t, err)
			require.Zero(t, all.Count, "nothing left behind")
		})
	}
}

// TestPermissionDenied: with etcd's auth enabled (a root user, a
// read-only user, a user with no role), etcd's refusals are
// PermissionDenied, at once and without retries: bad credentials at
// NewConn, no credentials, writes, locks and candidacies of the read-only
// user, and reads and watches of the user with no role (a watch loop that
// retried would end with Timeout here instead).
func TestPermissionDenied(t *testing.T) {
	am := etcdtest.StartWithAuth(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func(u etcdtest.User) *Conn {
		c, err := NewConn(Options{Endpoints: []string{am.Addr}, Username: u.Name, Password: u.Password, LockTTL: 3 * time.Second}, "/auth")
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	root := open(am.Root)
	v, err := root.Create(ctx, "d/f", []byte("v"))
	require.NoError(t, err)

	_, err = NewConn(Options{Endpoints: []string{am.Addr}, Username: am.Root.Name, Password: "wrong"}, "/auth")
	require.ErrorIs(t, err, topo.PermissionDenied, "a wrong password fails at NewConn")

	anon := openConn(t, am.Addr, "/auth")
	_, _, err = anon.Get(ctx, "d/f")
	require.ErrorIs(t, err, topo.PermissionDenied, "no credentials")

	reader := open(am.Reader)
	data, _, err := reader.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "v", string(data))
	_, err = reader.Create(ctx, "d/g", []byte("x"))
	require.ErrorIs(t, err, topo.PermissionDenied, "Create")
	_, err = reader.Update(ctx, "d/f", []byte("x"), v)
	require.ErrorIs(t, err, topo.PermissionDenied, "Update at the right version")
	_, err = reader.Update(ctx, "d/f", []byte("x"), nil)
	require.ErrorIs(t, err, topo.PermissionDenied, "unconditional Update")
	require.ErrorIs(t, reader.Delete(ctx, "d/f", v), topo.PermissionDenied, "Delete at the right version")
	require.ErrorIs(t, reader.Delete(ctx, "d/f", nil), topo.PermissionDenied, "unconditional Delete")
	_, err = reader.Lock(ctx, "d", "reader")
	require.ErrorIs(t, err, topo.PermissionDenied, "Lock")
	_, err = reader.TryLock(ctx, "d", "reader")
	require.ErrorIs(t, err, topo.PermissionDenied, "TryLock")
	_, err = reader.LockName(ctx, "n", "reader")
	require.ErrorIs(t, err, topo.PermissionDenied, "LockName")
	p, err := reader.NewLeaderParticipation("svc", "reader")
	require.NoError(t, err)
	_, err = p.WaitForLeadership()
	require.ErrorIs(t, err, topo.PermissionDenied, "WaitForLeadership")
	p.Stop()

	// A reader waiting behind root's lock: its own put is refused before
	// any wait.
	ld, err := root.Lock(ctx, "d", "root")
	require.NoError(t, err)
	_, err = reader.Lock(ctx, "d", "reader")
	require.ErrorIs(t, err, topo.PermissionDenied, "Lock while held")
	require.NoError(t, ld.Check(ctx))
	require.NoError(t, ld.Unlock(ctx))

	nobody := open(am.Nobody)
	_, _, err = nobody.Get(ctx, "d/f")
	require.ErrorIs(t, err, topo.PermissionDenied, "Get")
	_, err = nobody.List(ctx, "d/")
	require.ErrorIs(t, err, topo.PermissionDenied, "List")
	_, err = nobody.ListDir(ctx, "d", true)
	require.ErrorIs(t, err, topo.PermissionDenied, "ListDir")
	_, _, err = nobody.Watch(ctx, "d/f")
	require.ErrorIs(t, err, topo.PermissionDenied, "Watch")
	_, _, err = nobody.WatchRecursive(ctx, "d/")
	require.ErrorIs(t, err, topo.PermissionDenied, "WatchRecursive")
	np, err := nobody.NewLeaderParticipation("svc", "nobody")
	require.NoError(t, err)
	defer np.Stop()
	_, err = np.WaitForNewLeader(ctx)
	require.ErrorIs(t, err, topo.PermissionDenied, "WaitForNewLeader")
	_, err = np.GetCurrentLeaderID(ctx)
	require.ErrorIs(t, err, topo.PermissionDenied, "GetCurrentLeaderID")
	require.NoError(t, ctx.Err(), "every refusal must be prompt")
}

// TestTLS: a Conn given a CA, a client certificate and its key talks to a
// member that serves TLS and requires client certificates.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	addr := startTLSMember(t, dir)
	c, err := NewConn(Options{
		Endpoints:   []string{addr},
		TLSCAFile:   filepath.Join(dir, "ca.pem"),
		TLSCertFile: filepath.Join(dir, "client.pem"),
		TLSKeyFile:  filepath.Join(dir, "client-key.pem"),
	}, "/tls")
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := c.Create(ctx, "f", []byte("v"))
	require.NoError(t, err)
	_, got, err := c.Get(ctx, "f")
	require.NoError(t, err)
	require.Equal(t, v, got)

	_, err = NewConn(Options{Endpoints: []string{addr}, TLSCAFile: filepath.Join(dir, "missing.pem")}, "/tls")
	require.ErrorIs(t, err, topo.InvalidArgument)
}
