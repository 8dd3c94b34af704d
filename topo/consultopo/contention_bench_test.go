package consultopo

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
)

// BenchmarkContention runs n contenders, each on a Conn of its own, that
// lock and unlock one lock (lock/n) or win and resign one election
// (election/n) in a loop. After a warm-up (every contender has started
// and, with the queue, queued: contentionWarmup plus 10 ms per contender)
// it measures until max(3n, 300) acquisitions or contentionWindow,
// whichever comes first, and reports for that window:
//
//   - acq/s: acquisitions (terms) per second;
//   - cpu-us/acq: this process's CPU time (user+system, getrusage) per
//     acquisition, all contenders together;
//   - consul-cpu-us/acq: the agent's CPU time per acquisition, from
//     /proc/<pid>/stat (0 where that cannot be read);
//   - rt/acq: HTTP requests to the agent per acquisition, every
//     contender's (see rtCounter: blocking queries and session renewals
//     count);
//   - ever-acquired: how many of the n contenders acquired at least once
//     in the window (with a fair order, all of them once 3n acquisitions
//     were counted);
//   - min-acq: the fewest acquisitions of any contender in the window.
//
// Each row runs once per b.N, bounded in time.
//
//	go test -run '^$' -bench Contention -benchtime 1x ./topo/consultopo/
func BenchmarkContention(b *testing.B) {
	for _, kind := range []string{"lock", "election"} {
		for _, n := range []int{1, 10, 100, 300} {
			b.Run(fmt.Sprintf("%s/%d", kind, n), func(b *testing.B) {
				for range b.N {
					contentionRow(b, kind, n)
				}
			})
		}
	}
}

// contentionWarmup and contentionWindow bound each row of
// BenchmarkContention.
const (
	contentionWarmup = time.Second
	contentionWindow = 20 * time.Second
)

func contentionRow(b *testing.B, kind string, n int) {
	root := testRoot(b)
	opts := testOptions()
	opts.WatchPollDuration = time.Minute
	conns := make([]*Conn, n)
	var rt rtCounter
	for i := range conns {
		c, err := NewConn(opts, root)
		require.NoError(b, err)
		rt.hook(c.transport)
		conns[i] = c
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	_, err := conns[0].Create(context.Background(), "d/f", []byte("x"))
	require.NoError(b, err)
	counts := make([]atomic.Int64, n)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var parts []topo.LeaderParticipation
	if kind == "election" {
		parts = make([]topo.LeaderParticipation, n)
		for i, c := range conns {
			p, err := c.NewLeaderParticipation("bench", strconv.Itoa(i))
			require.NoError(b, err)
			parts[i] = p
		}
	}
	// Sessions first, so that the window measures contention only.
	for _, c := range conns {
		_, err := c.sessionFor(ctx, "d", c.opts.SessionTTL)
		require.NoError(b, err)
	}
	var total atomic.Int64
	limit := max(3*n, 300)
	enough := make(chan struct{})
	measuring := atomic.Bool{}
	for i := range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				if parts != nil {
					if _, err := parts[i].WaitForLeadership(); err != nil {
						return
					}
					acquired(&counts[i], &total, &measuring, limit, enough)
					_ = parts[i].Resign(context.Background())
					continue
				}
				l, err := conns[i].Lock(ctx, "d", "bench")
				if err != nil {
					return
				}
				acquired(&counts[i], &total, &measuring, limit, enough)
				_ = l.Unlock(context.Background())
			}
		})
	}
	time.Sleep(contentionWarmup + time.Duration(n)*10*time.Millisecond)
	base := make([]int64, n)
	for i := range counts {
		base[i] = counts[i].Load()
	}
	cpu0, consul0, rt0 := selfCPU(), consulCPU(), rt.load()
	start := time.Now()
	measuring.Store(true)
	select {
	case <-enough:
	case <-time.After(contentionWindow):
	}
	measuring.Store(false)
	elapsed := time.Since(start)
	cpu, consul, requests := selfCPU()-cpu0, consulCPU()-consul0, rt.load()-rt0
	cancel()
	var sum int64
	minAcq, ever := int64(-1), 0
	for i := range counts {
		k := counts[i].Load() - base[i]
		sum += k
		if k > 0 {
			ever++
		}
		if minAcq < 0 || k < minAcq {
			minAcq = k
		}
	}
	for _, p := range parts {
		p.Stop()
	}
	wg.Wait()
	if sum == 0 {
		b.Fatalf("no acquisition in %v", elapsed)
	}
	b.ReportMetric(float64(sum)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(sum), "cpu-us/acq")
	b.ReportMetric(float64(consul.Microseconds())/float64(sum), "consul-cpu-us/acq")
	b.ReportMetric(float64(requests)/float64(sum), "rt/acq")
	b.ReportMetric(float64(ever), "ever-acquired")
	b.ReportMetric(float64(minAcq), "min-acq")
}

// acquired counts one acquisition of a contender, and closes enough at the
// limit-th one counted while measuring.
func acquired(count, total *atomic.Int64, measuring *atomic.Bool, limit int, enough chan struct{}) {
	count.Add(1)
	if measuring.Load() && total.Add(1) == int64(limit) {
		close(enough)
	}
}

// selfCPU returns this process's CPU time so far (user and system).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// consulCPU returns the agent process's CPU time so far, 0 when it cannot
// be read.
func consulCPU() time.Duration {
	d, _ := agent.CPUTime()
	return d
}

// BenchmarkSemaphoreContention is test.BenchContentionServer's kind
// "semaphore" (test.SemaphoreBenchLimit slots, each contender releasing at
// once) over 10 Conns for N = 1, 10, 100, 300 contenders: acquisitions per
// second, CPU per acquisition (this process's and the agent's) and how
// many contenders acquired (issue 33: each release admits the next waiter
// only).
func BenchmarkSemaphoreContention(b *testing.B) {
	for _, n := range []int{1, 10, 100, 300} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			root := testRoot(b)
			conns := make([]topo.Conn, 10)
			for i := range conns {
				c, err := NewConn(testOptions(), root)
				require.NoError(b, err)
				b.Cleanup(c.Close)
				conns[i] = c
			}
			test.BenchContentionServer(b, conns, "semaphore", n, func() time.Duration {
				d, _ := agent.CPUTime()
				return d
			})
		})
	}
}
