package cache_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// linKeys are the files of requireConsistentLinearizable's history; the
// model checks each on its own.
var linKeys = []string{"lin/a", "lin/b"}

// register is the porcupine model of files written with unique values and
// read: a read of a file returns the last value written to it. It is
// partitioned by file, so that porcupine checks each file's history on
// its own (a history is linearizable if and only if each file's is).
var register = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(regOp).key
			byKey[k] = append(byKey[k], op)
		}
		var parts [][]porcupine.Operation
		for _, k := range linKeys {
			if ops := byKey[k]; len(ops) > 0 {
				parts = append(parts, ops)
			}
		}
		return parts
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regOp)
		if in.write {
			return true, in.value
		}
		return output.(string) == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regOp)
		if in.write {
			return fmt.Sprintf("put(%s, %q)", in.key, in.value)
		}
		return fmt.Sprintf("get(%s) -> %q", in.key, output.(string))
	},
}

type regOp struct {
	key   string
	write bool
	value string
}

// linCheckBound bounds porcupine's check of one history. The histories
// below check in milliseconds; a check that has not decided within the
// bound fails the test (porcupine's Unknown is no verdict).
const linCheckBound = time.Minute

// requireLinearizable checks history with porcupine within linCheckBound
// and logs its size and the time the check took. An Illegal history
// fails the test and leaves porcupine's visualization in the test's
// artifact directory (kept with go test -artifacts); an Unknown result
// (the bound passed) fails it too.
func requireLinearizable(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(register, history, linCheckBound)
	took := time.Since(start)
	t.Logf("porcupine: %d operations checked in %v: %v", len(history), took, res)
	switch res {
	case porcupine.Ok:
	case porcupine.Unknown:
		t.Fatalf("porcupine could not decide within %v on a history of %d operations: no verdict (the history is too large or too concurrent to check), not a pass", linCheckBound, len(history))
	default:
		path := filepath.Join(t.ArtifactDir(), "porcupine.html")
		if err := porcupine.VisualizePath(register, info, path); err != nil {
			t.Logf("porcupine visualization: %v", err)
		}
		t.Fatalf("Consistent reads are not linearizable (%d operations; porcupine's visualization: %s)", len(history), path)
	}
}

// settleFailedWrites adds the writes that failed (each may or may not
// have taken effect) to history, the successful operations, in a form
// porcupine checks fast and that is linearizable exactly when the history
// with each failed write left open (returning never) is:
//   - a failed write whose value no read returned is left out: were it
//     applied, no read fell between it and the next write of its file,
//     so the history without it linearizes the same way;
//   - a failed write whose value a read returned must precede that read,
//     so its return is set to the earliest return of those reads (or its
//     call, if that is later: such a read came before the write began, and
//     the check fails as it should).
//
// Values are unique per write. Open writes (returning never) each stay
// concurrent with everything after them, which makes porcupine's search
// grow exponentially with their number.
func settleFailedWrites(history, failed []porcupine.Operation) []porcupine.Operation {
	firstRead := map[string]int64{} // value -> earliest return of a read of it
	for _, op := range history {
		in := op.Input.(regOp)
		if in.write {
			continue
		}
		v := in.key + "\x00" + op.Output.(string)
		if r, ok := firstRead[v]; !ok || op.Return < r {
			firstRead[v] = op.Return
		}
	}
	for _, op := range failed {
		in := op.Input.(regOp)
		r, ok := firstRead[in.key+"\x00"+in.value]
		if !ok {
			continue
		}
		op.Return = max(r, op.Call)
		history = append(history, op)
	}
	return history
}

// linReads is how the readers' Caches of requireConsistentLinearizable
// get their store watch's events.
type linReads int

const (
	// heldWatch: the watch delivers nothing (gatedConn held), so that
	// every Consistent read must go to the store; one answered from memory
	// is a violation.
	heldWatch linReads = iota
	// lazyWatch: the watch delivers only as far as a barrier asked for
	// (lazyConn), so that Consistent reads are answered from memory after
	// the barrier; one that skips or cuts short its wait is a violation.
	lazyWatch
)

