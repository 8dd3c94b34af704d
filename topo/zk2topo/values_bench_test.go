package zk2topo

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// Leader values benchmarks (issue 12):
//
//	go test -run '^$' -bench 'Values' -benchtime 500x ./topo/zk2topo/
//
// BenchmarkValuesProclaimObserve times Proclaim → the Observe event with
// the new value (another Conn), beside a raw client's set → another raw
// client's data watch event and re-read of the value, alternating the two
// each iteration; it reports both medians and their ratio.
// BenchmarkValuesHandover times the leader's Resign → the next
// candidate's Campaign returning (p50).

func p50(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func BenchmarkValuesProclaimObserve(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := freshRoot(b)
	c1 := openConn(b, []string{testServer}, root)
	c2 := openConn(b, []string{testServer}, root)
	p, err := c1.NewLeaderParticipation("elec", "leader")
	require.NoError(b, err)
	defer p.Stop()
	_, err = p.Campaign(ctx, []byte("v"))
	require.NoError(b, err)
	w, err := c2.NewLeaderParticipation("elec", "watcher")
	require.NoError(b, err)
	ch, err := w.Observe(ctx)
	require.NoError(b, err)
	<-ch

	r1, _, err := zk.Connect([]string{testServer}, testSessionTimeout, zk.WithLogInfo(false))
	require.NoError(b, err)
	defer r1.Close()
	r2, _, err := zk.Connect([]string{testServer}, testSessionTimeout, zk.WithLogInfo(false))
	require.NoError(b, err)
	defer r2.Close()
	rawPath := root + "-raw"
	_, err = r1.Create(rawPath, []byte("v"), 0, zk.WorldACL(zk.PermAll))
	require.NoError(b, err)
	defer func() { _ = r1.Delete(rawPath, -1) }()
	_, _, rw, err := r2.GetW(rawPath)
	require.NoError(b, err)

	raw := func(v []byte) time.Duration {
		start := time.Now()
		_, err := r1.Set(rawPath, v, -1)
		require.NoError(b, err)
		<-rw
		var data []byte
		data, _, rw, err = r2.GetW(rawPath)
		require.NoError(b, err)
		require.Equal(b, v, data)
		return time.Since(start)
	}
	ours := func(v []byte) time.Duration {
		start := time.Now()
		require.NoError(b, p.Proclaim(ctx, v))
		for l := range ch {
			if string(l.Value) == string(v) {
				return time.Since(start)
			}
		}
		b.Fatal("Observe closed")
		return 0
	}
	var rawDs, ourDs []time.Duration
	b.ResetTimer()
	for i := range b.N {
		v := fmt.Appendf(nil, "value-%d", i)
		if i%2 == 0 {
			rawDs = append(rawDs, raw(v))
			ourDs = append(ourDs, ours(v))
		} else {
			ourDs = append(ourDs, ours(v))
			rawDs = append(rawDs, raw(v))
		}
	}
	b.StopTimer()
	r, o := p50(rawDs), p50(ourDs)
	b.ReportMetric(float64(r.Microseconds()), "raw-p50-µs")
	b.ReportMetric(float64(o.Microseconds()), "zk2-p50-µs")
	b.ReportMetric(float64(o)/float64(r), "zk2/raw-p50")
}

func BenchmarkValuesHandover(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := freshRoot(b)
	cs := []*Conn{openConn(b, []string{testServer}, root), openConn(b, []string{testServer}, root)}
	ps := make([]topo.LeaderParticipation, 2)
	for i := range ps {
		p, err := cs[i].NewLeaderParticipation("elec", fmt.Sprintf("id%d", i))
		require.NoError(b, err)
		defer p.Stop()
		ps[i] = p
	}
	_, err := ps[0].Campaign(ctx, []byte("v0"))
	require.NoError(b, err)
	var ds []time.Duration
	b.ResetTimer()
	for i := range b.N {
		leader, next := ps[i%2], ps[(i+1)%2]
		got := make(chan error, 1)
		go func() {
			_, err := next.Campaign(ctx, []byte("v"))
			got <- err
		}()
		// Wait until next's candidate is queued behind the leader.
		require.Eventually(b, func() bool {
			_, err := next.ResumeInfo()
			return err == nil
		}, time.Minute, 50*time.Microsecond)
		start := time.Now()
		require.NoError(b, leader.Resign(ctx))
		require.NoError(b, <-got)
		ds = append(ds, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64(p50(ds).Microseconds()), "handover-p50-µs")
}
