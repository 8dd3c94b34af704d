package consultopo

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkGetRequestBound measures what Options.RequestTimeout's bound
// costs a Get: pairedBench's "raw" side is a Conn without the bound
// (RequestTimeout < 0), its "topokit" side one with the default bound, on
// the same agent and key; ratio is bounded p50 / unbounded p50.
func BenchmarkGetRequestBound(b *testing.B) {
	root := testRoot(b)
	rt := &rtSides{}
	bounded := rt.conn(b, root)
	opts := testOptions()
	opts.RequestTimeout = -1
	unbounded, err := NewConn(opts, root)
	require.NoError(b, err)
	b.Cleanup(unbounded.Close)
	rt.raw.hook(unbounded.transport)
	ctx := context.Background()
	mustWrite(b, bounded, "get/f", "some value of a typical size, like a shard record")
	pairedBench(b, rt,
		func(int) {
			if _, _, err := unbounded.Get(ctx, "get/f"); err != nil {
				b.Fatal(err)
			}
		},
		func(int) {
			if _, _, err := bounded.Get(ctx, "get/f"); err != nil {
				b.Fatal(err)
			}
		})
}