// linRun is one run of requireConsistentLinearizable: the readers'
// gated Conns (heldWatch) and Caches, and how many times the Caches
// listed again.
type linRun struct {
	gated   []*gatedConn
	caches  []*cache.Cache
	resyncs atomic.Int64
}

// requireConsistentLinearizable records concurrent unconditional writes
// (through plain Conns) and Consistent reads through Caches of two files,
// and checks the history with porcupine (requireLinearizable). reads says
// what the Caches' watches deliver: with heldWatch no read may come from
// memory, with lazyWatch some must.
//
// fault, if not nil, runs once every worker has made a few operations;
// each worker makes at most linFaultOps operations while it runs, waits
// for it to return and then completes linOps more. A read that fails is
// left out of the history (it observed nothing) and a write that fails
// may or may not have taken effect (settleFailedWrites). Operations may
// fail until the fault has ended and the worker's Conns have answered
// once more (a restarted store's clients reconnect on their own time);
// from then on, and without a fault, every operation must succeed.
func requireConsistentLinearizable(t *testing.T, open func() topo.Conn, reads linReads, fault func(ctx context.Context, run *linRun)) {
	const workers, linOps, linFaultOps = 4, 30, 8
	ctx := testCtx(t)
	setup := open()
	defer setup.Close()
	for _, k := range linKeys {
		_, err := setup.Create(ctx, k, []byte(""))
		require.NoError(t, err)
	}
	var mu sync.Mutex
	var history, failed []porcupine.Operation
	var fromMemory atomic.Int64 // reads answered from memory
	var wg sync.WaitGroup
	run := &linRun{}
	started := make(chan struct{}, workers) // one per worker past its first ops
	faultStarted, faultDone := make(chan struct{}), make(chan struct{})
	if fault == nil {
		close(faultDone)
	}
	for w := range workers {
		raw := open()
		opts := cache.Options{Mode: cache.Consistent, ProbeInterval: 50 * time.Millisecond,
			Hooks: cache.Hooks{OnResync: func(error) { run.resyncs.Add(1) }}}
		var c *cache.Cache
		if reads == lazyWatch {
			c = wrap(t, newLazy(t, open()), opts)
		} else {
			// The Cache's watch is held back for good: a read answered
			// from memory would show the first value only (or, after a
			// relist, the value the relist saw).
			g := newGated(open())
			c = wrap(t, g, opts)
			g.hold()
			run.gated = append(run.gated, g)
		}
		run.caches = append(run.caches, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer raw.Close()
			defer c.Close()
			after := -1               // successful operations since the fault ended
			during := 0               // operations while the fault ran
			recovered := fault == nil // from here on every operation must succeed
			for i := 0; after < linOps; i++ {
				if i == linOps/4 {
					started <- struct{}{}
				}
				ended := isClosed(faultDone)
				if ended && after < 0 {
					after = 0
				}
				if !ended && isClosed(faultStarted) {
					if during == linFaultOps {
						select {
						case <-faultDone:
						case <-ctx.Done():
							return
						}
						continue
					}
					during++
				}
				// (No write goes through the Caches: a path written
				// through a Cache is read from the store until its watch
				// delivers the write, which would hide a Cached read.)
				op, err := linOp(ctx, w, i, raw, c, &fromMemory)
				switch {
				case err == nil:
					if after >= 0 {
						after++
						recovered = true
					}
				case recovered:
					t.Error(err)
					return
				case op.Input.(regOp).write:
					mu.Lock()
					failed = append(failed, op)
					mu.Unlock()
					continue
				default:
					continue // a failed read observed nothing
				}
				mu.Lock()
				history = append(history, op)
				mu.Unlock()
			}
		}()
	}
	if fault != nil {
		for range workers {
			select {
			case <-started:
			case <-ctx.Done():
				t.Fatal("the workers never got going")
			}
		}
		close(faultStarted)
		fault(ctx, run)
		close(faultDone)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d failed writes, %d reads from memory", len(failed), fromMemory.Load())
	requireLinearizable(t, settleFailedWrites(history, failed))
	if reads == lazyWatch {
		require.Positive(t, fromMemory.Load(), "no Consistent read was answered after a barrier")
	} else {
		require.Zero(t, fromMemory.Load(), "Consistent reads answered from memory with the watch held back")
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// linOp is worker w's operation i: a write of a unique value through the
// plain Conn raw, or a read through the Cache c, of one of linKeys. It
// counts the reads answered from memory in fromMemory.
func linOp(ctx context.Context, w, i int, raw topo.Conn, c *cache.Cache, fromMemory *atomic.Int64) (porcupine.Operation, error) {
	k := linKeys[(w+i/2)%len(linKeys)]
	op := porcupine.Operation{ClientId: w}
	opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	var err error
	if i%2 == 0 {
		v := fmt.Sprintf("r%d-%d", w, i)
		_, err = raw.Update(opCtx, k, []byte(v), nil)
		op.Input, op.Output = regOp{key: k, write: true, value: v}, ""
	} else {
		var b []byte
		var info cache.Info
		b, _, info, err = c.GetWithInfo(opCtx, k)
		op.Input, op.Output = regOp{key: k}, string(b)
		if err == nil && info.FromMemory {
			fromMemory.Add(1)
		}
	}
	op.Call, op.Return = start.UnixNano(), time.Now().UnixNano()
	return op, err
}

// TestConsistentLinearizableMemory: Consistent reads through Caches on
// memorytopo are linearizable with concurrent writers.
func TestConsistentLinearizableMemory(t *testing.T) {
	_, open := memoryStore(t)
	requireConsistentLinearizable(t, open, heldWatch, nil)
}

// TestConsistentLinearizableEtcd: the same on a real etcd.
func TestConsistentLinearizableEtcd(t *testing.T) {
	requireConsistentLinearizable(t, etcdOpen(t, etcdtest.Start(t), newRoot()), heldWatch, nil)
}

// TestConsistentLinearizableZooKeeper: the same on a real ZooKeeper, whose
// Conns read linearizably with zk2topo.Options.LinearizableReads (without
// it ZooKeeper reads are sequentially consistent per session only).
func TestConsistentLinearizableZooKeeper(t *testing.T) {
	requireConsistentLinearizable(t, zkOpen(t, zktest.Start(t), newRoot(), true), heldWatch, nil)
}

// TestConsistentLinearizableConsul: the same on a real Consul agent
// (consistent reads are consultopo's default).
func TestConsistentLinearizableConsul(t *testing.T) {
	requireConsistentLinearizable(t, consulOpen(t, consultest.Start(t), newRoot()), heldWatch, nil)
}

// TestConsistentLinearizableAcrossRestart: the store (one etcd member,
// one ZooKeeper server, one Consul server, each keeping its data) stops
// while writers write and Caches read in Consistent mode (their watches
// held back), the Caches turn Stale, and the store starts again; the
// history, before, during and after, is linearizable: no Consistent read
// is answered from what memory held when the store went away.
func TestConsistentLinearizableAcrossRestart(t *testing.T) {
	restartables(t, func(t *testing.T, s restartable) {
		requireConsistentLinearizable(t, s.open, heldWatch, restartFault(t, s))
	})
}

// restartFault is the fault of requireConsistentLinearizable that stops
// the store, waits for the Caches to turn Stale and starts it again.
func restartFault(t *testing.T, s restartable) func(ctx context.Context, run *linRun) {
	return func(ctx context.Context, run *linRun) {
		s.stop()
		for _, c := range run.caches {
			require.Eventually(t, func() bool { return c.State().Health == cache.Stale }, 30*time.Second, time.Millisecond)
		}
		s.restart()
	}
}

// TestConsistentLinearizableAcrossCompactionEtcd: while writers write and
// Caches read in Consistent mode, the Caches' watches are cut (each Cache
// lists again) and etcd is compacted to its current revision just before
// every new WatchRecursive and continuously while the Caches relist; the
// history is linearizable.
func TestConsistentLinearizableAcrossCompactionEtcd(t *testing.T) {
	addr := etcdtest.Start(t)
	comp := newCompactor(t, addr)
	requireConsistentLinearizable(t, etcdOpen(t, addr, newRoot()), heldWatch, func(ctx context.Context, run *linRun) {
		for _, g := range run.gated {
			g.setBeforeWatch(func() { comp.compact(ctx) })
		}
		stop := comp.run(ctx)
		defer stop()
		requireWatching := func() {
			for _, g := range run.gated {
				require.Eventually(t, g.watching, 30*time.Second, time.Millisecond, "a Cache never watched again")
			}
		}
		for range 3 {
			requireWatching()
			before := run.resyncs.Load()
			for _, g := range run.gated {
				g.breakWatches()
			}
			require.Eventually(t, func() bool { return run.resyncs.Load() >= before+int64(len(run.caches)) }, 30*time.Second, time.Millisecond, "the Caches never listed again")
		}
		requireWatching()
		require.Positive(t, comp.count())
	})
}

// TestCachedModeReadsOwnWritesInOrder: in Cached mode a writer that reads
// after each of its writes never reads an older value, while another
// writer writes the same file, on memorytopo and a real etcd, ZooKeeper
// and Consul.
func TestCachedModeReadsOwnWritesInOrder(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		_, open := memoryStore(t)
		requireReadsOwnWrites(t, open, 500)
	})
	t.Run("etcd", func(t *testing.T) { requireReadsOwnWrites(t, etcdOpen(t, etcdtest.Start(t), newRoot()), 100) })
	t.Run("zk", func(t *testing.T) { requireReadsOwnWrites(t, zkOpen(t, zktest.Start(t), newRoot(), false), 100) })
	t.Run("consul", func(t *testing.T) { requireReadsOwnWrites(t, consulOpen(t, consultest.Start(t), newRoot()), 100) })
}

// requireReadsOwnWrites makes n writes through a Cache, each read back at
// once, while a plain Conn writes the same file.
func requireReadsOwnWrites(t *testing.T, open func() topo.Conn, n int) {
	ctx := testCtx(t)
	c := wrap(t, open(), cache.Options{})
	defer c.Close()
	other := open()
	defer other.Close()
	_, err := c.Create(ctx, "f", []byte("x"))
	require.NoError(t, err)
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
			_, _ = other.Update(context.Background(), "f", fmt.Appendf(nil, "o%d", i), nil)
		}
	}()
	for i := range n {
		v, err := c.Update(ctx, "f", fmt.Appendf(nil, "c%d", i), nil)
		require.NoError(t, err)
		b, got, err := c.Get(ctx, "f")
		require.NoError(t, err)
		// The value read is this write or a later one by the other writer.
		if string(b) != fmt.Sprint("c", i) {
			require.Equal(t, byte('o'), b[0], "read %q after writing c%d", b, i)
			require.Greater(t, int64(got.(topo.NumericVersion)), int64(v.(topo.NumericVersion)))
		}
	}
	close(stop)
	<-done
}

