package memorytopo_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/memorytopo"
)

// txnOnly hides every method of its Conn but topo.Conn's, so that
// topo.GuardedUpdate takes the Txn path.
type txnOnly struct{ topo.Conn }

// alienFence is a Fence no memorytopo Conn issued.
type alienFence struct{}

func (alienFence) Token() int64                    { return 1 }
func (alienFence) Done() <-chan struct{}           { return nil }
func (alienFence) Check(ctx context.Context) error { return nil }

// guardedCall is one topo.GuardedUpdate call a scenario sets up.
type guardedCall struct {
	ctx      context.Context
	fence    topo.Fence
	path     string
	contents []byte
	version  topo.Version
}

// guardedOutcome is everything a test can observe of one call.
type guardedOutcome struct {
	version     topo.Version
	errText     string
	codes       []topo.ErrorCode
	isTxnError  bool
	index       int
	kind        topo.TxnOpKind
	after       string // the file's contents after the call, or "<code>"
	afterVer    topo.Version
	txnCalls    int64
	allCalls    int64
	fenceStatus string
}

var outcomeCodes = []topo.ErrorCode{topo.NoNode, topo.NodeExists, topo.BadVersion, topo.LockLost,
	topo.InvalidPath, topo.InvalidArgument, topo.Timeout, topo.Interrupted, topo.Closed, topo.Unavailable}

func observe(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, call guardedCall, v topo.Version, err error) guardedOutcome {
	t.Helper()
	o := guardedOutcome{version: v, txnCalls: f.CallCount(memorytopo.OpTxn), allCalls: f.CallCount(memorytopo.OpAny)}
	if err != nil {
		o.errText = err.Error()
		for _, code := range outcomeCodes {
			if topo.IsErrType(err, code) {
				o.codes = append(o.codes, code)
			}
		}
		var te *topo.TxnError
		if errors.As(err, &te) {
			o.isTxnError, o.index, o.kind = true, te.Index, te.Kind
		}
	}
	// Read back through a fresh Conn of the same store (c may be closed).
	r, rerr := f.NewConn("mem", "/root")
	require.NoError(t, rerr)
	defer r.Close()
	if p, perr := topo.CleanFilePath(call.path); perr == nil && !strings.Contains(p, "locks") {
		got, ver, gerr := r.Get(context.Background(), p)
		if gerr != nil {
			o.after = "<" + gerr.Error() + ">"
		} else {
			o.after, o.afterVer = string(got), ver
		}
	}
	if call.fence != nil {
		if cerr := call.fence.Check(context.Background()); cerr != nil {
			o.fenceStatus = cerr.Error()
		}
	}
	return o
}

