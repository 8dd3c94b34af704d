package consultopo

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// heldTailDrops makes c's tail drops (the check-index and delete of a
// queue's tail key, see dropTail) wait before they are sent until the
// returned release is called or their request ends; sent reports each
// one held.
func heldTailDrops(c *Conn) (sent <-chan struct{}, release func()) {
	gate := make(chan struct{})
	held := make(chan struct{}, 16)
	c.transport.Proxy = func(r *http.Request) (*url.URL, error) {
		if r.URL.Path != "/v1/txn" || r.GetBody == nil {
			return nil, nil
		}
		b, err := r.GetBody()
		if err != nil {
			return nil, nil
		}
		body, _ := io.ReadAll(b)
		if bytes.Contains(body, []byte(`"check-index"`)) && bytes.Contains(body, []byte("/"+tailName+`"`)) {
			held <- struct{}{}
			select {
			case <-gate:
			case <-r.Context().Done():
			}
		}
		return nil, nil
	}
	return held, func() { close(gate) }
}

// TestQueueTailDropInFlight: while the tail drop that a lone waiter's
// acquire leaves running in the background (dropTailLater) is held back,
// contenders that queue behind the gone entry the tail still names take
// their turns in order, each woken by the release before it, and leave
// no key; a release
// whose context ends while it waits for the drop (awaitTailDrop) is done
// by the engine in the background once the drop is over, leaving no key
// either, and a Close with a drop in flight leaves none.
func TestQueueTailDropInFlight(t *testing.T) {
	ctx := context.Background()
	opts := testOptions()
	// Blocking queries wait for the whole test: a missed wake-up hangs it.
	opts.WatchPollDuration = 10 * time.Minute
	for _, end := range []string{"queued", "unlock timeout", "close"} {
		t.Run(end, func(t *testing.T) {
			root := testRoot(t)
			conns := make([]*Conn, 4)
			for i := range conns {
				c, err := NewConn(opts, root)
				require.NoError(t, err)
				t.Cleanup(c.Close)
				conns[i] = c
			}
			holder, waiter := conns[0], conns[1]
			_, err := holder.Create(ctx, "d/f", []byte("x"))
			require.NoError(t, err)
			key := holder.dirPrefix("d") + lockName
			first, err := holder.Lock(ctx, "d", "holder")
			require.NoError(t, err)
			sent, release := heldTailDrops(waiter)
			granted := make(chan topo.LockDescriptor, 1)
			go func() {
				l, err := waiter.Lock(ctx, "d", "waiter")
				require.NoError(t, err)
				granted <- l
			}()
			waitQueued(t, holder, key, 1)
			require.NoError(t, first.Unlock(ctx))
			<-sent
			l := <-granted
			switch end {
			case "queued":
				order := make(chan int, 2)
				locks := make(chan topo.LockDescriptor, 2)
				for i := 2; i < 4; i++ {
					go func() {
						l, err := conns[i].Lock(ctx, "d", "next")
						require.NoError(t, err)
						order <- i
						locks <- l
					}()
					waitQueued(t, holder, key, i-1)
				}
				release()
				require.NoError(t, l.Unlock(ctx))
				for want := 2; want < 4; want++ {
					require.Equal(t, want, <-order, "contenders must acquire in the order they queued")
					require.NoError(t, (<-locks).Unlock(ctx))
				}
			case "unlock timeout":
				uctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
				err := l.Unlock(uctx)
				cancel()
				t.Logf("Unlock while the drop is held back: %v", err)
				release()
			case "close":
				waiter.Close()
				release()
			}
			locks := holder.dirPrefix("d") + "locks/"
			require.Eventually(t, func() bool {
				left, _, err := holder.kv.Keys(holder.dirPrefix("d"), "", nil)
				require.NoError(t, err)
				return len(left) == 1 // d/f
			}, 30*time.Second, 5*time.Millisecond, "keys left under %s or %s", key, locks)
			again, err := holder.Lock(ctx, "d", "again")
			require.NoError(t, err)
			require.NoError(t, again.Unlock(ctx))
		})
	}
}

// TestTailDropRecordKeptForLaterAcquireOfSameIndex: two tail drops
// recorded under one token (the index of two acquires, possible once a
// -dev agent restarted and its indexes started over), the first started
// before the second: when the first ends, the second, still held back,
// is still the one its release waits for (awaitTailDrop). Unit level: a
// restart that hands the same index to a second acquire is not
// reproducible on demand, so the drops are started directly
// (dropTailLater) for two queues' tails, on the real agent, each held back
// on its own.
func TestTailDropRecordKeptForLaterAcquireOfSameIndex(t *testing.T) {
	ctx := context.Background()
	c := newTestConn(t, testRoot(t))
	gates := map[string]chan struct{}{}
	held := make(chan string, 4)
	for _, d := range []string{"a", "b"} {
		gates[tailOf(c.dirPrefix(d)+queueDir+"/x")] = make(chan struct{})
	}
	c.transport.Proxy = func(r *http.Request) (*url.URL, error) {
		if r.URL.Path != "/v1/txn" || r.GetBody == nil {
			return nil, nil
		}
		b, err := r.GetBody()
		if err != nil {
			return nil, nil
		}
		body, _ := io.ReadAll(b)
		for tail, gate := range gates {
			if bytes.Contains(body, []byte(`"check-index"`)) && bytes.Contains(body, []byte(`"`+tail+`"`)) {
				held <- tail
				select {
				case <-gate:
				case <-r.Context().Done():
				}
			}
		}
		return nil, nil
	}
	const token = 42
	start := func(d string) (tail string, done chan struct{}) {
		key := c.dirPrefix(d) + queueDir + "/x"
		tail = tailOf(key)
		resp := &api.TxnResponse{Results: api.TxnResults{{KV: &api.KVPair{Key: tail, Value: []byte(key), ModifyIndex: 7}}}}
		c.dropTailLater(key, token, resp)
		require.Equal(t, tail, <-held)
		done = lastTailDrop(c, token)
		require.NotNil(t, done)
		return tail, done
	}
	tailA, doneA := start("a")
	tailB, doneB := start("b")
	close(gates[tailA])
	<-doneA
	require.Equal(t, 1, tailDropCount(c, token), "the first drop's end removed the record of the second, still running")
	require.True(t, lastTailDrop(c, token) == doneB, "the first drop's end removed the record of the second, still running")
	waited := make(chan struct{})
	go func() {
		c.awaitTailDrop(ctx, token)
		close(waited)
	}()
	close(gates[tailB])
	<-doneB
	<-waited
	c.mu.Lock()
	require.Empty(t, c.tailDrops)
	c.mu.Unlock()
}

