package etcd2topo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestCheckOrder: every method checks its arguments in backendkit's order
// (context, path, reserved name, value, version, closed), so bad input
// gets the same typed error from a closed Conn as from an open one and an
// ended context wins over everything.
func TestCheckOrder(t *testing.T) {
	big := []byte(strings.Repeat("x", topo.MaxValueSize+1))
	calls := map[string]func(c *Conn, ctx context.Context, path string, value []byte) error{
		"Create": func(c *Conn, ctx context.Context, p string, v []byte) error {
			_, err := c.Create(ctx, p, v)
			return err
		},
		"Update": func(c *Conn, ctx context.Context, p string, v []byte) error {
			_, err := c.Update(ctx, p, v, topo.NumericVersion(1))
			return err
		},
		"Delete": func(c *Conn, ctx context.Context, p string, v []byte) error {
			return c.Delete(ctx, p, nil)
		},
		"Get": func(c *Conn, ctx context.Context, p string, v []byte) error {
			_, _, err := c.Get(ctx, p)
			return err
		},
		"GetVersion": func(c *Conn, ctx context.Context, p string, v []byte) error {
			_, err := c.GetVersion(ctx, p, 1)
			return err
		},
		"List": func(c *Conn, ctx context.Context, p string, v []byte) error {
			_, err := c.List(ctx, p)
			return err
		},
		"Watch": func(c *Conn, ctx context.Context, p string, v []byte) error {
			_, _, err := c.Watch(ctx, p)
			return err
		},
		"WatchRecursive": func(c *Conn, ctx context.Context, p string, v []byte) error {
			_, _, err := c.WatchRecursive(ctx, p)
			return err
		},
		"Lock": func(c *Conn, ctx context.Context, p string, v []byte) error {
			_, err := c.Lock(ctx, p, string(v))
			return err
		},
		"TryLock": func(c *Conn, ctx context.Context, p string, v []byte) error {
			_, err := c.TryLock(ctx, p, string(v))
			return err
		},
		"LockWithTTL": func(c *Conn, ctx context.Context, p string, v []byte) error {
			_, err := c.LockWithTTL(ctx, p, string(v), time.Minute)
			return err
		},
		"LockName": func(c *Conn, ctx context.Context, p string, v []byte) error {
			_, err := c.LockName(ctx, p, string(v))
			return err
		},
		"Txn": func(c *Conn, ctx context.Context, p string, v []byte) error {
			_, err := c.Txn(ctx, topo.UpdateOp(p, v, nil))
			return err
		},
	}
	writes := map[string]bool{"Create": true, "Update": true, "Lock": true, "TryLock": true, "LockWithTTL": true, "LockName": true, "Txn": true}
	open := openConn(t, serverAddr, newRoot())
	closed, err := NewConn(testOptions(serverAddr), newRoot())
	require.NoError(t, err)
	closed.Close()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	bg := context.Background()
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			// An ended context comes first, before the path and Closed.
			require.ErrorIs(t, call(open, cancelled, "a/../../x", nil), topo.Interrupted)
			require.ErrorIs(t, call(closed, cancelled, "a/../../x", nil), topo.Interrupted)
			// The path before Closed.
			require.ErrorIs(t, call(closed, bg, "a/../../x", nil), topo.InvalidPath)
			if writes[name] {
				// The reserved-name rule and the value's size before Closed.
				require.ErrorIs(t, call(closed, bg, "d/locks/x", nil), topo.InvalidPath)
				require.ErrorIs(t, call(closed, bg, "d", big), topo.InvalidArgument)
			}
			require.ErrorIs(t, call(closed, bg, "d", []byte("v")), topo.Closed)
		})
	}
}
