package cache_test

import (
	"context"
	"fmt"
	"sync"
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

// requireConsistentLinearizable records concurrent unconditional writes
// (through plain Conns) and Consistent reads
// through Caches of one file, and checks the history with porcupine. The
// Caches' watches deliver nothing, so that a read served from memory
// would be caught.
func requireConsistentLinearizable(t *testing.T, open func() topo.Conn) {
	ctx := testCtx(t)
	setup := open()
	defer setup.Close()
	_, err := setup.Create(ctx, "lin/f", []byte(""))
	require.NoError(t, err)
	const workers, ops = 4, 40
	var mu sync.Mutex
	var history []porcupine.Operation
	var wg sync.WaitGroup
	for w := range workers {
		raw := open()
		// The Cache's watch is held back for good: a read answered from
		// memory would show the first value only.
		g := newGated(open())
		c := wrap(t, g, cache.Options{Mode: cache.Consistent})
		g.hold()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer raw.Close()
			defer c.Close()
			for i := range ops {
				var op porcupine.Operation
				op.ClientId = w
				start := time.Now()
				// (No write goes through the Caches: a path written
				// through a Cache is read from the store until its watch
				// delivers the write, which would hide a Cached read.)
				switch i % 2 {
				case 0: // a write by a plain Conn
					v := fmt.Sprintf("r%d-%d", w, i)
					_, err := raw.Update(ctx, "lin/f", []byte(v), nil)
					if err != nil {
						t.Error(err)
						return
					}
					op.Input, op.Output = regOp{write: true, value: v}, ""
				default:
					b, _, err := c.Get(ctx, "lin/f")
					if err != nil {
						t.Error(err)
						return
					}
					op.Input, op.Output = regOp{}, string(b)
				}
				op.Call, op.Return = start.UnixNano(), time.Now().UnixNano()
				mu.Lock()
				history = append(history, op)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.True(t, porcupine.CheckOperations(register, history), "Consistent reads are not linearizable")
}

// TestConsistentLinearizableMemory: Consistent reads through Caches on
// memorytopo are linearizable with concurrent writers.
func TestConsistentLinearizableMemory(t *testing.T) {
	_, open := memoryStore(t)
	requireConsistentLinearizable(t, open)
}

// TestConsistentLinearizableEtcd: the same on a real etcd.
func TestConsistentLinearizableEtcd(t *testing.T) {
	requireConsistentLinearizable(t, etcdOpen(t, etcdtest.Start(t), newRoot()))
}

// TestConsistentLinearizableZooKeeper: the same on a real ZooKeeper, whose
// Conns read linearizably with zk2topo.Options.LinearizableReads (without
// it ZooKeeper reads are sequentially consistent per session only).
func TestConsistentLinearizableZooKeeper(t *testing.T) {
	requireConsistentLinearizable(t, zkOpen(t, zktest.Start(t), newRoot(), true))
}

// TestConsistentLinearizableConsul: the same on a real Consul agent
// (consistent reads are consultopo's default).
func TestConsistentLinearizableConsul(t *testing.T) {
	requireConsistentLinearizable(t, consulOpen(t, consultest.Start(t), newRoot()))
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
