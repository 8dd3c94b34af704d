package zk2topo

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// lrInput is one operation on the register of TestLinearizableReadsOnEveryMember:
// a write of value (write true) or a read.
type lrInput struct {
	write bool
	value int
}

// lrModel is a register of ints, starting at 0. A read's output is the
// value it read.
var lrModel = porcupine.Model{
	Init: func() any { return 0 },
	Step: func(state, input, output any) (bool, any) {
		in := input.(lrInput)
		if in.write {
			return true, in.value
		}
		return output.(int) == state.(int), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(lrInput)
		if in.write {
			return fmt.Sprintf("put(%d)", in.value)
		}
		return fmt.Sprintf("get() -> %d", output.(int))
	},
}

// TestLinearizableReadsOnEveryMember checks, with porcupine, that Get with
// Options.LinearizableReads is linearizable with Update whichever member
// of a 3-node ensemble the readers and writers are connected to, the
// leader included: a reader on the leader must see a write that a
// follower acknowledged to its client before the read began (a sync
// answered by the leader does not order a read behind it: the leader may
// answer the sync before it applied commits that followers have already
// acknowledged).
func TestLinearizableReadsOnEveryMember(t *testing.T) {
	e := zktest.StartEnsemble(t, 3)
	leader := e.WaitLeader(time.Minute)
	t.Logf("leader: node %d", leader)
	root := freshRoot(t)
	open := func(i int) *Conn {
		c, err := NewConn(Options{Servers: []string{e.Addr(i)}, SessionTimeout: 20 * time.Second, LinearizableReads: true}, root)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := open(leader).Create(ctx, "reg", []byte("0"))
	require.NoError(t, err)

	const writesPerWriter = 1000
	begin := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(op porcupine.Operation) {
		mu.Lock()
		history = append(history, op)
		mu.Unlock()
	}
	now := func() int64 { return int64(time.Since(begin)) }

	var writers, readers sync.WaitGroup
	stop := make(chan struct{})
	id := 0
	for i := range e.Size() {
		w := open(i)
		wid := id
		id++
		writers.Go(func() {
			for k := 1; k <= writesPerWriter; k++ {
				v := (i+1)*1_000_000 + k
				call := now()
				_, err := w.Update(ctx, "reg", []byte(strconv.Itoa(v)), nil)
				ret := now()
				if err != nil {
					// Its outcome is unknown: it may take effect at any
					// time after its call.
					ret = math.MaxInt64
				}
				record(porcupine.Operation{ClientId: wid, Input: lrInput{write: true, value: v}, Call: call, Output: 0, Return: ret})
			}
		})
		// Two readers per member, three on the leader: the anomaly needs
		// a read on the leader that starts just after a follower
		// acknowledged a write.
		n := 2
		if i == leader {
			n = 6
		}
		for range n {
			r := open(i)
			rid := id
			id++
			readers.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					call := now()
					b, _, err := r.Get(ctx, "reg")
					ret := now()
					if err != nil {
						continue
					}
					v, err := strconv.Atoi(string(b))
					if err != nil {
						t.Errorf("read %q", b)
						return
					}
					record(porcupine.Operation{ClientId: rid, Input: lrInput{}, Call: call, Output: v, Return: ret})
				}
			})
		}
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	t.Logf("%d operations", len(history))
	res := porcupine.CheckOperationsTimeout(lrModel, history, time.Minute)
	require.NotEqual(t, porcupine.Illegal, res,
		"Get with LinearizableReads and Update on one file, readers and writers on every member (leader node %d), are not linearizable (%d operations)",
		leader, len(history))
	require.NotEqual(t, porcupine.Unknown, res, "porcupine timed out")
}
