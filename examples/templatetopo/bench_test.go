package templatetopo_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// BenchmarkUpdateCAS is a compare-and-set Update chained on its own
// versions: the reference for BenchmarkGuardedUpdate.
func BenchmarkUpdateCAS(b *testing.B) {
	ctx := context.Background()
	_, cs := newConns(b, 1)
	c := cs[0]
	v, err := c.Create(ctx, "f", []byte("x"))
	require.NoError(b, err)
	for b.Loop() {
		if v, err = c.Update(ctx, "f", []byte("x"), v); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGuardedUpdate is the same chained compare-and-set, guarded by a
// held lock (topo.GuardedUpdate: one Txn, one request).
func BenchmarkGuardedUpdate(b *testing.B) {
	ctx := context.Background()
	_, cs := newConns(b, 1)
	c := cs[0]
	v, err := c.Create(ctx, "d/f", []byte("x"))
	require.NoError(b, err)
	l, err := c.Lock(ctx, "d", "bench")
	require.NoError(b, err)
	for b.Loop() {
		if v, err = topo.GuardedUpdate(ctx, c, l, "d/f", []byte("x"), v); err != nil {
			b.Fatal(err)
		}
	}
}
