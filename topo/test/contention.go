package test

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
)

// BenchContention runs n contenders (through conns, in turn) in a loop,
// each taking the lock of directory "d" (kind "lock"), leading election
// "e" (kind "election", a new participation per term) or acquiring a slot
// of semaphore "s" of SemaphoreBenchLimit slots (kind "semaphore"), and
// letting go at once; an iteration is one acquisition. Measuring starts once n
// acquisitions have passed (every contender has queued). It reports
// acquisitions per second (acq/s), the process's CPU time (user and
// system, from getrusage: an embedded server counts) per acquisition in
// milliseconds (cpu-ms/acq), and how many contenders acquired at least
// once while measured (acquirers), and the most acquisitions between two
// turns of one contender while measured, divided by n (max-gap/n: 1 for
// a FIFO queue whose contenders queue again at once; 0 when no contender
// acquired twice). b.Loop bounds it in time as any benchmark.
func BenchContention(b *testing.B, conns []topo.Conn, kind string, n int) {
	BenchContentionServer(b, conns, kind, n, nil)
}

// BenchContentionServer is BenchContention for a store whose server runs
// in a process of its own: server (when not nil) returns that process's
// CPU time so far, and cpu-ms/acq then counts it beside this process's;
// srv-cpu-ms/acq is the server's part alone.
func BenchContentionServer(b *testing.B, conns []topo.Conn, kind string, n int, server func() time.Duration) {
	if server == nil {
		server = func() time.Duration { return 0 }
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if kind == "lock" {
		if _, err := conns[0].Create(ctx, "d/f", []byte("x")); err != nil && !topo.IsErrType(err, topo.NodeExists) {
			require.NoError(b, err)
		}
	}
	acquired := make(chan int)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i := range n {
		c := conns[i%len(conns)]
		id := fmt.Sprintf("c%d", i)
		wg.Go(func() {
			for ctx.Err() == nil {
				release, err := claimOnce(ctx, c, kind, id)
				if err != nil {
					return
				}
				select {
				case acquired <- i:
				case <-ctx.Done():
				}
				release()
			}
		})
	}
	for range n {
		<-acquired
	}
	seen := make([]bool, n)
	// last holds each contender's last turn (its acquisition's number,
	// from 1; 0: none yet), maxGap the most acquisitions between two
	// turns of one contender: n for a FIFO lock whose contenders queue
	// again at once, far more when some pass others (a count of
	// acquirers alone would not show that).
	last := make([]int, n)
	maxGap := 0
	acquirers := 0
	srv0 := server()
	cpu0 := cpuTime() + srv0
	t0 := time.Now()
	iters := 0
	for b.Loop() {
		i := <-acquired
		iters++
		if last[i] > 0 {
			maxGap = max(maxGap, iters-last[i])
		}
		last[i] = iters
		if !seen[i] {
			seen[i] = true
			acquirers++
		}
	}
	srv := server()
	elapsed, cpu := time.Since(t0), cpuTime()+srv-cpu0
	b.ReportMetric(float64(iters)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(iters), "cpu-ms/acq")
	if srv > 0 {
		b.ReportMetric(float64((srv-srv0).Microseconds())/1000/float64(iters), "srv-cpu-ms/acq")
	}
	b.ReportMetric(float64(acquirers), "acquirers")
	b.ReportMetric(float64(maxGap)/float64(n), "max-gap/n")
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// SemaphoreBenchLimit is the number of slots of the semaphore of
// BenchContention's kind "semaphore".
const SemaphoreBenchLimit = 2

// claimOnce takes the lock of directory "d" (kind "lock"), a slot of
// semaphore "s" (kind "semaphore") or leads election "e" (any other kind,
// with a new participation) through c as id, waiting until ctx ends, and
// returns the function that lets go.
func claimOnce(ctx context.Context, c topo.Conn, kind, id string) (release func(), err error) {
	switch kind {
	case "semaphore":
		sem, err := semaphore.New(c, "s", SemaphoreBenchLimit, semaphore.Options{Description: id})
		if err != nil {
			return nil, err
		}
		ld, err := sem.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		return func() { _ = ld.Unlock(context.Background()) }, nil
	case "lock":
		ld, err := c.Lock(ctx, "d", id)
		if err != nil {
			return nil, err
		}
		return func() { _ = ld.Unlock(context.Background()) }, nil
	}
	p, err := c.NewLeaderParticipation("e", id)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, p.Stop)
	_, err = p.WaitForLeadership()
	stop()
	if err != nil {
		p.Stop()
		return nil, err
	}
	return p.Stop, nil
}
