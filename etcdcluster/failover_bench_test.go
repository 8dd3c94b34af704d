package etcdcluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/etcd2topo"
)

// writeGaps runs a writer through the Conn open returns for the client
// URLs of names (one unconditional Update at a time, each with a 5 s
// deadline) until stop is closed, and returns the longest time between two
// acknowledged writes that spans the moment fault is called (fault runs
// once the writer has been acknowledged 20 times).
func writeGaps(b *testing.B, h *harness, names []string, open func([]string) (*etcd2topo.Conn, error), fault func()) time.Duration {
	b.Helper()
	conn, err := open(h.clientURLs(names...))
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

// raftTiming is a heartbeat interval and election timeout (ms) of the
// failover benchmarks' members.
type raftTiming struct {
	name           string
	tick, election uint
}

// raftTimings are the timings the failover benchmarks compare: topoctl
// serve's default (LANTickMs, LANElectionMs) and etcd's own.
func raftTimings() []raftTiming {
	return []raftTiming{{"election=500ms", LANTickMs, LANElectionMs}, {"election=1000ms", 100, 1000}}
}

// failoverCluster starts a 3-member cluster with raft timing rt and the
// default timing of Config (1 s checks, 10 s volunteer and decider
// TTLs), as "topoctl serve" runs it, and returns it with its member
// names.
func failoverCluster(b *testing.B, rt raftTiming) (*harness, []string) {
	h := newHarness(b)
	h.base.TickMs, h.base.ElectionMs = rt.tick, rt.election
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

// BenchmarkClientFailover measures, for a writer with a 5 s deadline per
// write, the longest time without an acknowledged write when the raft
// leader of a 3-member cluster is killed (kill-leader: SIGKILL) or
// stopped (stop-leader: SIGSTOP, SIGCONT once writes resumed), with each
// raft timing of raftTimings: s/max-gap is its mean over the runs,
// s/worst-gap the longest. The writer goes through OpenConn, or, in the
// *-etcd2topo cases, through a plain etcd2topo Conn given the same
// endpoints (no failover interceptor). Run with: make bench-cluster.
func BenchmarkClientFailover(b *testing.B) {
	openConn := func(eps []string) (*etcd2topo.Conn, error) {
		return OpenConn(etcd2topo.Options{Endpoints: eps}, "/bench-failover", 200*time.Millisecond)
	}
	plainConn := func(eps []string) (*etcd2topo.Conn, error) {
		return etcd2topo.NewConn(etcd2topo.Options{Endpoints: eps}, "/bench-failover")
	}
	for _, c := range []struct {
		fault string
		open  func([]string) (*etcd2topo.Conn, error)
	}{
		{"kill-leader", openConn}, {"stop-leader", openConn},
		{"kill-leader-etcd2topo", plainConn}, {"stop-leader-etcd2topo", plainConn},
	} {
		for _, rt := range raftTimings() {
			b.Run(c.fault+"/"+rt.name, func(b *testing.B) {
				var total, worst time.Duration
				for range b.N {
					b.StopTimer()
					h, names := failoverCluster(b, rt)
					cli := h.client(names...)
					st, desc := statusOf(cli)
					require.NotNil(b, st, desc)
					leader := h.procs[st.Leader]
					require.NotNil(b, leader, "leader %q", st.Leader)
					stop := strings.HasPrefix(c.fault, "stop")
					gap := writeGaps(b, h, names, c.open, func() {
						if stop {
							require.NoError(b, leader.cmd.Process.Signal(syscall.SIGSTOP))
						} else {
							leader.kill()
						}
					})
					if stop {
						_ = leader.cmd.Process.Signal(syscall.SIGCONT)
					}
					b.Logf("%s %s %s: longest time without an acknowledged write %v", c.fault, rt.name, st.Leader, gap)
					total += gap
					worst = max(worst, gap)
					h.stopAll()
				}
				b.ReportMetric(total.Seconds()/float64(b.N), "s/max-gap")
				b.ReportMetric(worst.Seconds(), "s/worst-gap")
			})
		}
	}
}

// BenchmarkGracefulLeave measures the time from SIGTERM of a voter of a
// 3-member cluster (topoctl serve's raft timing) with a spare volunteer
// to the process's exit, its removal done: s/leave is the mean over the
// runs, s/worst-leave the longest.
func BenchmarkGracefulLeave(b *testing.B) {
	var total, worst time.Duration
	for range b.N {
		b.StopTimer()
		h, names := failoverCluster(b, raftTimings()[0])
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
		worst = max(worst, time.Since(start))
		b.Logf("%s left in %v (SIGTERM at %s)", who, time.Since(start), start.UTC().Format("15:04:05.000"))
		for _, l := range h.procs[who].logLines("level=INFO") {
			b.Log(l)
		}
		h.stopAll()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/leave")
	b.ReportMetric(worst.Seconds(), "s/worst-leave")
}
