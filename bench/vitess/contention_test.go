package vitessbench

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkContention: n contenders, over 10 Conns of one library, loop
// on one lock (or election, a new participation per term) with no hold
// time; an iteration is one acquisition, counted once every contender
// has acquired or queued (n acquisitions in). Each library runs as a
// sub-benchmark of its own, one after the other in the same run. It
// reports acquisitions per second (acq/s), the process's CPU time per
// acquisition (cpu-ms/acq: user and system from getrusage, the embedded
// etcd included, on zk the ZooKeeper server's JVM and on consul the
// agent too; server-cpu-ms/acq is the server's part of it) and how many
// contenders acquired while measured (acquirers), and the most
// acquisitions between two turns of one contender, divided by n
// (max-gap/n: 1 for a FIFO queue whose contenders queue again at once,
// far more when some pass others; 0 when none acquired twice). Consul's and zk's
// Vitess contenders may take long to all acquire once at n = 300: run
// those rows on their own, e.g. -bench 'Contention/zk'.
func BenchmarkContention(b *testing.B) {
	for _, s := range stores() {
		server := func() time.Duration { return 0 }
		switch s.name {
		case "zk":
			server = func() time.Duration {
				d, _ := zkServer.CPUTime()
				return d
			}
		case "consul":
			server = func() time.Duration {
				d, _ := consulAgent.CPUTime()
				return d
			}
		}
		for _, kind := range []string{"lock", "election"} {
			for _, n := range []int{10, 100, 300} {
				for _, lib := range []string{"vitess", "topokit"} {
					b.Run(fmt.Sprintf("%s/%s/n=%d/%s", s.name, kind, n, lib), func(b *testing.B) {
						vt, tk := s.open(b, 10)
						sides := tk
						if lib == "vitess" {
							sides = vt
						}
						contend(b, sides, kind, n, server)
					})
				}
			}
		}
	}
}

// contend runs BenchmarkContention's loop over sides; server returns the
// CPU time so far of the store's server when it runs in a process of its
// own (else 0), counted with this process's.
func contend(b *testing.B, sides []*side, kind string, n int, server func() time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A lock needs a file below its directory; Vitess's zk election
	// needs its root to exist (it creates two levels at most).
	must(b, sides[0].create(ctx, "d/f", []byte("x")))
	acquired := make(chan int)
	var wg sync.WaitGroup
	// A contender that fails while the benchmark runs ends it: the
	// others could never make up for its turns.
	var failed error
	var failOnce sync.Once
	fail := func(err error) {
		if ctx.Err() == nil {
			failOnce.Do(func() { failed = err })
			cancel()
		}
	}
	next := func() int {
		select {
		case i := <-acquired:
			return i
		case <-ctx.Done():
			wg.Wait()
			b.Fatalf("a contender failed: %v", failed)
			return 0
		}
	}
	defer wg.Wait()
	defer cancel()
	for i := range n {
		c := sides[i%len(sides)]
		id := fmt.Sprintf("c%d", i)
		wg.Go(func() {
			for ctx.Err() == nil {
				var release func()
				if kind == "lock" {
					unlock, err := c.lock(ctx, "d", id)
					if err != nil {
						fail(err)
						return
					}
					release = func() { _ = unlock(context.Background()) }
				} else {
					stop, err := c.lead(ctx, "e", id)
					if err != nil {
						fail(err)
						return
					}
					release = stop
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
		next()
	}
	seen := make([]bool, n)
	// last holds each contender's last turn (its acquisition's number,
	// from 1; 0: none yet), maxGap the most acquisitions between two
	// turns of one contender: n for a FIFO lock whose contenders queue
	// again at once, far more when some pass others (a count of
	// acquirers alone would not show that).
	last := make([]int, n)
	maxGap := 0
	acquirers, iters := 0, 0
	server0 := server()
	cpu0 := cpuTime() + server0
	t0 := time.Now()
	for b.Loop() {
		i := next()
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
	serverCPU := server() - server0
	elapsed, cpu := time.Since(t0), cpuTime()+server0+serverCPU-cpu0
	b.ReportMetric(float64(iters)/elapsed.Seconds(), "acq/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(iters), "cpu-ms/acq")
	b.ReportMetric(float64(serverCPU.Microseconds())/1000/float64(iters), "server-cpu-ms/acq")
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
