package etcdcluster

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/etcd2topo"
)

// writeGaps runs a writer through OpenConn on every member's client URL
// (one unconditional Update at a time, each with a 5 s deadline) until
// stop is closed, and returns the longest time between two acknowledged
// writes that spans the moment fault is called (fault runs once the
// writer has been acknowledged 20 times).
func writeGaps(b *testing.B, h *harness, names []string, fault func()) time.Duration {
	b.Helper()
	conn, err := OpenConn(etcd2topo.Options{Endpoints: h.clientURLs(names...)}, "/bench-failover", 200*time.Millisecond)
	require.NoError(b, err)
	defer conn.Close()
	var (
		mu      sync.Mutex
		acks    []time.Time
		faultAt time.Time
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := conn.Update(ctx, "k", fmt.Appendf(nil, "%d", i), nil)
			cancel()
			if err == nil {
				mu.Lock()
				acks = append(acks, time.Now())
				mu.Unlock()
			}
		}
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acks)
	}
	eventually(b, bound, "20 writes acknowledged", func() (bool, string) { return count() >= 20, "" })
	mu.Lock()
	faultAt = time.Now()
	mu.Unlock()
	fault()
	// Acknowledged writes resumed for 3 s after the fault.
	eventually(b, bound, "writes resumed", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(acks) > 0 && acks[len(acks)-1].Sub(faultAt) > 3*time.Second, ""
	})
	close(stop)
	<-done
	var longest time.Duration
	prev := time.Time{}
	for _, a := range acks {
		if !prev.IsZero() && !a.Before(faultAt) && a.Sub(prev) > longest {
			longest = a.Sub(prev)
		}
		prev = a
	}
	return longest
}

// failoverCluster starts a 3-member cluster with the default timing of
// etcd (100 ms heartbeat, 1 s election timeout) and of Config (1 s
// checks, 10 s volunteer and decider TTLs), as "topoctl serve" runs it,
// and returns it with its member names.
func failoverCluster(b *testing.B) (*harness, []string) {
	h := newHarness(b)
	h.base.TickMs, h.base.ElectionMs = 100, 1000
	h.base.CheckInterval, h.base.VolunteerTTL, h.base.DeciderTTL = DefaultCheckInterval, DefaultVolunteerTTL, DefaultDeciderTTL
	h.start("a")
	h.start("b", "a")
	h.start("c", "a")
	names := []string{"a", "b", "c"}
	waitVoters(b, h.client(names...), bound, names...)
	// etcd refuses to remove a member until the leader has been connected
	// to it for 5 s (the last one just joined): measure a settled
	// cluster, not that wait.
	<-time.After(5 * time.Second)
	return h, names
}

// BenchmarkClientFailover measures, for a writer going through OpenConn
// with a 5 s deadline per write, the longest time without an
// acknowledged write (s/max-gap) when the raft leader of a 3-member
// cluster with etcd's default raft timing is killed (kill-leader:
// SIGKILL) or stopped (stop-leader: SIGSTOP, SIGCONT once writes
// resumed). Run with: go test -run '^$' -bench ClientFailover
// -benchtime 1x ./etcdcluster/
func BenchmarkClientFailover(b *testing.B) {
	for _, fault := range []string{"kill-leader", "stop-leader"} {
		b.Run(fault, func(b *testing.B) {
			var total time.Duration
			for range b.N {
				b.StopTimer()
				h, names := failoverCluster(b)
				cli := h.client(names...)
				st, desc := statusOf(cli)
				require.NotNil(b, st, desc)
				leader := h.procs[st.Leader]
				require.NotNil(b, leader, "leader %q", st.Leader)
				gap := writeGaps(b, h, names, func() {
					if fault == "kill-leader" {
						leader.kill()
					} else {
						require.NoError(b, leader.cmd.Process.Signal(syscall.SIGSTOP))
					}
				})
				if fault == "stop-leader" {
					_ = leader.cmd.Process.Signal(syscall.SIGCONT)
				}
				b.Logf("%s %s: longest time without an acknowledged write %v", fault, st.Leader, gap)
				total += gap
				h.stopAll()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/max-gap")
		})
	}
}

// BenchmarkGracefulLeave measures the time from SIGTERM of a voter of a
// 3-member cluster (etcd's default raft timing) with a spare volunteer to
// the process's exit, its removal done (s/leave).
func BenchmarkGracefulLeave(b *testing.B) {
	var total time.Duration
	for range b.N {
		b.StopTimer()
		h, names := failoverCluster(b)
		cli := h.client(names...)
		st, desc := statusOf(cli)
		require.NotNil(b, st, desc)
		// Leave with a member that is neither the decider nor the leader:
		// the common case of a rolling restart.
		dec := deciderName(b, cli)
		var who string
		for _, n := range names {
			if n != dec && n != st.Leader {
				who = n
			}
		}
		if who == "" {
			who = names[2]
		}
		start := time.Now()
		require.NoError(b, h.procs[who].term(bound))
		total += time.Since(start)
		b.Logf("%s left in %v (SIGTERM at %s)", who, time.Since(start), start.UTC().Format("15:04:05.000"))
		for _, l := range h.procs[who].logLines("level=INFO") {
			b.Log(l)
		}
		h.stopAll()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/leave")
}
