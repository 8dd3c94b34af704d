package etcd2topo

// Benchmarks of the backend beside the same operation done with the raw
// etcd client on the same server. Each benchmark interleaves the two
// (one raw operation, one topo operation, per iteration) so that load from
// other processes hits both alike, and reports each side's median latency
// (raw-p50-µs, topo-p50-µs) and their ratio (topo/raw), and each side's
// requests to etcd per iteration (rt/op for topokit, raw-rt/op for the raw
// client; see rtCounter). Handover and first-event benchmarks measure from
// the moment the triggering call (Unlock, Stop, Update) returns to the
// moment the other side sees it.
//
//	go test -run xxx -bench . -benchtime 300x ./topo/etcd2topo/

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/topokit/topokit/topo"
)

// latencies collects one side's samples.
type latencies []time.Duration

func (l latencies) p50() time.Duration { return l.quantile(0.5) }

func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}

func report(b *testing.B, raw, tp latencies) {
	b.Helper()
	r, p := raw.p50(), tp.p50()
	b.ReportMetric(float64(p.Nanoseconds())/1e3, "topo-p50-µs")
	b.ReportMetric(float64(tp.quantile(0.9).Nanoseconds())/1e3, "topo-p90-µs")
	if len(raw) > 0 {
		b.ReportMetric(float64(r.Nanoseconds())/1e3, "raw-p50-µs")
		if r > 0 {
			b.ReportMetric(float64(p)/float64(r), "topo/raw")
		}
	}
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// pair runs rawOp and topoOp once per iteration, alternating which goes
// first, and reports both sides' latencies and requests.
func pair(b *testing.B, e *benchEnv, rawOp, topoOp func() error) {
	b.Helper()
	var raw, tp latencies
	timed := func(op func() error, into *latencies) {
		t0 := time.Now()
		err := op()
		*into = append(*into, time.Since(t0))
		must(b, err)
	}
	i := 0
	m := e.mark()
	for b.Loop() {
		if i%2 == 0 {
			timed(rawOp, &raw)
			timed(topoOp, &tp)
		} else {
			timed(topoOp, &tp)
			timed(rawOp, &raw)
		}
		i++
	}
	e.reportRT(b, m, i)
	report(b, raw, tp)
}

func BenchmarkGet(b *testing.B) {
	e := newBenchEnv(b)
	c, cli, root := e.c, e.cli, e.root
	ctx := context.Background()
	_, err := c.Create(ctx, "f", []byte("some value"))
	must(b, err)
	_, err = cli.Put(ctx, root+"/raw", "some value")
	must(b, err)
	pair(b, e, func() error {
		_, err := cli.Get(ctx, root+"/raw")
		return err
	}, func() error {
		_, _, err := c.Get(ctx, "f")
		return err
	})
}

func BenchmarkUpdateCAS(b *testing.B) {
	e := newBenchEnv(b)
	c, cli, root := e.c, e.cli, e.root
	ctx := context.Background()
	v, err := c.Create(ctx, "f", []byte("x"))
	must(b, err)
	resp, err := cli.Put(ctx, root+"/raw", "x")
	must(b, err)
	rawRev := resp.Header.Revision
	pair(b, e, func() error {
		tr, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(root+"/raw"), "=", rawRev)).
			Then(clientv3.OpPut(root+"/raw", "y")).Commit()
		if err == nil && !tr.Succeeded {
			err = fmt.Errorf("raw CAS failed")
		}
		if err == nil {
			rawRev = tr.Header.Revision
		}
		return err
	}, func() error {
		var err error
		v, err = c.Update(ctx, "f", []byte("y"), v)
		return err
	})
}

func BenchmarkCreateDelete(b *testing.B) {
	e := newBenchEnv(b)
	c, cli, root := e.c, e.cli, e.root
	ctx := context.Background()
	pair(b, e, func() error {
		tr, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(root+"/raw"), "=", 0)).
			Then(clientv3.OpPut(root+"/raw", "x")).Commit()
		if err == nil && !tr.Succeeded {
			err = fmt.Errorf("raw create failed")
		}
		if err != nil {
			return err
		}
		_, err = cli.Delete(ctx, root+"/raw")
		return err
	}, func() error {
		if _, err := c.Create(ctx, "f", []byte("x")); err != nil {
			return err
		}
		return c.Delete(ctx, "f", nil)
	})
}

// BenchmarkLockUnlock: an uncontended Lock+Unlock, beside a
// concurrency.Mutex Lock+Unlock on a long-lived session.
func BenchmarkLockUnlock(b *testing.B) {
	e := newBenchEnv(b)
	c, cli, root := e.c, e.cli, e.root
	ctx := context.Background()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	must(b, err)
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
	must(b, err)
	defer sess.Close()
	m := concurrency.NewMutex(sess, root+"/rawlock/")
	// Warm up: the Conn grants its lease on first use.
	ld, err := c.Lock(ctx, "d", "x")
	must(b, err)
	must(b, ld.Unlock(ctx))
	pair(b, e, func() error {
		if err := m.Lock(ctx); err != nil {
			return err
		}
		return m.Unlock(ctx)
	}, func() error {
		ld, err := c.Lock(ctx, "d", "x")
		if err != nil {
			return err
		}
		return ld.Unlock(ctx)
	})
}

