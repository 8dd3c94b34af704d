package etcd2topo

// Benchmarks of the Vitess-layout elections' leader values (values.go),
// in the style of bench_test.go: raw-p50-µs is the raw client's,
// topo-p50-µs topokit's, topo/raw their ratio.
//
//	go test -run xxx -bench 'Values' -benchtime 200x ./topo/etcd2topo/

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// BenchmarkValuesProclaimObserve: from the start of the leader's Proclaim
// to another Conn's Observe delivering the new value, beside a raw
// client's put of a key to another raw client's watch event on it
// (topo/raw), and beside a concurrency.Election's Proclaim seen by
// another's Observe (election-p50-µs, topo/election; on uncounted
// clients, so raw-rt/op counts the put and watch only).
func BenchmarkValuesProclaimObserve(b *testing.B) {
	e := newBenchEnv(b)
	c1, cli, root := e.c, e.cli, e.root
	c2 := countedConn(b, root, e.tc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rawKey := root + "/rawvalue"
	watcher := countedClient(b, e.rc)
	wch := watcher.Watch(ctx, rawKey, clientv3.WithCreatedNotify())
	<-wch // created

	p, err := c1.NewLeaderParticipation("bench", "leader")
	must(b, err)
	defer p.Stop()
	_, err = p.Campaign(ctx, []byte("v0"))
	must(b, err)
	q, err := c2.NewLeaderParticipation("bench", "watcher")
	must(b, err)
	defer q.Stop()
	obs, err := q.Observe(ctx)
	must(b, err)
	s1, err := concurrency.NewSession(e.obs, concurrency.WithTTL(30))
	must(b, err)
	defer s1.Close()
	s2, err := concurrency.NewSession(rawClient(b, serverAddr), concurrency.WithTTL(30))
	must(b, err)
	defer s2.Close()
	elPrefix := root + "/election"
	elLeader, elWatcher := concurrency.NewElection(s1, elPrefix), concurrency.NewElection(s2, elPrefix)
	must(b, elLeader.Campaign(ctx, "v0"))
	elObs := elWatcher.Observe(ctx)

	var raw, tp, el latencies
	i := 0
	m := e.mark()
	for b.Loop() {
		i++
		val := fmt.Sprint(i)

		t0 := time.Now()
		must(b, elLeader.Proclaim(ctx, val))
		for r := range elObs {
			if len(r.Kvs) > 0 && string(r.Kvs[0].Value) == val {
				break
			}
		}
		el = append(el, time.Since(t0))

		t0 = time.Now()
		_, err := cli.Put(ctx, rawKey, val)
		must(b, err)
	raw:
		for wr := range wch {
			for _, ev := range wr.Events {
				if string(ev.Kv.Value) == val {
					break raw
				}
			}
		}
		raw = append(raw, time.Since(t0))

		t0 = time.Now()
		must(b, p.Proclaim(ctx, []byte(val)))
		for l := range obs {
			if string(l.Value) == val {
				break
			}
		}
		tp = append(tp, time.Since(t0))
	}
	e.reportRT(b, m, i)
	report(b, raw, tp)
	b.ReportMetric(float64(el.p50().Nanoseconds())/1e3, "election-p50-µs")
	ratio(b, "topo/election", tp, el)
}

// BenchmarkValuesHandover: how long after the leader's Resign is called
// the waiter's Campaign returns (from the call, not its return: the
// waiter often wins before the leader's Resign has its reply): two topokit participations on two Conns
// in a Vitess-layout election, beside two concurrency.Elections (the raw
// client's election recipe) on sessions of their own.
func BenchmarkValuesHandover(b *testing.B) {
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
	rawPrefix := nativePrefix()
	e1, e2 := concurrency.NewElection(s1, rawPrefix), concurrency.NewElection(s2, rawPrefix)
	p1, err := c1.NewLeaderParticipation("handover", "one")
	must(b, err)
	defer p1.Stop()
	p2, err := c2.NewLeaderParticipation("handover", "two")
	must(b, err)
	defer p2.Stop()
	queue := c1.electionPrefix("handover")

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
		t0 := time.Now()
		must(b, e1.Resign(ctx))
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
		waitKeys(b, obs, queue, 2)
		time.Sleep(delay)
		t0 = time.Now()
		must(b, p1.Resign(ctx))
		tp = append(tp, (<-gotLead).Sub(t0))
		must(b, p2.Resign(ctx))
	}
	e.reportRT(b, m, i)
	report(b, raw, tp)
}
