package memorytopo_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/topokit/topokit/topo/memorytopo"
)

// BenchmarkLockUnlock is an uncontended Lock of a directory followed by
// its Unlock, on one Conn, with allocations: the memory half of
// bench/vitess's BenchmarkLockUnlock, for profiling without the servers.
func BenchmarkLockUnlock(b *testing.B) {
	ctx := context.Background()
	c, err := memorytopo.NewFactory().NewConn("", "/zone1")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create(ctx, "d/f", []byte("x")); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ld, err := c.Lock(ctx, "d", "holder")
		if err != nil {
			b.Fatal(err)
		}
		if err := ld.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCreateDelete creates a file beside another one and deletes it,
// with allocations: the memory half of bench/vitess's
// BenchmarkCreateDelete (the path is built the same way).
func BenchmarkCreateDelete(b *testing.B) {
	ctx := context.Background()
	c, err := memorytopo.NewFactory().NewConn("", "/zone1")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create(ctx, "d/sibling", []byte("x")); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := fmt.Sprintf("d/f%d", i)
		i++
		if _, err := c.Create(ctx, p, []byte("v")); err != nil {
			b.Fatal(err)
		}
		if err := c.Delete(ctx, p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListDir1000 lists a directory of 1000 files, with
// allocations: the memory half of bench/vitess's BenchmarkListDir1000.
func BenchmarkListDir1000(b *testing.B) {
	ctx := context.Background()
	c, err := memorytopo.NewFactory().NewConn("", "/zone1")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for i := range 1000 {
		if _, err := c.Create(ctx, fmt.Sprintf("d/f%04d", i), []byte("v")); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		es, err := c.ListDir(ctx, "d", false)
		if err != nil || len(es) != 1000 {
			b.Fatal(len(es), err)
		}
	}
}
