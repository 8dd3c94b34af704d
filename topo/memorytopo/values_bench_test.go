package memorytopo_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// reportP50 reports the median of ds as p50-ns.
func reportP50(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds()), "p50-ns")
}

// BenchmarkProclaimObserve measures Proclaim -> the Observe event carrying
// the value (one round trip per iteration), beside raw/: Update of a file
// -> its Watch event on the same store, the store's own write -> watch
// path.
func BenchmarkProclaimObserve(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := memorytopo.NewFactory()
	c1, err := f.NewConn("bench", "/root")
	if err != nil {
		b.Fatal(err)
	}
	defer c1.Close()
	c2, err := f.NewConn("bench", "/root")
	if err != nil {
		b.Fatal(err)
	}
	defer c2.Close()

	b.Run("proclaim", func(b *testing.B) {
		p, _ := c1.NewLeaderParticipation("bench", "leader")
		defer p.Stop()
		w, _ := c2.NewLeaderParticipation("bench", "watcher")
		if _, err := p.Campaign(ctx, []byte("v")); err != nil {
			b.Fatal(err)
		}
		octx, ocancel := context.WithCancel(ctx)
		defer ocancel()
		ch, err := w.Observe(octx)
		if err != nil {
			b.Fatal(err)
		}
		<-ch
		ds := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			v := fmt.Appendf(nil, "v%d", i)
			start := time.Now()
			if err := p.Proclaim(ctx, v); err != nil {
				b.Fatal(err)
			}
			for l := range ch {
				if string(l.Value) == string(v) {
					break
				}
			}
			ds = append(ds, time.Since(start))
		}
		reportP50(b, ds)
	})
	run := 0
	b.Run("raw=update-watch", func(b *testing.B) {
		run++ // the function runs more than once
		file := fmt.Sprintf("bench/f%d", run)
		ver, err := c1.Create(ctx, file, []byte("v"))
		if err != nil {
			b.Fatal(err)
		}
		wctx, wcancel := context.WithCancel(ctx)
		defer wcancel()
		_, events, err := c2.Watch(wctx, file)
		if err != nil {
			b.Fatal(err)
		}
		ds := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			v := fmt.Appendf(nil, "v%d", i)
			start := time.Now()
			if ver, err = c1.Update(ctx, file, v, ver); err != nil {
				b.Fatal(err)
			}
			for ev := range events {
				if ev.Err != nil {
					b.Fatal(ev.Err)
				}
				if string(ev.Contents) == string(v) {
					break
				}
			}
			ds = append(ds, time.Since(start))
		}
		reportP50(b, ds)
	})
}

// BenchmarkHandover measures an election handover: the leader's Resign
// -> the next candidate's Campaign returns (two participants alternating,
// each campaigning again right after it resigned).
func BenchmarkHandover(b *testing.B) {
	ctx := context.Background()
	f := memorytopo.NewFactory()
	var ps [2]topo.LeaderParticipation
	for i := range ps {
		c, err := f.NewConn("bench", "/root")
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if ps[i], err = c.NewLeaderParticipation("bench", fmt.Sprintf("p%d", i)); err != nil {
			b.Fatal(err)
		}
		defer ps[i].Stop()
	}
	if _, err := ps[0].Campaign(ctx, []byte("p0")); err != nil {
		b.Fatal(err)
	}
	type result struct {
		at  time.Time
		err error
	}
	waiting := make(chan result, 1)
	campaign := func(p topo.LeaderParticipation, v string) {
		_, err := p.Campaign(ctx, []byte(v))
		waiting <- result{time.Now(), err}
	}
	go campaign(ps[1], "p1")
	ds := make([]time.Duration, 0, b.N)
	leader := 0
	for b.Loop() {
		// Let the other's Campaign queue its entry before the Resign.
		for {
			l, err := ps[leader].Leader(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if l.ID == fmt.Sprintf("p%d", leader) && queued(ctx, f) {
				break
			}
		}
		start := time.Now()
		if err := ps[leader].Resign(ctx); err != nil {
			b.Fatal(err)
		}
		r := <-waiting
		if r.err != nil {
			b.Fatal(r.err)
		}
		ds = append(ds, r.at.Sub(start))
		go campaign(ps[leader], fmt.Sprintf("p%d", leader))
		leader = 1 - leader
	}
	b.StopTimer()
	reportP50(b, ds)
}

// queued reports whether the election has two entries.
func queued(ctx context.Context, f *memorytopo.Factory) bool {
	c, err := f.NewConn("bench", "/root")
	if err != nil {
		return false
	}
	defer c.Close()
	names, err := c.ListDir(ctx, "elections/bench", false)
	return err == nil && len(names) == 2
}
