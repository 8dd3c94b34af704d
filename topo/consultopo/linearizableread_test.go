package consultopo

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// queryRecorder records the query strings of the KV requests it sends.
type queryRecorder struct {
	base    http.RoundTripper
	mu      sync.Mutex
	queries []string
}

func (q *queryRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasPrefix(r.URL.Path, "/v1/kv/") {
		q.mu.Lock()
		q.queries = append(q.queries, r.URL.RawQuery)
		q.mu.Unlock()
	}
	return q.base.RoundTrip(r)
}

// take returns the queries recorded since the last take.
func (q *queryRecorder) take() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	got := q.queries
	q.queries = nil
	return got
}

// TestLinearizableReadContext: a Conn with Options.Reads ReadDefault
// sends Get, List and ListDir in Consul's consistent mode under a context
// of topo.WithLinearizableRead, and in the default mode otherwise. (A
// single-server dev agent never answers a default-mode read stale, so the
// test checks the requests, not the answers.)
func TestLinearizableReadContext(t *testing.T) {
	c, err := NewConn(Options{Address: agent.Addr(), Reads: ReadDefault}, testRoot(t))
	require.NoError(t, err)
	defer c.Close()
	rec := &queryRecorder{base: c.transport}
	client, err := api.NewClient(&api.Config{Address: agent.Addr(), HttpClient: &http.Client{Transport: rec}})
	require.NoError(t, err)
	c.client, c.kv = client, client.KV()
	_, err = c.Create(t.Context(), "d/f", []byte("x"))
	require.NoError(t, err)
	rec.take()

	reads := func(ctx context.Context) {
		_, _, err := c.Get(ctx, "d/f")
		require.NoError(t, err)
		_, err = c.List(ctx, "d/")
		require.NoError(t, err)
		_, err = c.ListDir(ctx, "d", true)
		require.NoError(t, err)
	}
	reads(t.Context())
	plain := rec.take()
	require.NotEmpty(t, plain)
	for _, q := range plain {
		require.NotContains(t, q, "consistent", "a read without the marker, in ReadDefault mode")
	}
	reads(topo.WithLinearizableRead(t.Context()))
	marked := rec.take()
	require.Len(t, marked, len(plain))
	for _, q := range marked {
		require.Contains(t, q, "consistent", "a read under WithLinearizableRead")
	}
}
