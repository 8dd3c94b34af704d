package consultopo

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
)

// Leader-value benchmarks (issue 12), beside the raw api on the same agent:
//
//   - BenchmarkProclaimObserve: from the start of a leader's Proclaim to
//     the moment an Observe (on another Conn) delivers the new value,
//     beside a raw client's KV put to the moment a blocking query of
//     another raw client on that key returns it.
//   - BenchmarkCampaignHandover: from the moment the leader's Resign
//     returns to the moment the other participant's Campaign (on another
//     Conn) returns, beside two api.Lock (see rawHandover).
//
// Both report the p50 of each side (raw-p50-ns, topokit-p50-ns), their
// ratio and the requests per iteration.
//
//	go test -run '^$' -bench 'ProclaimObserve|CampaignHandover' -benchtime 200x ./topo/consultopo/

// BenchmarkProclaimObserve: Proclaim -> Observe delivery.
func BenchmarkProclaimObserve(b *testing.B) {
	c1, rawW, root, rt := benchSetup(b)
	c2 := rt.conn(b, root)
	rawR := rt.client(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Raw: a writer's put, a reader's blocking query on the key.
	rawKey := root + "/rawvalue"
	if _, err := rawW.KV().Put(&api.KVPair{Key: rawKey, Value: []byte("init")}, nil); err != nil {
		b.Fatal(err)
	}
	rawSeen := make(chan string, 1)
	go func() {
		var index uint64
		for ctx.Err() == nil {
			q := (&api.QueryOptions{WaitIndex: index, WaitTime: 10 * time.Second}).WithContext(ctx)
			pair, meta, err := rawR.KV().Get(rawKey, q)
			if err != nil {
				continue
			}
			if meta.LastIndex != index && pair != nil {
				select {
				case rawSeen <- string(pair.Value):
				case <-ctx.Done():
					return
				}
			}
			index = meta.LastIndex
		}
	}()

	leader, err := c1.NewLeaderParticipation("e", "leader")
	if err != nil {
		b.Fatal(err)
	}
	defer leader.Stop()
	if _, err := leader.Campaign(ctx, []byte("init")); err != nil {
		b.Fatal(err)
	}
	watcher, err := c2.NewLeaderParticipation("e", "watcher")
	if err != nil {
		b.Fatal(err)
	}
	ch, err := watcher.Observe(ctx)
	if err != nil {
		b.Fatal(err)
	}
	<-ch
	// Let both readers park in their blocking queries.
	time.Sleep(50 * time.Millisecond)
	drainRaw := func() {
		for {
			select {
			case <-rawSeen:
			default:
				return
			}
		}
	}
	drainRaw()

	var raw, tk []time.Duration
	i := 0
	m := rt.mark()
	for b.Loop() {
		v := fmt.Sprintf("v%d", i)
		i++
		t0 := time.Now()
		if _, err := rawW.KV().Put(&api.KVPair{Key: rawKey, Value: []byte(v)}, nil); err != nil {
			b.Fatal(err)
		}
		for got := <-rawSeen; got != v; got = <-rawSeen {
		}
		raw = append(raw, time.Since(t0))

		t0 = time.Now()
		if err := leader.Proclaim(ctx, []byte(v)); err != nil {
			b.Fatal(err)
		}
		for l := range ch {
			if string(l.Value) == v {
				break
			}
		}
		tk = append(tk, time.Since(t0))
		// Let both readers park again.
		time.Sleep(2 * time.Millisecond)
	}
	rt.report(b, m, i)
	reportHandover(b, raw, tk)
}

// BenchmarkCampaignHandover: Resign -> next Campaign returns.
func BenchmarkCampaignHandover(b *testing.B) {
	c1, _, root, rt := benchSetup(b)
	c2 := rt.conn(b, root)
	l1, l2 := rawLockPair(b, rt, root+"/rawelection")
	ctx := context.Background()
	ps := make([]topo.LeaderParticipation, 2)
	for i, c := range []*Conn{c1, c2} {
		p, err := c.NewLeaderParticipation("e", fmt.Sprintf("p%d", i))
		if err != nil {
			b.Fatal(err)
		}
		defer p.Stop()
		ps[i] = p
	}
	var raw, tk []time.Duration
	i := 0
	m := rt.mark()
	for b.Loop() {
		delay := handoverDelays[i%len(handoverDelays)]
		i++
		raw = append(raw, rawHandover(b, l1, l2, delay))

		if _, err := ps[0].Campaign(ctx, []byte("one")); err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		errc := make(chan error, 1)
		go func() {
			_, err := ps[1].Campaign(ctx, []byte("two"))
			got <- time.Now()
			errc <- err
		}()
		time.Sleep(delay)
		if err := ps[0].Resign(ctx); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		tk = append(tk, (<-got).Sub(t0))
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
		if err := ps[1].Resign(ctx); err != nil {
			b.Fatal(err)
		}
	}
	rt.report(b, m, i)
	reportHandover(b, raw, tk)
}