// gatedDrops holds back c's tail drops of the queues of dirs, each until
// its gate is closed; held reports each drop held, by tail key.
func gatedDrops(c *Conn, dirs []string) (gates map[string]chan struct{}, held chan string) {
	gates = map[string]chan struct{}{}
	held = make(chan string, len(dirs))
	for _, d := range dirs {
		gates[tailOf(c.dirPrefix(d)+queueDir+"/x")] = make(chan struct{})
	}
	c.transport.Proxy = func(r *http.Request) (*url.URL, error) {
		if r.URL.Path != "/v1/txn" || r.GetBody == nil {
			return nil, nil
		}
		b, err := r.GetBody()
		if err != nil {
			return nil, nil
		}
		body, _ := io.ReadAll(b)
		for tail, gate := range gates {
			if bytes.Contains(body, []byte(`"check-index"`)) && bytes.Contains(body, []byte(`"`+tail+`"`)) {
				held <- tail
				select {
				case <-gate:
				case <-r.Context().Done():
				}
			}
		}
		return nil, nil
	}
	return gates, held
}

// startDrop starts the tail drop of d's queue as an acquire at token
// would (dropTailLater) and returns its tail key once it is held.
func startDrop(t *testing.T, c *Conn, held <-chan string, d string, token uint64) string {
	t.Helper()
	key := c.dirPrefix(d) + queueDir + "/x"
	tail := tailOf(key)
	resp := &api.TxnResponse{Results: api.TxnResults{{KV: &api.KVPair{Key: tail, Value: []byte(key), ModifyIndex: 7}}}}
	c.dropTailLater(key, token, resp)
	require.Equal(t, tail, <-held)
	return tail
}

// TestTailDropsOfOneIndexEndInAnyOrder: two tail drops recorded under one
// token (see TestTailDropRecordKeptForLaterAcquireOfSameIndex), the
// second ending first: the first, still held back, must still be waited
// for by a release of that token (awaitTailDrop), or that release returns
// while its queue's tail key is still there.
func TestTailDropsOfOneIndexEndInAnyOrder(t *testing.T) {
	ctx := context.Background()
	c := newTestConn(t, testRoot(t))
	gates, held := gatedDrops(c, []string{"a", "b"})
	const token = 42
	tailA := startDrop(t, c, held, "a", token)
	tailB := startDrop(t, c, held, "b", token)
	doneB := lastTailDrop(c, token)
	close(gates[tailB])
	<-doneB
	require.Equal(t, 1, tailDropCount(c, token), "the second drop's end removed the record of the first, still running")
	waited := make(chan struct{})
	go func() {
		c.awaitTailDrop(ctx, token)
		close(waited)
	}()
	close(gates[tailA])
	<-waited
	require.Eventually(t, func() bool { return tailDropCount(c, token) == 0 }, time.Minute, time.Millisecond)
}

// TestTailDropsOfOneIndexConcurrent: many tail drops under one token,
// ended in an order of their own while releases of that token wait
// (awaitTailDrop) concurrently (run with -race): every wait returns only
// once every drop recorded before it began is over, and no record is
// left.
func TestTailDropsOfOneIndexConcurrent(t *testing.T) {
	ctx := context.Background()
	c := newTestConn(t, testRoot(t))
	dirs := []string{"a", "b", "c", "d", "e", "f"}
	gates, held := gatedDrops(c, dirs)
	const token = 7
	var tails []string
	var dones []chan struct{}
	for _, d := range dirs {
		tails = append(tails, startDrop(t, c, held, d, token))
		dones = append(dones, lastTailDrop(c, token))
	}
	var waits []chan struct{}
	for range 4 {
		w := make(chan struct{})
		waits = append(waits, w)
		go func() {
			c.awaitTailDrop(ctx, token)
			close(w)
		}()
	}
	// End them in an order other than their start, the first last.
	order := []int{3, 1, 5, 2, 4, 0}
	var wg sync.WaitGroup
	for k, i := range order {
		if k == len(order)-1 {
			wg.Wait() // all others let go
			for _, j := range order[:k] {
				<-dones[j]
			}
			for _, w := range waits {
				select {
				case <-w:
					t.Fatal("a release of the token returned while a drop of it was still held")
				default:
				}
			}
		}
		wg.Go(func() { close(gates[tails[i]]) })
	}
	wg.Wait()
	for _, w := range waits {
		<-w
	}
	require.Eventually(t, func() bool { return tailDropCount(c, token) == 0 }, time.Minute, time.Millisecond)
}

// tailDropCount returns how many tail drops are recorded under token.
func tailDropCount(c *Conn, token uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.tailDrops[token])
}

// lastTailDrop returns the channel of the tail drop recorded last under
// token.
func lastTailDrop(c *Conn, token uint64) chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	drops := c.tailDrops[token]
	return drops[len(drops)-1]
}