// TestSettleFailedWrites: a failed write no read returned is left out; one
// a read returned ends at the first such read's return (or at its own
// call, when a read returned its value before it began, which porcupine
// then rejects).
func TestSettleFailedWrites(t *testing.T) {
	op := func(call, ret int64, in regOp, out string) porcupine.Operation {
		return porcupine.Operation{Input: in, Call: call, Return: ret, Output: out}
	}
	a := linKeys[0]
	history := []porcupine.Operation{
		op(10, 20, regOp{key: a}, "w2"),
		op(30, 40, regOp{key: a}, "w2"),
	}
	failed := []porcupine.Operation{
		op(1, math.MaxInt64, regOp{key: a, write: true, value: "w1"}, ""),
		op(5, math.MaxInt64, regOp{key: a, write: true, value: "w2"}, ""),
	}
	got := settleFailedWrites(history, failed)
	require.Len(t, got, 3)
	require.Equal(t, "w2", got[2].Input.(regOp).value)
	require.Equal(t, int64(20), got[2].Return)
	require.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(register, got, linCheckBound))

	// A read of w3 before w3 was written.
	history = []porcupine.Operation{op(10, 20, regOp{key: a}, "w3")}
	failed = []porcupine.Operation{op(25, math.MaxInt64, regOp{key: a, write: true, value: "w3"}, "")}
	got = settleFailedWrites(history, failed)
	require.Equal(t, int64(25), got[1].Return)
	require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(register, got, linCheckBound))
}
