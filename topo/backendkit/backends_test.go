package backendkit_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// TestBackendsCheckOrder runs one check-order test (checkOrder, the one
// of examples/templatetopo's TestCheckOrder) on all four bundled backends,
// against real servers: every method checks the context, then the path,
// the reserved names, the value and the version or ttl, and only then
// whether the Conn is closed, with backendkit's messages, so that bad
// input gets the same error from every backend, open or closed.
func TestBackendsCheckOrder(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		f := memorytopo.NewFactory()
		checkOrder(t, func() topo.Conn { c, err := f.Create("c", "a", "/r"); require.NoError(t, err); return c })
	})
	t.Run("etcd", func(t *testing.T) {
		addr := etcdtest.Start(t)
		checkOrder(t, func() topo.Conn {
			c, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{addr}}, "/r")
			require.NoError(t, err)
			return c
		})
	})
	t.Run("zk", func(t *testing.T) {
		addr := zktest.Start(t)
		checkOrder(t, func() topo.Conn {
			c, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}}, "/r")
			require.NoError(t, err)
			return c
		})
	})
	t.Run("consul", func(t *testing.T) {
		addr := consultest.Start(t)
		checkOrder(t, func() topo.Conn {
			c, err := consultopo.NewConn(consultopo.Options{Address: addr}, "r")
			require.NoError(t, err)
			return c
		})
	})
}

