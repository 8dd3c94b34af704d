package etcdcluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// waitStartedVoters waits until the member list is exactly the named
// started voters.
func waitStartedVoters(b *testing.B, cli *clientv3.Client, names ...string) {
	eventually(b, bound, fmt.Sprintf("voters %v", names), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		ml, err := cli.MemberList(ctx)
		if err != nil {
			return false, err.Error()
		}
		var got []string
		for _, m := range ml.Members {
			if m.IsLearner || m.Name == "" {
				return false, fmt.Sprint(ml.Members)
			}
			got = append(got, m.Name)
		}
		slices.Sort(got)
		return slices.Equal(got, names), fmt.Sprint(got)
	})
}

// BenchmarkVolunteerToVoter measures the time from starting a volunteer
// process next to a one-member cluster to its being a voting member
// (s/join; s/join-serving until it also answers clients, which etcd
// starts only once the new member published itself). It is governed by
// CheckInterval (200 ms here: the nominee's and the decider's polling),
// the embedded server's start and the learner's catch-up.
func BenchmarkVolunteerToVoter(b *testing.B) {
	var total, serving time.Duration
	for range b.N {
		b.StopTimer()
		h := newHarness(b)
		h.start("a")
		cli := h.client("a")
		waitVoters(b, cli, bound, "a")
		b.StartTimer()
		start := time.Now()
		h.start("b", "a")
		waitStartedVoters(b, cli, "a", "b")
		total += time.Since(start)
		waitVoters(b, cli, bound, "a", "b")
		serving += time.Since(start)
		b.StopTimer()
		h.stopAll()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/join")
	b.ReportMetric(serving.Seconds()/float64(b.N), "s/join-serving")
}

// BenchmarkReplacement measures the time from a kill -9 of a voter of a
// 3-member cluster with a spare volunteer running to the spare being a
// voter (s/replace; s/replace-serving until it also answers clients). It is governed by VolunteerTTL (2 s here: the dead
// member's volunteer key must expire), CheckInterval, the spare's start
// and its catch-up; the goal is below 2 x VolunteerTTL plus the catch-up.
func BenchmarkReplacement(b *testing.B) {
	var total, serving time.Duration
	for range b.N {
		b.StopTimer()
		h := newHarness(b)
		h.start("a")
		h.start("b", "a")
		h.start("c", "a")
		cli := h.client("a", "b")
		waitVoters(b, cli, bound, "a", "b", "c")
		h.start("d", "a")
		eventually(b, bound, "d volunteers", func() (bool, string) {
			st, desc := statusOf(cli)
			return st != nil && len(st.Volunteers) == 4, desc
		})
		b.StartTimer()
		start := time.Now()
		h.procs["c"].kill()
		waitStartedVoters(b, cli, "a", "b", "d")
		total += time.Since(start)
		waitVoters(b, cli, bound, "a", "b", "d")
		serving += time.Since(start)
		b.StopTimer()
		b.Logf("killed c at %s", start.UTC().Format("15:04:05.000"))
		for _, n := range []string{"a", "b", "d"} {
			for _, l := range h.procs[n].logLines("decision:") {
				b.Log(n, l)
			}
		}
		h.stopAll()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "s/replace")
	b.ReportMetric(serving.Seconds()/float64(b.N), "s/replace-serving")
}
