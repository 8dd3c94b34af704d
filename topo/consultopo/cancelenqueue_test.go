package consultopo

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// answerHoldingTransport, while hold is set, sends an enqueue's
// transaction to the agent but keeps its answer from the caller until
// the caller gives up (as a slow network would), and delays each queue
// entry's delete by delay: a removal left to the background is then
// still in flight when the caller returns.
type answerHoldingTransport struct {
	base  http.RoundTripper
	hold  atomic.Bool
	delay time.Duration
}

func (h *answerHoldingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPut || r.URL.Path != "/v1/txn" || !h.hold.Load() {
		return h.base.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	has := func(verb string) bool { return bytes.Contains(body, []byte(`"Verb":"`+verb+`"`)) }
	switch {
	case has("lock") && has("delete"): // an enqueue
		sent := r.Clone(context.WithoutCancel(r.Context()))
		sent.Body = io.NopCloser(bytes.NewReader(body))
		go func() {
			if resp, err := h.base.RoundTrip(sent); err == nil {
				_ = resp.Body.Close()
			}
		}()
		<-r.Context().Done()
		return nil, r.Context().Err()
	case has("check-session") && has("delete") && !has("lock"): // an entry's delete
		t := time.NewTimer(h.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return h.base.RoundTrip(r)
}

// TestCancelledEnqueueGoneOnReturn: a Lock whose context ends while its
// queue entry's transaction is unanswered returns only once the entry is
// gone from Consul: the next contender never waits on an entry nobody
// owns. The transport lets the enqueue reach the agent but keeps its
// answer until the context ends; the test sees the entry in Consul
// before it cancels. Before, the Lock returned at once and the entry was
// deleted in the background.
func TestCancelledEnqueueGoneOnReturn(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := testRoot(t)
	w, h := newTestConn(t, root), newTestConn(t, root)
	ht := &answerHoldingTransport{base: w.transport, delay: 300 * time.Millisecond}
	client, err := api.NewClient(&api.Config{Address: agent.Addr(), HttpClient: &http.Client{Transport: ht}})
	require.NoError(t, err)
	w.client, w.kv = client, client.KV()
	_, err = h.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	held, err := h.Lock(ctx, "d", "holder")
	require.NoError(t, err)
	prefix := driver{w}.queuePrefix(claims.Queue{Path: "d"})
	raw := rawClient(t).KV()
	entries := func() []string {
		keys, _, err := raw.Keys(prefix, "", &api.QueryOptions{RequireConsistent: true})
		require.NoError(t, err)
		return keys
	}

	ht.hold.Store(true)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	errc := make(chan error, 1)
	go func() {
		l, err := w.Lock(wctx, "d", "waiter")
		if err == nil {
			_ = l.Unlock(ctx)
		}
		errc <- err
	}()
	require.Eventually(t, func() bool { return len(entries()) == 1 }, 30*time.Second, 5*time.Millisecond,
		"the waiter's entry never reached Consul")
	wcancel()
	err = <-errc
	require.Truef(t, topo.IsErrType(err, topo.Interrupted), "a cancelled Lock: %v", err)
	require.Empty(t, entries(), "the cancelled Lock returned before its entry left Consul")
	ht.hold.Store(false)
	require.NoError(t, held.Unlock(ctx))
	l, err := w.TryLock(ctx, "d", "again")
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
}
