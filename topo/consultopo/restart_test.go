package consultopo

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
)

// TestReadsAfterRestart (issue 10 item 19): a persistent server restarted
// after a few thousand writes replays its log; reads through Conns with the
// default options, issued while it comes back, never return a value older
// than one acknowledged before the restart, nor NoNode for a file that
// exists; and after it is back, a reader Conn sees every write a writer
// Conn had acknowledged, and the writer its own.
func TestReadsAfterRestart(t *testing.T) {
	readsAfterRestart(t, Options{})
}

func readsAfterRestart(t *testing.T, base Options) {
	a := consultest.StartAgentWithOptions(t, consultest.AgentOptions{Persistent: true})
	opts := base
	opts.Address, opts.WatchPollDuration = a.Addr(), time.Second
	root := testRoot(t)
	w, err := NewConn(opts, root)
	require.NoError(t, err)
	defer w.Close()
	r, err := NewConn(opts, root)
	require.NoError(t, err)
	defer r.Close()
	ctx := t.Context()

	const keys, rounds = 16, 600
	var last [keys]atomic.Int64 // the last acknowledged value of each key
	var wg sync.WaitGroup
	for k := range keys {
		wg.Go(func() {
			for i := 1; i <= rounds; i++ {
				_, err := w.Update(ctx, fmt.Sprintf("k%d", k), []byte(strconv.Itoa(i)), nil)
				require.NoError(t, err)
				last[k].Store(int64(i))
			}
		})
	}
	wg.Wait()

	// check reads key k through c; it returns whether the read succeeded
	// and records stale answers.
	var mu sync.Mutex
	var stale []string
	check := func(c *Conn, who string, k int) bool {
		want := last[k].Load()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		data, _, err := c.Get(rctx, fmt.Sprintf("k%d", k))
		switch {
		case topo.IsErrType(err, topo.NoNode):
			mu.Lock()
			stale = append(stale, fmt.Sprintf("%s: k%d: NoNode (last write %d)", who, k, want))
			mu.Unlock()
			return true
		case err != nil:
			return false
		}
		if got, _ := strconv.Atoi(string(data)); int64(got) < want {
			mu.Lock()
			stale = append(stale, fmt.Sprintf("%s: k%d = %d, older than the acknowledged %d", who, k, got, want))
			mu.Unlock()
		}
		return true
	}

	a.Kill()
	stop := make(chan struct{})
	var okReads atomic.Int64
	var readers sync.WaitGroup
	for _, c := range []*Conn{w, r} {
		readers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if check(c, "during restart", i%keys) {
					okReads.Add(1)
				} else {
					time.Sleep(time.Millisecond) // the agent is down: do not spin
				}
			}
		})
	}
	require.NoError(t, a.Start())
	start := okReads.Load()
	require.Eventually(t, func() bool { return okReads.Load() > start+2000 }, 2*waitFor, tick)
	close(stop)
	readers.Wait()
	requireNoStale(t, stale)

	// A writer/reader pair once the server is back.
	for i := 1; i <= 200; i++ {
		k := i % keys
		v := int64(rounds + i)
		_, err := w.Update(ctx, fmt.Sprintf("k%d", k), []byte(strconv.FormatInt(v, 10)), nil)
		require.NoError(t, err)
		last[k].Store(v)
		require.True(t, check(r, "reader", k))
		require.True(t, check(w, "writer", k))
	}
	requireNoStale(t, stale)
}

// requireNoStale fails the test naming how many stale answers there were
// and the first few.
func requireNoStale(t *testing.T, stale []string) {
	t.Helper()
	if len(stale) > 0 {
		t.Fatalf("%d stale answers, the first: %q", len(stale), stale[:min(len(stale), 5)])
	}
}
