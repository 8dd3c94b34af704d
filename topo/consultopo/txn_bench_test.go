package consultopo

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
)

// BenchmarkGuardedUpdate compares, on the same agent, a guarded update
// (topo.GuardedUpdate: IfHeld on a held lock plus a compare-and-set
// UpdateOp, one /v1/txn of a check-index and a check-session on the lock
// key and a cas on the file) with a plain compare-and-set Update (one
// /v1/txn of one cas), with the raw api transaction of a check-index on
// the lock key and the cas (IfHeld's shape before its check-session), and
// with the raw transaction that adds a check-session on the lock key and a
// check-index on the file. Each iteration
// runs the four in a rotating order, so that drift on a shared machine
// hits them alike; it reports each p50 in ns and the ratios
// guarded/update (the goal: at most 1.1), guarded/raw and
// raw-4op/update. Each is one HTTP request by construction.
func BenchmarkGuardedUpdate(b *testing.B) {
	c, raw, root, _ := benchSetup(b)
	ctx := context.Background()
	for _, f := range []string{"g/raw", "g/cas", "g/guarded", "g/raw4"} {
		mustWrite(b, c, f, "x")
	}
	l, err := c.Lock(ctx, "g", "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Unlock(ctx)
	token := uint64(l.Token())
	sessID := fenceSession(b, l).id
	version := func(f string) topo.Version {
		_, v, err := c.Get(ctx, f)
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	rawV, casV, guardedV, raw4V := version("g/raw"), version("g/cas"), version("g/guarded"), version("g/raw4")
	rawTxn := raw.Txn()
	lockKey := root + "/g/Lock"
	fns := []func(i int){
		func(i int) { // raw
			idx := uint64(rawV.(topo.NumericVersion))
			ok, resp, _, err := rawTxn.Txn(api.TxnOps{
				{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: lockKey, Index: token}},
				{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: root + "/g/raw", Value: []byte("value " + strconv.Itoa(i)), Flags: writeNonce(), Index: idx}},
			}, nil)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			rawV = topo.NumericVersion(resp.Results[len(resp.Results)-1].KV.ModifyIndex)
		},
		func(i int) { // CAS Update
			v, err := c.Update(ctx, "g/cas", []byte("value "+strconv.Itoa(i)), casV)
			if err != nil {
				b.Fatal(err)
			}
			casV = v
		},
		func(i int) { // GuardedUpdate
			v, err := topo.GuardedUpdate(ctx, c, l, "g/guarded", []byte("value "+strconv.Itoa(i)), guardedV)
			if err != nil {
				b.Fatal(err)
			}
			guardedV = v
		},
		func(i int) { // raw, with the two Consul operations Txn leaves out
			idx := uint64(raw4V.(topo.NumericVersion))
			ok, resp, _, err := rawTxn.Txn(api.TxnOps{
				{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: lockKey, Session: sessID}},
				{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: lockKey, Index: token}},
				{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: root + "/g/raw4", Index: idx}},
				{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: root + "/g/raw4", Value: []byte("value " + strconv.Itoa(i)), Flags: writeNonce(), Index: idx}},
			}, nil)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			raw4V = topo.NumericVersion(resp.Results[len(resp.Results)-1].KV.ModifyIndex)
		},
	}
	for i := range 20 {
		for _, f := range fns {
			f(-1 - i)
		}
	}
	times := make([][]time.Duration, len(fns))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		for k := range fns {
			j := (i + k) % len(fns)
			start := time.Now()
			fns[j](i)
			times[j] = append(times[j], time.Since(start))
		}
	}
	b.StopTimer()
	p := make([]time.Duration, len(fns))
	for j, ts := range times {
		s := slices.Clone(ts)
		slices.Sort(s)
		if len(s) > 0 {
			p[j] = s[len(s)/2]
		}
	}
	b.ReportMetric(float64(p[0].Nanoseconds()), "raw-txn-p50-ns")
	b.ReportMetric(float64(p[1].Nanoseconds()), "cas-update-p50-ns")
	b.ReportMetric(float64(p[2].Nanoseconds()), "guarded-p50-ns")
	b.ReportMetric(float64(p[2])/float64(p[1]), "guarded/update")
	b.ReportMetric(float64(p[2])/float64(p[0]), "guarded/raw")
	b.ReportMetric(float64(p[3].Nanoseconds()), "raw-4op-p50-ns")
	b.ReportMetric(float64(p[3])/float64(p[1]), "raw-4op/update")
}
