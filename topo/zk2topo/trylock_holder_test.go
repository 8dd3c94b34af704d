package zk2topo

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestTryLockNamesHolder: TryLock's NodeExists, while another client
// holds the lock, carries a *topo.LockHeldError with the holder's entry
// data (the contents it locked with) and its session id, both for a
// topokit holder and for another tool's entry (Vitess's layout: an
// ephemeral sequential znode under <dir>/locks holding its description),
// and TryLock leaves no entry of its own behind.
func TestTryLockNamesHolder(t *testing.T) {
	root := freshRoot(t)
	c1 := openConn(t, []string{testServer}, root)
	c2 := openConn(t, []string{testServer}, root)
	ctx := t.Context()
	raw := rawConn(t)
	_, err := c1.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	_, err = c1.Create(ctx, "v/f", []byte("x"))
	require.NoError(t, err)

	l, err := c1.Lock(ctx, "d", `{"holder":"c1"}`)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Unlock(ctx)) }()
	_, err = c2.TryLock(ctx, "d", "c2")
	require.True(t, topo.IsErrType(err, topo.NodeExists), "%v", err)
	var held *topo.LockHeldError
	require.True(t, errors.As(err, &held), "%v", err)
	require.Equal(t, `{"holder":"c1"}`, held.Holder)
	entries, _, err := raw.Children(root + "/d/locks")
	require.NoError(t, err)
	require.Len(t, entries, 1, "TryLock removed its entry")
	_, st, err := raw.Get(root + "/d/locks/" + entries[0])
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("0x%x", st.EphemeralOwner), held.Session)
	require.Contains(t, err2s(c2.TryLock(ctx, "d", "c2")), `{"holder":"c1"}`)

	// Another tool's holder, from a raw session.
	_, err = raw.Create(root+"/v/locks", nil, 0, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, err = raw.Create(root+"/v/locks/", []byte("vitess holder"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	_, err = c2.TryLock(ctx, "v", "c2")
	require.True(t, errors.As(err, &held), "%v", err)
	require.Equal(t, "vitess holder", held.Holder)
	require.Equal(t, fmt.Sprintf("0x%x", raw.SessionID()), held.Session)
}

// err2s returns the error of a two-valued call as a string ("" for nil).
func err2s[T any](_ T, err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// BenchmarkTryLockHeld: a TryLock that finds the lock held (NodeExists
// naming the holder), beside the least a raw client needs to find out
// (create its entry, read the children, delete its entry).
func BenchmarkTryLockHeld(b *testing.B) {
	e := newBenchEnv(b)
	acl := zk.WorldACL(zk.PermAll)
	locks := e.root + "/raw/locks"
	_, err := e.raw.Create(locks, nil, 0, acl)
	require.NoError(b, err)
	_, err = e.raw.Create(locks+"/", []byte("raw holder"), zk.FlagEphemeralSequential, acl)
	require.NoError(b, err)
	holder := openConn(b, []string{testServer}, e.root)
	l, err := holder.Lock(e.ctx, "zk2", "holder")
	require.NoError(b, err)
	b.Cleanup(func() { _ = l.Unlock(e.ctx) })
	paired(b, e, func(int) error {
		n, err := e.raw.Create(locks+"/", []byte("try"), zk.FlagEphemeralSequential, acl)
		if err != nil {
			return err
		}
		if _, _, err := e.raw.Children(locks); err != nil {
			return err
		}
		return e.raw.Delete(n, -1)
	}, func(int) error {
		_, err := e.conn.TryLock(e.ctx, "zk2", "try")
		if !topo.IsErrType(err, topo.NodeExists) {
			return fmt.Errorf("TryLock while held: %v", err)
		}
		return nil
	})
}
