package cache_test

import (
	"context"
	"fmt"
	"math"
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

// register is the porcupine model of one file written with unique values
// and read: a read returns the last value written.
var register = porcupine.Model{
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
			return fmt.Sprintf("put(%q)", in.value)
		}
		return fmt.Sprintf("get() -> %q", output.(string))
	},
}

type regOp struct {
	write bool
	value string
}

// linRun is one run of requireConsistentLinearizable: the readers'
// gated Conns and Caches, and how many times the Caches listed again.
type linRun struct {
	gated   []*gatedConn
	caches  []*cache.Cache
	resyncs atomic.Int64
}

// requireConsistentLinearizable records concurrent unconditional writes
// (through plain Conns) and Consistent reads through Caches of one file,
// and checks the history with porcupine. The Caches' watches deliver
// nothing, so that a read served from memory would be caught.
//
// fault, if not nil, runs once every worker has completed a few
// operations; the workers go on until it returns and then complete ops
// more each. While fault runs, a read that fails is left out of the
// history (it observed nothing) and a write that fails is kept with no
// end (it may or may not have taken effect); without a fault every
// operation must succeed.
func requireConsistentLinearizable(t *testing.T, open func() topo.Conn, fault func(ctx context.Context, run *linRun)) {
	ctx := testCtx(t)
	setup := open()
	defer setup.Close()
	_, err := setup.Create(ctx, "lin/f", []byte(""))
	require.NoError(t, err)
	const workers, ops = 4, 40
	var mu sync.Mutex
	var history []porcupine.Operation
	var wg sync.WaitGroup
	run := &linRun{}
	started := make(chan struct{}, workers) // one per worker past its first ops
	faultDone := make(chan struct{})
	if fault == nil {
		close(faultDone)
	}
	for w := range workers {
		raw := open()
		// The Cache's watch is held back for good: a read answered from
		// memory would show the first value only (or, after a relist, the
		// value the relist saw).
		g := newGated(open())
		c := wrap(t, g, cache.Options{Mode: cache.Consistent, ProbeInterval: 50 * time.Millisecond,
			Hooks: cache.Hooks{OnResync: func(error) { run.resyncs.Add(1) }}})
		g.hold()
		run.gated, run.caches = append(run.gated, g), append(run.caches, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer raw.Close()
			defer c.Close()
			after := -1 // successful operations since the fault ended
			for i := 0; after < ops; i++ {
				if i == ops/4 {
					started <- struct{}{}
				}
				faulted := true
				select {
				case <-faultDone:
					faulted = false
					if after < 0 {
						after = 0
					}
				default:
				}
				var op porcupine.Operation
				op.ClientId = w
				opCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
				start := time.Now()
				// (No write goes through the Caches: a path written
				// through a Cache is read from the store until its watch
				// delivers the write, which would hide a Cached read.)
				var err error
				switch i % 2 {
				case 0: // a write by a plain Conn
					v := fmt.Sprintf("r%d-%d", w, i)
					_, err = raw.Update(opCtx, "lin/f", []byte(v), nil)
					op.Input, op.Output = regOp{write: true, value: v}, ""
				default:
					var b []byte
					b, _, err = c.Get(opCtx, "lin/f")
					op.Input, op.Output = regOp{}, string(b)
				}
				cancel()
				op.Call, op.Return = start.UnixNano(), time.Now().UnixNano()
				switch {
				case err == nil:
					if after >= 0 {
						after++
					}
				case !faulted:
					t.Error(err)
					return
				case op.Input.(regOp).write:
					op.Return = math.MaxInt64 // it may take effect at any time
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
		fault(ctx, run)
		close(faultDone)
	}
	wg.Wait()
	require.True(t, porcupine.CheckOperations(register, history), "Consistent reads are not linearizable")
}

// TestConsistentLinearizableMemory: Consistent reads through Caches on
// memorytopo are linearizable with concurrent writers.
func TestConsistentLinearizableMemory(t *testing.T) {
	_, open := memoryStore(t)
	requireConsistentLinearizable(t, open, nil)
}

// TestConsistentLinearizableEtcd: the same on a real etcd.
func TestConsistentLinearizableEtcd(t *testing.T) {
	requireConsistentLinearizable(t, etcdOpen(t, etcdtest.Start(t), newRoot()), nil)
}

// TestConsistentLinearizableZooKeeper: the same on a real ZooKeeper, whose
// Conns read linearizably with zk2topo.Options.LinearizableReads (without
// it ZooKeeper reads are sequentially consistent per session only).
func TestConsistentLinearizableZooKeeper(t *testing.T) {
	requireConsistentLinearizable(t, zkOpen(t, zktest.Start(t), newRoot(), true), nil)
}

// TestConsistentLinearizableConsul: the same on a real Consul agent
// (consistent reads are consultopo's default).
func TestConsistentLinearizableConsul(t *testing.T) {
	requireConsistentLinearizable(t, consulOpen(t, consultest.Start(t), newRoot()), nil)
}

// TestConsistentLinearizableAcrossRestart: the store (one etcd member,
// one ZooKeeper server, one Consul server, each keeping its data) stops
// while writers write and Caches read in Consistent mode (their watches
// held back), the Caches turn Stale, and the store starts again; the
// history, before, during and after, is linearizable: no Consistent read
// is answered from what memory held when the store went away.
func TestConsistentLinearizableAcrossRestart(t *testing.T) {
	restartables(t, func(t *testing.T, s restartable) {
		requireConsistentLinearizable(t, s.open, func(ctx context.Context, run *linRun) {
			s.stop()
			for _, c := range run.caches {
				require.Eventually(t, func() bool { return c.State().Health == cache.Stale }, 30*time.Second, time.Millisecond)
			}
			s.restart()
		})
	})
}

// TestConsistentLinearizableAcrossCompactionEtcd: while writers write and
// Caches read in Consistent mode, the Caches' watches are cut (each Cache
// lists again) and etcd is compacted to its current revision just before
// every new WatchRecursive and continuously while the Caches relist; the
// history is linearizable.
func TestConsistentLinearizableAcrossCompactionEtcd(t *testing.T) {
	addr := etcdtest.Start(t)
	comp := newCompactor(t, addr)
	requireConsistentLinearizable(t, etcdOpen(t, addr, newRoot()), func(ctx context.Context, run *linRun) {
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
// writer writes the same file, on memorytopo and a real etcd.
func TestCachedModeReadsOwnWritesInOrder(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		_, open := memoryStore(t)
		requireReadsOwnWrites(t, open, 500)
	})
	t.Run("etcd", func(t *testing.T) { requireReadsOwnWrites(t, etcdOpen(t, etcdtest.Start(t), newRoot()), 100) })
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
