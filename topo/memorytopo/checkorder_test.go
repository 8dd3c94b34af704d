package memorytopo_test

import (
	"context"
	"testing"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestCheckOrder follows backendkit's documented check order on every
// method: a finished context first, then the path, the reserved names,
// the value and the version, and only then Closed. So a closed Conn
// reports bad input as an open one does, and a finished context wins
// over bad input.
func TestCheckOrder(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	big := make([]byte, topo.MaxValueSize+1)
	lp, err := c.NewLeaderParticipation("e", "id")
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		code topo.ErrorCode // on a live context
		call func(ctx context.Context) error
	}{
		{"Create path", topo.InvalidPath, func(ctx context.Context) error { _, err := c.Create(ctx, "a//b", nil); return err }},
		{"Create reserved", topo.InvalidPath, func(ctx context.Context) error { _, err := c.Create(ctx, "a/locks/b", nil); return err }},
		{"Create value", topo.InvalidArgument, func(ctx context.Context) error { _, err := c.Create(ctx, "a", big); return err }},
		{"Update reserved", topo.InvalidPath, func(ctx context.Context) error { _, err := c.Update(ctx, "elections/x", nil, nil); return err }},
		{"Update version", topo.InvalidArgument, func(ctx context.Context) error {
			_, err := c.Update(ctx, "a", nil, topo.NumericVersion(-3))
			return err
		}},
		{"Get path", topo.InvalidPath, func(ctx context.Context) error { _, _, err := c.Get(ctx, "a//b"); return err }},
		{"GetVersion version", topo.InvalidArgument, func(ctx context.Context) error { _, err := c.GetVersion(ctx, "a", -1); return err }},
		{"List prefix", topo.InvalidPath, func(ctx context.Context) error { _, err := c.List(ctx, "a//"); return err }},
		{"Delete reserved", topo.InvalidPath, func(ctx context.Context) error { return c.Delete(ctx, "a/Lock", nil) }},
		{"ListDir path", topo.InvalidPath, func(ctx context.Context) error { _, err := c.ListDir(ctx, "a//b", false); return err }},
		{"Watch path", topo.InvalidPath, func(ctx context.Context) error { _, _, err := c.Watch(ctx, "a//b"); return err }},
		{"WatchRecursive prefix", topo.InvalidPath, func(ctx context.Context) error { _, _, err := c.WatchRecursive(ctx, "a//"); return err }},
		{"Lock reserved", topo.InvalidPath, func(ctx context.Context) error { _, err := c.Lock(ctx, "a/locks", "x"); return err }},
		{"TryLock path", topo.InvalidPath, func(ctx context.Context) error { _, err := c.TryLock(ctx, "a//b", "x"); return err }},
		{"LockName value", topo.InvalidArgument, func(ctx context.Context) error { _, err := c.LockName(ctx, "a", string(big)); return err }},
		{"LockWithTTL ttl", topo.InvalidArgument, func(ctx context.Context) error { _, err := c.LockWithTTL(ctx, "a", "x", 0); return err }},
		{"LockWithTTL path", topo.InvalidPath, func(ctx context.Context) error { _, err := c.LockWithTTL(ctx, "a/locks", "x", 0); return err }},
		{"Campaign value", topo.InvalidArgument, func(ctx context.Context) error { _, err := lp.Campaign(ctx, big); return err }},
		{"Proclaim value", topo.InvalidArgument, func(ctx context.Context) error { return lp.Proclaim(ctx, big) }},
		{"ResumeLeaderParticipation path", topo.InvalidPath, func(ctx context.Context) error {
			_, err := c.ResumeLeaderParticipation(ctx, "a/locks", "id", []byte("{}"))
			return err
		}},
		{"ResumeLeaderParticipation info", topo.InvalidArgument, func(ctx context.Context) error {
			_, err := c.ResumeLeaderParticipation(ctx, "a", "id", []byte("not json"))
			return err
		}},
		{"Txn", topo.InvalidPath, func(ctx context.Context) error { _, err := c.Txn(ctx, topo.CreateOp("a/locks/x", nil)); return err }},
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for _, tc := range calls {
		requireCode(t, tc.call(ctx), tc.code)
		requireCode(t, tc.call(cancelled), topo.Interrupted)
	}
	c.Close()
	for _, tc := range calls {
		requireCode(t, tc.call(ctx), tc.code)
		requireCode(t, tc.call(cancelled), topo.Interrupted)
	}
	_, err = c.NewLeaderParticipation("a/locks", "id")
	requireCode(t, err, topo.InvalidPath)
	_, err = c.NewLeaderParticipation("", "id")
	requireCode(t, err, topo.InvalidArgument)
	_, err = c.NewLeaderParticipation("a", "id")
	requireCode(t, err, topo.Closed)
	_, err = c.Create(ctx, "a", nil)
	requireCode(t, err, topo.Closed)
}
