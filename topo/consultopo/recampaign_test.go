package consultopo

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/test/faultproxy"
)

// acquireCounter counts the transactions its Conn sends that acquire
// (verb "lock") the store key key and succeed, while on.
type acquireCounter struct {
	base http.RoundTripper
	key  string
	on   atomic.Bool
	n    atomic.Int64
}

func (a *acquireCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	acquire := false
	if a.on.Load() && r.URL.Path == "/v1/txn" && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		acquire = strings.Contains(string(body), `"Verb":"lock","Key":"`+a.key+`"`)
	}
	resp, err := a.base.RoundTrip(r)
	if acquire && err == nil && resp.StatusCode == http.StatusOK {
		a.n.Add(1)
	}
	return resp, err
}

// TestReleaseThenRetryQueues: a Conn that releases a lock or resigns a
// term while another contender queues for it, and at once locks or
// campaigns again, queues behind that contender: it does not take the key
// in the gap before the waiter's acquire (the waiter's link is slow here,
// so the gap is wide). A take there was given back at once (the order
// held), but for that moment the store named the released holder as
// holding the lock, or as the leader of a new term that no participant
// was granted: Observe, WaitForNewLeader and Vitess processes reading the
// key could report it (the shared suite's probe saw an observer get "B"
// twice in a row, the second time with a token no term had).
func TestReleaseThenRetryQueues(t *testing.T) {
	for _, election := range []bool{false, true} {
		name := "Lock"
		if election {
			name = "Election"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			root := testRoot(t)
			a := newTestConn(t, root)
			px, err := faultproxy.New(agent.Addr())
			require.NoError(t, err)
			t.Cleanup(func() { _ = px.Close() })
			slowOpts := testOptions()
			slowOpts.Address = px.Addr()
			b, err := NewConn(slowOpts, root)
			require.NoError(t, err)
			t.Cleanup(b.Close)

			key := a.key(electionsDir + "/e")
			if !election {
				_, err = a.Create(ctx, "d/f", []byte("x"))
				require.NoError(t, err)
				key = a.dirPrefix("d") + lockName
			}
			ctr := &acquireCounter{base: a.transport, key: key}
			client, err := api.NewClient(&api.Config{Address: agent.Addr(), HttpClient: &http.Client{Transport: ctr}})
			require.NoError(t, err)
			a.client, a.kv = client, client.KV()

			// A holds; B queues behind it.
			var release func() error
			var again func() error
			bGot := make(chan error, 1)
			if election {
				pa, err := a.NewLeaderParticipation("e", "A")
				require.NoError(t, err)
				t.Cleanup(pa.Stop)
				_, err = pa.Campaign(ctx, []byte("a"))
				require.NoError(t, err)
				pb, err := b.NewLeaderParticipation("e", "B")
				require.NoError(t, err)
				t.Cleanup(pb.Stop)
				go func() { _, err := pb.Campaign(ctx, []byte("b")); bGot <- err }()
				release = func() error { return pa.Resign(ctx) }
				again = func() error { _, err := pa.Campaign(ctx, []byte("a")); return err }
			} else {
				la, err := a.Lock(ctx, "d", "A")
				require.NoError(t, err)
				go func() {
					lb, err := b.Lock(ctx, "d", "B")
					if err == nil {
						t.Cleanup(func() { _ = lb.Unlock(context.Background()) })
					}
					bGot <- err
				}()
				release = func() error { return la.Unlock(ctx) }
				again = func() error {
					l, err := a.Lock(ctx, "d", "A")
					if err == nil {
						t.Cleanup(func() { _ = l.Unlock(context.Background()) })
					}
					return err
				}
			}
			waitQueued(t, a, key, 1)
			px.SetDelay(200 * time.Millisecond)

			ctr.on.Store(true)
			require.NoError(t, release())
			aGot := make(chan error, 1)
			go func() { aGot <- again() }()
			select {
			case err := <-bGot:
				require.NoError(t, err, "B, queued first, is granted first")
			case err := <-aGot:
				t.Fatalf("A, which released and tried again, was granted before B, queued first: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("B was not granted within 30 s")
			}
			require.Zero(t, ctr.n.Load(), "A's Conn took the key while B queued for it (in the release's gap)")
			px.SetDelay(0)
			if election {
				// B leads; A is queued behind it.
				waitQueued(t, a, key, 1)
			}
		})
	}
}
