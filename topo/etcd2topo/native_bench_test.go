package etcd2topo

// Benchmarks of native elections (native.go) beside concurrency.Election
// on the same server, in the style of bench_test.go: raw-p50-µs is
// concurrency.Election's, topo-p50-µs topokit's, topo/raw their ratio;
// rt/op and raw-rt/op count the requests of each side (both campaigners,
// or the proclaimer and the observer).
//
//	go test -run xxx -bench Native -benchtime 200x ./topo/etcd2topo/

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"
)

// BenchmarkNativeHandover: how long after the leader's Resign returns
// the waiter's Campaign returns: two concurrency.Elections on two
// sessions, beside two topokit native participations on two Conns, on
// prefixes of their own.
func BenchmarkNativeHandover(b *testing.B) {
	e := newBenchEnv(b)
	c1, cli, root, obs := e.c, e.cli, e.root, e.obs
	c2 := countedConn(b, root, e.tc)
	ctx := context.Background()
	s1, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
	must(b, err)
	defer s1.Close()
	s2, err := concurrency.NewSession(countedClient(b, e.rc), concurrency.WithTTL(30))
	must(b, err)
	defer s2.Close()
	rawPrefix, tkPrefix := nativePrefix(), nativePrefix()
	e1, e2 := concurrency.NewElection(s1, rawPrefix), concurrency.NewElection(s2, rawPrefix)
	p1, err := c1.NewNativeElection(tkPrefix, "one")
	must(b, err)
	defer p1.Stop()
	p2, err := c2.NewNativeElection(tkPrefix, "two")
	must(b, err)
	defer p2.Stop()

	var raw, tp latencies
	i := 0
	m := e.mark()
	for b.Loop() {
		delay := waitDelays[i%len(waitDelays)]
		i++

		must(b, e1.Campaign(ctx, "one"))
		got := make(chan time.Time, 1)
		go func() {
			if err := e2.Campaign(ctx, "two"); err != nil {
				panic(err)
			}
			got <- time.Now()
		}()
		waitKeys(b, obs, rawPrefix+"/", 2)
		time.Sleep(delay)
		must(b, e1.Resign(ctx))
		t0 := time.Now()
		raw = append(raw, (<-got).Sub(t0))
		must(b, e2.Resign(ctx))

		_, err := p1.Campaign(ctx, []byte("one"))
		must(b, err)
		gotLead := make(chan time.Time, 1)
		go func() {
			_, err := p2.Campaign(ctx, []byte("two"))
			gotLead <- time.Now()
			if err != nil {
				panic(err)
			}
		}()
		waitKeys(b, obs, tkPrefix+"/", 2)
		time.Sleep(delay)
		must(b, p1.Resign(ctx))
		t0 = time.Now()
		tp = append(tp, (<-gotLead).Sub(t0))
		must(b, p2.Resign(ctx))
	}
	e.reportRT(b, m, i)
	report(b, raw, tp)
}

// BenchmarkNativeProclaimObserve: from the start of the leader's Proclaim
// to the observer's channel delivering the new value: a
// concurrency.Election's Proclaim seen by another's Observe, beside a
// topokit native leader's Proclaim seen by another Conn's Observe.
func BenchmarkNativeProclaimObserve(b *testing.B) {
	e := newBenchEnv(b)
	c1, cli, root := e.c, e.cli, e.root
	c2 := countedConn(b, root, e.tc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s1, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
	must(b, err)
	defer s1.Close()
	s2, err := concurrency.NewSession(countedClient(b, e.rc), concurrency.WithTTL(30))
	must(b, err)
	defer s2.Close()
	rawPrefix, tkPrefix := nativePrefix(), nativePrefix()
	leader, watcher := concurrency.NewElection(s1, rawPrefix), concurrency.NewElection(s2, rawPrefix)
	must(b, leader.Campaign(ctx, "v0"))
	rawObs := watcher.Observe(ctx)

	p, err := c1.NewNativeElection(tkPrefix, "leader")
	must(b, err)
	defer p.Stop()
	_, err = p.Campaign(ctx, []byte("v0"))
	must(b, err)
	q, err := c2.NewNativeElection(tkPrefix, "watcher")
	must(b, err)
	defer q.Stop()
	tkObs, err := q.Observe(ctx)
	must(b, err)

	var raw, tp latencies
	i := 0
	m := e.mark()
	for b.Loop() {
		i++
		val := fmt.Sprint(i)

		t0 := time.Now()
		must(b, leader.Proclaim(ctx, val))
		for r := range rawObs {
			if len(r.Kvs) > 0 && string(r.Kvs[0].Value) == val {
				break
			}
		}
		raw = append(raw, time.Since(t0))

		t0 = time.Now()
		must(b, p.Proclaim(ctx, []byte(val)))
		for l := range tkObs {
			if string(l.Value) == val {
				break
			}
		}
		tp = append(tp, time.Since(t0))
	}
	e.reportRT(b, m, i)
	report(b, raw, tp)
}