// waitDelays are how long the waiter waits before the holder releases,
// cycled through: etcd's unsynced watchers are caught up every 100 ms, so
// waits under 100 ms are where a watch opened at a past revision shows;
// the last delay is longer than that.
var waitDelays = []time.Duration{time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond, 60 * time.Millisecond, 150 * time.Millisecond}

// waitKeys polls until prefix holds n keys.
func waitKeys(b *testing.B, cli *clientv3.Client, prefix string, n int64) {
	b.Helper()
	for {
		resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		must(b, err)
		if resp.Count >= n {
			return
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// BenchmarkLockHandover: how long after the holder's Unlock returns the
// waiter's Lock returns, beside the same with two concurrency.Mutex on
// two sessions. Requests per op count both holders and waiters.
func BenchmarkLockHandover(b *testing.B) {
	e := newBenchEnv(b)
	holder, cli, root, obs := e.c, e.cli, e.root, e.obs
	waiter := countedConn(b, root, e.tc)
	ctx := context.Background()
	_, err := holder.Create(ctx, "d/f", []byte("x"))
	must(b, err)
	s1, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
	must(b, err)
	defer s1.Close()
	cli2 := countedClient(b, e.rc)
	s2, err := concurrency.NewSession(cli2, concurrency.WithTTL(30))
	must(b, err)
	defer s2.Close()
	m1, m2 := concurrency.NewMutex(s1, root+"/rawlock/"), concurrency.NewMutex(s2, root+"/rawlock/")

	var raw, tp latencies
	i := 0
	m := e.mark()
	for b.Loop() {
		delay := waitDelays[i%len(waitDelays)]
		i++

		must(b, m1.Lock(ctx))
		got := make(chan time.Time, 1)
		go func() {
			if err := m2.Lock(ctx); err != nil {
				panic(err)
			}
			got <- time.Now()
		}()
		waitKeys(b, obs, root+"/rawlock/", 2)
		time.Sleep(delay)
		must(b, m1.Unlock(ctx))
		t0 := time.Now()
		raw = append(raw, (<-got).Sub(t0))
		must(b, m2.Unlock(ctx))

		l1, err := holder.Lock(ctx, "d", "holder")
		must(b, err)
		gotLock := make(chan time.Time, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			l2, err := waiter.Lock(ctx, "d", "waiter")
			gotLock <- time.Now()
			if err != nil {
				panic(err)
			}
			if err := l2.Unlock(ctx); err != nil {
				panic(err)
			}
		}()
		waitKeys(b, obs, root+"/d/locks/", 2)
		time.Sleep(delay)
		must(b, l1.Unlock(ctx))
		t0 = time.Now()
		tp = append(tp, (<-gotLock).Sub(t0))
		<-done
	}
	e.reportRT(b, m, i)
	report(b, raw, tp)
}

// BenchmarkElectionHandover: how long after the leader's Stop returns
// the follower's WaitForLeadership returns, beside concurrency.Election
// Resign/Campaign on two sessions. Requests per op count both
// participants.
func BenchmarkElectionHandover(b *testing.B) {
	e := newBenchEnv(b)
	c1, cli, root, obs := e.c, e.cli, e.root, e.obs
	c2 := countedConn(b, root, e.tc)
	ctx := context.Background()
	s1, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
	must(b, err)
	defer s1.Close()
	cli2 := countedClient(b, e.rc)
	s2, err := concurrency.NewSession(cli2, concurrency.WithTTL(30))
	must(b, err)
	defer s2.Close()
	e1, e2 := concurrency.NewElection(s1, root+"/rawelection"), concurrency.NewElection(s2, root+"/rawelection")

	var raw, tp latencies
	i := 0
	m := e.mark()
	for b.Loop() {
		delay := waitDelays[i%len(waitDelays)]
		i++

		must(b, e1.Campaign(ctx, "one"))
		got := make(chan time.Time, 1)
		go func() {
			if err := e2.Campaign(ctx, "two"); err != nil {
				panic(err)
			}
			got <- time.Now()
		}()
		waitKeys(b, obs, root+"/rawelection/", 2)
		time.Sleep(delay)
		must(b, e1.Resign(ctx))
		t0 := time.Now()
		raw = append(raw, (<-got).Sub(t0))
		must(b, e2.Resign(ctx))

		p1, err := c1.NewLeaderParticipation("e", "one")
		must(b, err)
		p2, err := c2.NewLeaderParticipation("e", "two")
		must(b, err)
		_, err = p1.WaitForLeadership()
		must(b, err)
		gotLead := make(chan time.Time, 1)
		go func() {
			_, err := p2.WaitForLeadership()
			gotLead <- time.Now()
			if err != nil {
				panic(err)
			}
		}()
		waitKeys(b, obs, root+"/elections/e/", 2)
		time.Sleep(delay)
		p1.Stop()
		t0 = time.Now()
		tp = append(tp, (<-gotLead).Sub(t0))
		p2.Stop()
	}
	e.reportRT(b, m, i)
	report(b, raw, tp)
}

// BenchmarkWatchFirstEvent: a Watch is opened, then the file is updated
// by another client; measured from the Update's return to the event.
// Beside it, a raw watch opened the usual way: read the key, then watch
// from the next revision. Requests per op count the watching side (the
// writer is not counted).
func BenchmarkWatchFirstEvent(b *testing.B) {
	e := newBenchEnv(b)
	c, cli, root, writer := e.c, e.cli, e.root, e.obs
	ctx := context.Background()
	_, err := c.Create(ctx, "f", []byte("x"))
	must(b, err)
	_, err = cli.Put(ctx, root+"/raw", "x")
	must(b, err)
	var raw, tp latencies
	i := 0
	m := e.mark()
	for b.Loop() {
		i++
		val := fmt.Sprint(i)

		wctx, cancel := context.WithCancel(ctx)
		gr, err := cli.Get(wctx, root+"/raw")
		must(b, err)
		wch := cli.Watch(wctx, root+"/raw", clientv3.WithRev(gr.Header.Revision+1), clientv3.WithCreatedNotify())
		<-wch // created
		_, err = writer.Put(ctx, root+"/raw", val)
		must(b, err)
		t0 := time.Now()
		for wr := range wch {
			if len(wr.Events) > 0 {
				break
			}
		}
		raw = append(raw, time.Since(t0))
		cancel()
		for range wch {
		}

		wctx, cancel = context.WithCancel(ctx)
		_, changes, err := c.Watch(wctx, "f")
		must(b, err)
		_, err = writer.Put(ctx, root+"/f", val)
		must(b, err)
		t0 = time.Now()
		wd := <-changes
		tp = append(tp, time.Since(t0))
		if wd.Err != nil || string(wd.Contents) != val {
			b.Fatalf("unexpected first event %+v", wd)
		}
		cancel()
		for range changes {
		}
	}
	e.reportRT(b, m, i)
	report(b, raw, tp)
}

// BenchmarkWatchRecursiveFirstEvent is BenchmarkWatchFirstEvent for a
// WatchRecursive on a directory of 10 files, beside a raw prefix read and
// a prefix watch from the next revision.
func BenchmarkWatchRecursiveFirstEvent(b *testing.B) {
	e := newBenchEnv(b)
	c, cli, root, writer := e.c, e.cli, e.root, e.obs
	ctx := context.Background()
	for j := range 10 {
		_, err := c.Create(ctx, fmt.Sprintf("d/f%d", j), []byte("x"))
		must(b, err)
		_, err = cli.Put(ctx, fmt.Sprintf("%s/raw/f%d", root, j), "x")
		must(b, err)
	}
	var raw, tp latencies
	i := 0
	m := e.mark()
	for b.Loop() {
		i++
		val := fmt.Sprint(i)

		wctx, cancel := context.WithCancel(ctx)
		gr, err := cli.Get(wctx, root+"/raw/", clientv3.WithPrefix())
		must(b, err)
		wch := cli.Watch(wctx, root+"/raw/", clientv3.WithPrefix(), clientv3.WithRev(gr.Header.Revision+1), clientv3.WithCreatedNotify())
		<-wch // created
		_, err = writer.Put(ctx, root+"/raw/f3", val)
		must(b, err)
		t0 := time.Now()
		for wr := range wch {
			if len(wr.Events) > 0 {
				break
			}
		}
		raw = append(raw, time.Since(t0))
		cancel()
		for range wch {
		}

		wctx, cancel = context.WithCancel(ctx)
		initial, changes, err := c.WatchRecursive(wctx, "d")
		must(b, err)
		if len(initial) != 10 {
			b.Fatalf("WatchRecursive: %d initial values", len(initial))
		}
		_, err = writer.Put(ctx, root+"/d/f3", val)
		must(b, err)
		t0 = time.Now()
		wd := <-changes
		tp = append(tp, time.Since(t0))
		if wd.Err != nil || string(wd.Contents) != val {
			b.Fatalf("unexpected first event %+v", wd)
		}
		cancel()
		for range changes {
		}
	}
	e.reportRT(b, m, i)
	report(b, raw, tp)
}

var _ topo.Conn = (*Conn)(nil)
