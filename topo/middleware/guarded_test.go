package middleware_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/middleware"
)

// guardedRecorder is a memorytopo Conn that counts which path
// topo.GuardedUpdate took into it: its own GuardedUpdate (the backend's
// fast path) or Txn.
type guardedRecorder struct {
	*memorytopo.Conn
	guarded, txns atomic.Int64
}

func (g *guardedRecorder) GuardedUpdate(ctx context.Context, f topo.Fence, filePath string, contents []byte, version topo.Version) (topo.Version, error) {
	g.guarded.Add(1)
	return g.Conn.GuardedUpdate(ctx, f, filePath, contents, version)
}

func (g *guardedRecorder) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	g.txns.Add(1)
	return g.Conn.Txn(ctx, ops...)
}

// txnOnly hides memorytopo's GuardedUpdate: a backend without the fast
// path.
type txnOnly struct{ topo.Conn }

// A decorated Conn keeps the wrapped backend's GuardedUpdate fast path,
// through every shipped decorator stacked, and the hooks see the guarded
// update exactly as the Txn it stands for: refused by read-only mode,
// counted and spanned as Txn on the file's path.
func TestGuardedUpdateForwarded(t *testing.T) {
	ctx := ctxT(t)
	f := memorytopo.NewFactory()
	raw, err := f.NewConn("", "/t")
	require.NoError(t, err)
	rec := &guardedRecorder{Conn: raw}

	m, reg := registeredMetrics(t, middleware.MetricsOptions{})
	exp, tp := memoryTracer(t)
	var ro middleware.ReadOnly
	c := topo.Decorate(info, rec, m.Middleware(), middleware.Tracing(tp), middleware.Logging(nil),
		ro.Middleware(), middleware.ReadLimit(1))
	defer c.Close()
	_, isGU := c.(backendkit.GuardedUpdater)
	require.True(t, isGU, "a decorated Conn offers the GuardedUpdate fast path")

	v, err := c.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "guard")
	require.NoError(t, err)
	exp.Reset()

	nv, err := topo.GuardedUpdate(ctx, c, l, "d/f", []byte("1"), v)
	require.NoError(t, err)
	require.Equal(t, int64(1), rec.guarded.Load(), "the wrapped backend's GuardedUpdate must be called")
	require.Equal(t, int64(0), rec.txns.Load(), "no Txn may be built for a guarded update")
	got, gv, err := raw.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "1", string(got))
	require.Equal(t, nv.String(), gv.String())
	require.Equal(t, 1.0, counter(t, reg, "topo_calls_total", map[string]string{"op": "Txn", "code": "OK"}))
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	require.Equal(t, "topo.Txn", spans[0].Name)
	require.Contains(t, spans[0].Attributes, attribute.String("topo.path", "d/f"))

	// Results are Txn's: a stale version is index 1 BadVersion.
	_, err = topo.GuardedUpdate(ctx, c, l, "d/f", []byte("2"), v)
	var te *topo.TxnError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 1, te.Index)
	require.ErrorIs(t, err, topo.BadVersion)
	require.Equal(t, 1.0, counter(t, reg, "topo_calls_total", map[string]string{"op": "Txn", "code": "BadVersion"}))

	// Read-only refuses it before the backend sees it.
	ro.Set(true)
	_, err = topo.GuardedUpdate(ctx, c, l, "d/f", []byte("3"), nil)
	require.ErrorIs(t, err, topo.ReadOnly)
	require.Equal(t, int64(2), rec.guarded.Load(), "a refused guarded update must not reach the backend")
	require.Equal(t, 1.0, counter(t, reg, "topo_calls_total", map[string]string{"op": "Txn", "code": "ReadOnly"}))
	ro.Set(false)

	// A released lock: index 0 LockLost, as the Txn gives.
	require.NoError(t, l.Unlock(ctx))
	_, err = topo.GuardedUpdate(ctx, c, l, "d/f", []byte("4"), nil)
	require.ErrorAs(t, err, &te)
	require.Equal(t, 0, te.Index)
	require.ErrorIs(t, err, topo.LockLost)
	require.Equal(t, int64(0), rec.txns.Load())
	got, _, err = raw.Get(ctx, "d/f")
	require.NoError(t, err)
	require.Equal(t, "1", string(got), "no refused guarded update wrote")
}

// Over a backend without the fast path, a decorated GuardedUpdate is the
// backend's Txn, passing through the hooks once.
func TestGuardedUpdateForwardedWithoutFastPath(t *testing.T) {
	ctx := ctxT(t)
	f := memorytopo.NewFactory()
	raw, err := f.NewConn("", "/t")
	require.NoError(t, err)
	var calls atomic.Int64
	count := middleware.Middleware(func(topo.ConnInfo) middleware.Hooks {
		return middleware.Hooks{Around: func(ctx context.Context, c middleware.Call, next func(context.Context) error) error {
			if c.Op == middleware.OpTxn {
				calls.Add(1)
			}
			return next(ctx)
		}}
	})
	c := topo.Decorate(info, txnOnly{raw}, count, count)
	defer c.Close()
	_, err = c.Create(ctx, "d/f", []byte("0"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "guard")
	require.NoError(t, err)
	defer func() { _ = l.Unlock(ctx) }()
	before := f.CallCount(memorytopo.OpTxn)
	_, err = topo.GuardedUpdate(ctx, c, l, "d/f", []byte("1"), nil)
	require.NoError(t, err)
	require.Equal(t, int64(2), calls.Load(), "each of the two decorators sees the guarded update once")
	require.Equal(t, before+1, f.CallCount(memorytopo.OpTxn), "one Txn reaches the backend")
}