// TestGuardedUpdateFastPathMatchesTxn runs each scenario three times on
// fresh stores: through memorytopo's backendkit.GuardedUpdater fast path,
// through topo.GuardedUpdate's Conn.Txn fallback, and through Txn's
// general path, and requires identical results: version, error text,
// codes, *topo.TxnError index and kind, the file afterwards, the call
// counters and the Fence's state.
func TestGuardedUpdateFastPathMatchesTxn(t *testing.T) {
	var conn topo.Conn = &memorytopo.Conn{}
	_, ok := conn.(backendkit.GuardedUpdater)
	require.True(t, ok, "memorytopo.Conn implements backendkit.GuardedUpdater")
	_, ok = topo.Conn(txnOnly{conn}).(backendkit.GuardedUpdater)
	require.False(t, ok)

	// setup prepares a store (c holds d/f and a lock of d) and returns the
	// call to make.
	type setup func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall
	ctx := context.Background()
	plain := func(p string, contents string, version func(v topo.Version) topo.Version) setup {
		return func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			return guardedCall{ctx, ld, p, []byte(contents), version(v)}
		}
	}
	same := func(v topo.Version) topo.Version { return v }
	none := func(topo.Version) topo.Version { return nil }
	stale := func(v topo.Version) topo.Version { return topo.NumericVersion(int64(v.(topo.NumericVersion)) + 1000) }
	scenarios := []struct {
		name  string
		setup setup
	}{
		{"cas", plain("d/f", "y", same)},
		{"unconditional", plain("d/f", "y", none)},
		{"creates absent file", plain("d/new", "y", none)},
		{"small value", plain("d/f", "", same)},
		{"large value", plain("d/f", strings.Repeat("v", 1000), same)},
		{"stale version", plain("d/f", "y", stale)},
		{"absent with version", plain("d/nope", "y", same)},
		{"directory with version", plain("d", "y", same)},
		{"negative version", plain("d/f", "y", func(topo.Version) topo.Version { return topo.NumericVersion(-1) })},
		{"bad path", plain("a//b", "y", none)},
		{"empty path", plain("", "y", none)},
		{"reserved path", plain("d/locks/x", "y", none)},
		{"oversized value", plain("d/f", strings.Repeat("v", topo.MaxValueSize+1), same)},
		{"unlocked", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			require.NoError(t, ld.Unlock(ctx))
			return guardedCall{ctx, ld, "d/f", []byte("y"), v}
		}},
		{"session lost", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			c.ExpireSession()
			return guardedCall{ctx, ld, "d/f", []byte("y"), v}
		}},
		{"wrapped lost fence", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			c.ExpireSession()
			return guardedCall{ctx, wrappedFence{ld}, "d/f", []byte("y"), v}
		}},
		{"wrapped held fence", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			return guardedCall{ctx, wrappedFence{ld}, "d/f", []byte("y"), v}
		}},
		{"fence of another backend", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			return guardedCall{ctx, alienFence{}, "d/f", []byte("y"), v}
		}},
		{"fence of another store", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			o, err := f.NewConn("other", "/root")
			require.NoError(t, err)
			t.Cleanup(o.Close)
			_, err = o.Create(ctx, "d/f", nil)
			require.NoError(t, err)
			ol, err := o.Lock(ctx, "d", "other")
			require.NoError(t, err)
			return guardedCall{ctx, ol, "d/f", []byte("y"), v}
		}},
		{"nil fence", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			return guardedCall{ctx, nil, "d/f", []byte("y"), v}
		}},
		{"cancelled ctx", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			return guardedCall{cctx, ld, "d/f", []byte("y"), v}
		}},
		{"expired ctx", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			cctx, cancel := context.WithTimeout(ctx, -1)
			t.Cleanup(cancel)
			return guardedCall{cctx, ld, "d/f", []byte("y"), v}
		}},
		{"closed conn", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			c.Close()
			return guardedCall{ctx, ld, "d/f", []byte("y"), v}
		}},
		{"injected error", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			f.SetError(topo.Unavailable)
			t.Cleanup(func() { f.SetError(nil) })
			return guardedCall{ctx, ld, "d/f", []byte("y"), v}
		}},
		{"txn fault on the path", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			f.AddFault(memorytopo.Fault{Op: memorytopo.OpTxn, Path: "d/f", Err: errors.New("boom"), Times: 1})
			return guardedCall{ctx, ld, "d/f", []byte("y"), v}
		}},
		{"update fault on the path", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			f.AddFault(memorytopo.Fault{Op: memorytopo.OpUpdate, Path: "d/f", Times: 1})
			return guardedCall{ctx, ld, "d/f", []byte("y"), v}
		}},
		{"update fault elsewhere", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			f.AddFault(memorytopo.Fault{Op: memorytopo.OpUpdate, Path: "d/g"})
			return guardedCall{ctx, ld, "d/f", []byte("y"), v}
		}},
		{"recursive watch registered", func(t *testing.T, f *memorytopo.Factory, c *memorytopo.Conn, ld topo.LockDescriptor, v topo.Version) guardedCall {
			wctx, cancel := context.WithCancel(ctx)
			_, ch, err := c.WatchRecursive(wctx, "d/")
			require.NoError(t, err)
			t.Cleanup(func() {
				cancel()
				for range ch {
				}
			})
			return guardedCall{ctx, ld, "d/f", []byte("y"), v}
		}},
	}
	// general is topo.GuardedUpdate's transaction plus a trailing
	// condition that holds, which memorytopo's Txn evaluates on its
	// general path (its shortcut takes only the two-op shape).
	general := func(ctx context.Context, c *memorytopo.Conn, f topo.Fence, p string, contents []byte, version topo.Version) (topo.Version, error) {
		vs, err := c.Txn(ctx, topo.IfHeld(f), topo.UpdateOp(p, contents, version), topo.IfAbsent("zz/none"))
		if err != nil {
			return nil, err
		}
		return vs[1], nil
	}
	fastPath := func(ctx context.Context, c *memorytopo.Conn, f topo.Fence, p string, contents []byte, version topo.Version) (topo.Version, error) {
		return topo.GuardedUpdate(ctx, c, f, p, contents, version)
	}
	txnPath := func(ctx context.Context, c *memorytopo.Conn, f topo.Fence, p string, contents []byte, version topo.Version) (topo.Version, error) {
		return topo.GuardedUpdate(ctx, txnOnly{c}, f, p, contents, version)
	}
	type guarded func(ctx context.Context, c *memorytopo.Conn, f topo.Fence, p string, contents []byte, version topo.Version) (topo.Version, error)
	run := func(t *testing.T, s setup, update guarded) guardedOutcome {
		f := memorytopo.NewFactory()
		c, err := f.NewConn("mem", "/root")
		require.NoError(t, err)
		t.Cleanup(c.Close)
		v, err := c.Create(ctx, "d/f", []byte("x"))
		require.NoError(t, err)
		ld, err := c.Lock(ctx, "d", "holder")
		require.NoError(t, err)
		call := s(t, f, c, ld, v)
		f.ResetCallCounts()
		nv, err := update(call.ctx, c, call.fence, call.path, call.contents, call.version)
		return observe(t, f, c, call, nv, err)
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			fast := run(t, sc.setup, fastPath)
			require.Equal(t, run(t, sc.setup, txnPath), fast, "fast path and Txn path")
			require.Equal(t, run(t, sc.setup, general), fast, "fast path and Txn's general path")
			require.Equal(t, int64(1), fast.txnCalls, "counted once, as OpTxn")
		})
	}
}
