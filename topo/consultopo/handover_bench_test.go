package consultopo

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"
)

// Handover benchmarks measure from the moment the holder's Unlock (or the
// leader's Stop) returns to the moment the waiter's Lock (or
// WaitForLeadership) returns, beside the same with two api.Lock on two
// clients with a long-lived session each. They report the p50 of each side
// (raw-p50-ns, topokit-p50-ns), the ratio, and each side's requests per
// iteration (both holders' and waiters'; see rtCounter).
//
//	go test -run '^$' -bench Handover -benchtime 100x ./topo/consultopo/

// handoverDelays are how long the waiter waits before the holder releases,
// cycled through, so that the waiter is (most likely) parked in its
// blocking query when the release happens.
var handoverDelays = []time.Duration{5 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond}

// rawLockPair returns two api.Lock on key, each through a client and a
// long-lived session of its own.
func rawLockPair(b *testing.B, rt *rtSides, key string) (*api.Lock, *api.Lock) {
	b.Helper()
	mk := func(value string) *api.Lock {
		cl := rt.client(b)
		sess, _, err := cl.Session().Create(&api.SessionEntry{TTL: "30s", Behavior: api.SessionBehaviorDelete}, nil)
		require.NoError(b, err)
		stop := make(chan struct{})
		go func() { _ = cl.Session().RenewPeriodic("30s", sess, nil, stop) }()
		b.Cleanup(func() {
			close(stop)
			_, _ = cl.Session().Destroy(sess, nil)
		})
		l, err := cl.LockOpts(&api.LockOptions{Key: key, Value: []byte(value), Session: sess})
		require.NoError(b, err)
		return l
	}
	return mk("one"), mk("two")
}

// rawHandover runs one raw handover between l1 and l2 and returns its
// latency.
func rawHandover(b *testing.B, l1, l2 *api.Lock, delay time.Duration) time.Duration {
	b.Helper()
	if _, err := l1.Lock(nil); err != nil {
		b.Fatal(err)
	}
	got := make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		_, err := l2.Lock(nil)
		got <- time.Now()
		errc <- err
	}()
	time.Sleep(delay)
	if err := l1.Unlock(); err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	d := (<-got).Sub(t0)
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	if err := l2.Unlock(); err != nil {
		b.Fatal(err)
	}
	return d
}

// reportHandover reports the p50s and their ratio.
func reportHandover(b *testing.B, raw, tk []time.Duration) {
	b.Helper()
	rp, tp := p50(raw), p50(tk)
	b.ReportMetric(float64(rp.Nanoseconds()), "raw-p50-ns")
	b.ReportMetric(float64(tp.Nanoseconds()), "topokit-p50-ns")
	b.ReportMetric(float64(tp)/float64(rp), "ratio")
}

// BenchmarkLockHandover: how long after the holder's Unlock returns the
// waiter's Lock (on another Conn) returns.
func BenchmarkLockHandover(b *testing.B) {
	holder, _, root, rt := benchSetup(b)
	waiter := rt.conn(b, root)
	ctx := context.Background()
	mustWrite(b, holder, "d/f", "x")
	l1, l2 := rawLockPair(b, rt, root+"/rawlock/Lock")
	var raw, tk []time.Duration
	i := 0
	m := rt.mark()
	for b.Loop() {
		delay := handoverDelays[i%len(handoverDelays)]
		i++
		raw = append(raw, rawHandover(b, l1, l2, delay))

		ld, err := holder.Lock(ctx, "d", "holder")
		if err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		errc := make(chan error, 1)
		go func() {
			l, err := waiter.Lock(ctx, "d", "waiter")
			got <- time.Now()
			if err == nil {
				err = l.Unlock(ctx)
			}
			errc <- err
		}()
		time.Sleep(delay)
		if err := ld.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		tk = append(tk, (<-got).Sub(t0))
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	rt.report(b, m, i)
	reportHandover(b, raw, tk)
}

// BenchmarkElectionHandover: how long after the leader's Stop returns the
// other participant's (on another Conn) WaitForLeadership returns.
func BenchmarkElectionHandover(b *testing.B) {
	c1, _, root, rt := benchSetup(b)
	c2 := rt.conn(b, root)
	l1, l2 := rawLockPair(b, rt, root+"/rawelection")
	var raw, tk []time.Duration
	i := 0
	m := rt.mark()
	for b.Loop() {
		delay := handoverDelays[i%len(handoverDelays)]
		i++
		raw = append(raw, rawHandover(b, l1, l2, delay))

		p1, err := c1.NewLeaderParticipation("e", "one")
		if err != nil {
			b.Fatal(err)
		}
		p2, err := c2.NewLeaderParticipation("e", "two")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p1.WaitForLeadership(); err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		errc := make(chan error, 1)
		go func() {
			_, err := p2.WaitForLeadership()
			got <- time.Now()
			errc <- err
		}()
		time.Sleep(delay)
		p1.Stop()
		t0 := time.Now()
		tk = append(tk, (<-got).Sub(t0))
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
		p2.Stop()
	}
	rt.report(b, m, i)
	reportHandover(b, raw, tk)
}