// checkOrder runs the check-order cases on a Conn from open, before and
// after closing it. It reports every case that fails, not only the first.
func checkOrder(t *testing.T, open func() topo.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := open()
	defer c.Close()
	_, err := c.Create(ctx, "a/f", []byte("x"))
	require.NoError(t, err)
	lp, err := c.NewLeaderParticipation("e", "id")
	require.NoError(t, err)
	big := make([]byte, topo.MaxValueSize+1)

	type call struct {
		name string
		code topo.ErrorCode // on a live context, open or closed Conn
		msg  string         // in the message, when backendkit words it
		call func(ctx context.Context) error
	}
	calls := []call{
		{"Create path", topo.InvalidPath, "", func(ctx context.Context) error { _, err := c.Create(ctx, "a//b", big); return err }},
		{"Create reserved", topo.InvalidPath, "reserved name", func(ctx context.Context) error { _, err := c.Create(ctx, "a/locks/b", big); return err }},
		{"Create value", topo.InvalidArgument, "", func(ctx context.Context) error { _, err := c.Create(ctx, "a/g", big); return err }},
		{"Update value", topo.InvalidArgument, "", func(ctx context.Context) error {
			_, err := c.Update(ctx, "a/f", big, topo.NumericVersion(-1))
			return err
		}},
		{"Update version", topo.InvalidArgument, "bad version", func(ctx context.Context) error {
			_, err := c.Update(ctx, "a/f", nil, topo.NumericVersion(-1))
			return err
		}},
		{"Delete reserved", topo.InvalidPath, "reserved name", func(ctx context.Context) error {
			return c.Delete(ctx, "elections/x", topo.NumericVersion(-1))
		}},
		{"Delete version", topo.InvalidArgument, "bad version", func(ctx context.Context) error { return c.Delete(ctx, "a/f", topo.NumericVersion(-1)) }},
		{"Get path", topo.InvalidPath, "", func(ctx context.Context) error { _, _, err := c.Get(ctx, "a/"); return err }},
		{"GetVersion path", topo.InvalidPath, "", func(ctx context.Context) error { _, err := c.GetVersion(ctx, "a//f", -1); return err }},
		{"GetVersion version", topo.InvalidArgument, "version -1 is negative", func(ctx context.Context) error {
			_, err := c.GetVersion(ctx, "a/f", -1)
			return err
		}},
		{"List prefix", topo.InvalidPath, "", func(ctx context.Context) error { _, err := c.List(ctx, "a//"); return err }},
		{"ListDir path", topo.InvalidPath, "", func(ctx context.Context) error { _, err := c.ListDir(ctx, "a/../b", false); return err }},
		{"Watch path", topo.InvalidPath, "", func(ctx context.Context) error { _, _, err := c.Watch(ctx, "a/"); return err }},
		{"WatchRecursive prefix", topo.InvalidPath, "", func(ctx context.Context) error { _, _, err := c.WatchRecursive(ctx, "a//"); return err }},
		{"Lock reserved", topo.InvalidPath, "reserved name", func(ctx context.Context) error { _, err := c.Lock(ctx, "a/locks", string(big)); return err }},
		{"Lock value", topo.InvalidArgument, "", func(ctx context.Context) error { _, err := c.Lock(ctx, "a", string(big)); return err }},
		{"TryLock path", topo.InvalidPath, "", func(ctx context.Context) error { _, err := c.TryLock(ctx, "a//b", "x"); return err }},
		{"LockName reserved", topo.InvalidPath, "reserved name", func(ctx context.Context) error { _, err := c.LockName(ctx, "a/Lock", "x"); return err }},
		{"LockWithTTL path", topo.InvalidPath, "reserved name", func(ctx context.Context) error {
			_, err := c.LockWithTTL(ctx, "a/locks", string(big), 0)
			return err
		}},
		{"LockWithTTL value", topo.InvalidArgument, "", func(ctx context.Context) error {
			_, err := c.LockWithTTL(ctx, "a", string(big), 0)
			return err
		}},
		{"LockWithTTL ttl", topo.InvalidArgument, "lock TTL 0s is not positive", func(ctx context.Context) error {
			_, err := c.LockWithTTL(ctx, "a", "x", 0)
			return err
		}},
		{"Campaign value", topo.InvalidArgument, "", func(ctx context.Context) error { _, err := lp.Campaign(ctx, big); return err }},
		{"Proclaim value", topo.InvalidArgument, "", func(ctx context.Context) error { return lp.Proclaim(ctx, big) }},
		{"ResumeLeaderParticipation name", topo.InvalidPath, "reserved name", func(ctx context.Context) error {
			_, err := c.ResumeLeaderParticipation(ctx, "e/locks", "id", []byte("not json"))
			return err
		}},
		{"ResumeLeaderParticipation info", topo.InvalidArgument, "", func(ctx context.Context) error {
			_, err := c.ResumeLeaderParticipation(ctx, "e", "id", []byte("not json"))
			return err
		}},
		{"Txn", topo.InvalidPath, "reserved name", func(ctx context.Context) error {
			_, err := c.Txn(ctx, topo.CreateOp("a/locks/x", big))
			return err
		}},
		{"Txn empty", topo.InvalidArgument, "", func(ctx context.Context) error { _, err := c.Txn(ctx); return err }},
		{"Txn foreign Fence", topo.InvalidArgument, "was not issued by", func(ctx context.Context) error {
			_, err := c.Txn(ctx, topo.IfHeld(foreignFence{}), topo.UpdateOp("a/f", nil, nil))
			return err
		}},
	}
	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	expired, cancelExpired := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancelExpired()
	check := func(when string) {
		t.Helper()
		for _, tc := range calls {
			err := tc.call(ctx)
			assert.ErrorIsf(t, err, tc.code, "%s %s: %v", tc.name, when, err)
			if tc.msg != "" {
				assert.Truef(t, strings.Contains(err.Error(), tc.msg), "%s %s: %q does not say %q", tc.name, when, err, tc.msg)
			}
			assert.ErrorIsf(t, tc.call(cancelled), topo.Interrupted, "%s %s, cancelled context", tc.name, when)
			assert.ErrorIsf(t, tc.call(expired), topo.Timeout, "%s %s, expired context", tc.name, when)
		}
	}
	check("on an open Conn")
	c.Close()
	check("on a closed Conn")

	// NewLeaderParticipation takes no context: its arguments, then Closed.
	_, err = c.NewLeaderParticipation("e/locks", "id")
	require.ErrorIs(t, err, topo.InvalidPath)
	_, err = c.NewLeaderParticipation("e", "")
	require.ErrorIs(t, err, topo.InvalidArgument)
	_, err = c.NewLeaderParticipation("e", "id")
	require.ErrorIs(t, err, topo.Closed)
	_, err = c.Create(ctx, "a/g", nil)
	require.ErrorIs(t, err, topo.Closed, "good input on a closed Conn")
}

// foreignFence is a Fence no backend issued.
type foreignFence struct{}

func (foreignFence) Token() int64                    { return 1 }
func (foreignFence) Done() <-chan struct{}           { return nil }
func (foreignFence) Check(ctx context.Context) error { return nil }
