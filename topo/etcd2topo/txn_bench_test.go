package etcd2topo

// Benchmarks of guarded writes (Txn), beside a plain compare-and-set
// Update and the raw client's transaction of the same shape, on the
// package's etcd member:
//
//	go test -run xxx -bench 'Guarded|Txn' -benchtime 500x ./topo/etcd2topo/

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
)

// rotate runs every op once per iteration, starting with a different one
// each time so that load from other processes hits all alike, and
// reports each op's median latency as <name>-p50-µs and, when counters
// are given (one per op, nil for none), the requests it sent per
// operation as <name>-rt/op.
func rotate(b *testing.B, names []string, counters []*rtCounter, ops []func() error) []latencies {
	b.Helper()
	lat := make([]latencies, len(ops))
	rts := make([]int64, len(ops))
	i := 0
	for b.Loop() {
		for j := range ops {
			k := (i + j) % len(ops)
			var before int64
			if counters != nil && counters[k] != nil {
				before = counters[k].load()
			}
			t0 := time.Now()
			err := ops[k]()
			lat[k] = append(lat[k], time.Since(t0))
			if counters != nil && counters[k] != nil {
				rts[k] += counters[k].load() - before
			}
			must(b, err)
		}
		i++
	}
	for k, name := range names {
		b.ReportMetric(float64(lat[k].p50().Nanoseconds())/1e3, name+"-p50-µs")
		if counters != nil && counters[k] != nil && i > 0 {
			b.ReportMetric(float64(rts[k])/float64(i), name+"-rt/op")
		}
	}
	return lat
}

// ratio reports a's median over b's as metric name.
func ratio(b *testing.B, name string, x, y latencies) {
	if y.p50() > 0 {
		b.ReportMetric(float64(x.p50())/float64(y.p50()), name)
	}
}

// BenchmarkGuardedUpdate: topo.GuardedUpdate (IfHeld + UpdateOp with a
// version: one etcd Txn of two compares and one put, no Failure branch)
// beside Conn.Update with a version (one Txn of one
// compare and one put) and the raw client's Txn of the guarded shape.
// guarded/cas is the goal's ratio (at most 1.1), guarded/raw the
// backend's own overhead; raw/rawcas, the raw guarded Txn over the raw
// client's compare-and-set (one compare, one put), is what the store
// itself charges for the second compare.
func BenchmarkGuardedUpdate(b *testing.B) {
	e := newBenchEnv(b)
	c, cli, root := e.c, e.cli, e.root
	ctx := context.Background()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	must(b, err)
	ld, err := c.Lock(ctx, "d", "bench")
	must(b, err)
	defer ld.Unlock(ctx)
	entry := entryBehind(b, ld).key
	gv, err := c.Create(ctx, "g", []byte("x"))
	must(b, err)
	cv, err := c.Create(ctx, "cas", []byte("x"))
	must(b, err)
	rawKey := root + "/raw"
	resp, err := cli.Put(ctx, rawKey, "x")
	must(b, err)
	rawRev := resp.Header.Revision
	casKey := root + "/rawcas"
	resp, err = cli.Put(ctx, casKey, "x")
	must(b, err)
	casRev := resp.Header.Revision
	lat := rotate(b, []string{"guarded", "cas", "raw", "rawcas"}, []*rtCounter{e.tc, e.tc, e.rc, e.rc}, []func() error{
		func() error {
			gv, err = topo.GuardedUpdate(ctx, c, ld, "g", []byte("y"), gv)
			return err
		},
		func() error {
			cv, err = c.Update(ctx, "cas", []byte("y"), cv)
			return err
		},
		func() error {
			tr, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(entry), "=", ld.Token()),
					clientv3.Compare(clientv3.ModRevision(rawKey), "=", rawRev)).
				Then(clientv3.OpPut(rawKey, "y")).
				Commit()
			if err == nil && !tr.Succeeded {
				err = fmt.Errorf("raw guarded update failed")
			}
			if err == nil {
				rawRev = tr.Header.Revision
			}
			return err
		},
		func() error {
			tr, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(casKey), "=", casRev)).
				Then(clientv3.OpPut(casKey, "y")).
				Commit()
			if err == nil && !tr.Succeeded {
				err = fmt.Errorf("raw compare-and-set failed")
			}
			if err == nil {
				casRev = tr.Header.Revision
			}
			return err
		},
	})
	ratio(b, "guarded/cas", lat[0], lat[1])
	ratio(b, "guarded/raw", lat[0], lat[2])
	ratio(b, "raw/rawcas", lat[2], lat[3])
}

// BenchmarkTxnTransfer: a two-file transfer (two IfVersion-guarded
// UpdateOps under IfHeld) beside the raw client's Txn of the same shape.
func BenchmarkTxnTransfer(b *testing.B) {
	e := newBenchEnv(b)
	c, cli, root := e.c, e.cli, e.root
	ctx := context.Background()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	must(b, err)
	ld, err := c.Lock(ctx, "d", "bench")
	must(b, err)
	defer ld.Unlock(ctx)
	entry := entryBehind(b, ld).key
	va, err := c.Create(ctx, "a", []byte("x"))
	must(b, err)
	vb, err := c.Create(ctx, "b", []byte("x"))
	must(b, err)
	ka, kb := root+"/ra", root+"/rb"
	ra, err := cli.Put(ctx, ka, "x")
	must(b, err)
	rb, err := cli.Put(ctx, kb, "x")
	must(b, err)
	revA, revB := ra.Header.Revision, rb.Header.Revision
	lat := rotate(b, []string{"txn", "raw"}, []*rtCounter{e.tc, e.rc}, []func() error{
		func() error {
			vs, err := c.Txn(ctx, topo.IfHeld(ld), topo.UpdateOp("a", []byte("y"), va), topo.UpdateOp("b", []byte("y"), vb))
			if err == nil {
				va, vb = vs[1], vs[2]
			}
			return err
		},
		func() error {
			tr, err := cli.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(entry), "=", ld.Token()),
					clientv3.Compare(clientv3.ModRevision(ka), "=", revA),
					clientv3.Compare(clientv3.ModRevision(kb), "=", revB)).
				Then(clientv3.OpPut(ka, "y"), clientv3.OpPut(kb, "y")).
				Commit()
			if err == nil && !tr.Succeeded {
				err = fmt.Errorf("raw transfer failed")
			}
			if err == nil {
				revA, revB = tr.Header.Revision, tr.Header.Revision
			}
			return err
		},
	})
	ratio(b, "txn/raw", lat[0], lat[1])
}

// BenchmarkTxnShapes: what the guarded shape costs etcd itself, with the
// raw client alone: a compare-and-set (one compare, one put), with a
// Failure branch reading its key, with the second compare of IfHeld, and
// with both (GuardedUpdate's shape).
func BenchmarkTxnShapes(b *testing.B) {
	e := newBenchEnv(b)
	c, cli, root := e.c, e.cli, e.root
	ctx := context.Background()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	must(b, err)
	ld, err := c.Lock(ctx, "d", "bench")
	must(b, err)
	defer ld.Unlock(ctx)
	entry := entryBehind(b, ld).key
	keys := []string{root + "/k1", root + "/k2", root + "/k3", root + "/k4"}
	revs := make([]int64, 4)
	for i, k := range keys {
		r, err := cli.Put(ctx, k, "x")
		must(b, err)
		revs[i] = r.Header.Revision
	}
	mk := func(i int, guard, els bool) func() error {
		return func() error {
			cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(keys[i]), "=", revs[i])}
			var e []clientv3.Op
			if guard {
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(entry), "=", ld.Token()))
			}
			if els {
				e = append(e, clientv3.OpGet(keys[i], clientv3.WithKeysOnly()))
				if guard {
					e = append(e, clientv3.OpGet(entry, clientv3.WithKeysOnly()))
				}
			}
			tr, err := cli.Txn(ctx).If(cmps...).Then(clientv3.OpPut(keys[i], "y")).Else(e...).Commit()
			if err == nil {
				revs[i] = tr.Header.Revision
			}
			return err
		}
	}
	lat := rotate(b, []string{"cas", "cas+else", "guard", "guard+else"}, nil, []func() error{mk(0, false, false), mk(1, false, true), mk(2, true, false), mk(3, true, true)})
	ratio(b, "guard+else/cas", lat[3], lat[0])
}
