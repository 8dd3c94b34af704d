package consultopo

import (
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"
)

// rtCounter counts the HTTP requests a client sends to the agent (every
// KV read and write, transaction, session create/renew/destroy, and every
// blocking query, each of which is one round trip). It hooks the client's
// http.Transport through its Proxy function, which the transport calls once
// per request it sends (returning no proxy). The benchmarks report the
// counts per operation: rt/op for topokit, raw-rt/op for the raw api.
type rtCounter struct{ n atomic.Int64 }

func (r *rtCounter) load() int64 { return r.n.Load() }

func (r *rtCounter) hook(t *http.Transport) {
	t.Proxy = func(*http.Request) (*url.URL, error) {
		r.n.Add(1)
		return nil, nil
	}
}

// rtSides are a benchmark's two counters.
type rtSides struct{ tk, raw rtCounter }

// conn opens a Conn under root (closed at the end of b) whose requests
// s.tk counts. The hook is set after NewConn's first request (which
// checks the agent), so only the benchmarked requests are counted.
func (s *rtSides) conn(b *testing.B, root string) *Conn {
	b.Helper()
	c := newTestConn(b, root)
	s.tk.hook(c.transport)
	return c
}

// client opens a raw api client whose requests s.raw counts.
func (s *rtSides) client(b *testing.B) *api.Client {
	b.Helper()
	cfg := api.DefaultConfig()
	cfg.Address = agent.Addr()
	s.raw.hook(cfg.Transport)
	c, err := api.NewClient(cfg)
	require.NoError(b, err)
	return c
}

// rtMark is the two counts at some point.
type rtMark struct{ tk, raw int64 }

func (s *rtSides) mark() rtMark { return rtMark{s.tk.load(), s.raw.load()} }

// report reports each side's requests per iteration since m.
func (s *rtSides) report(b *testing.B, m rtMark, iters int) {
	b.Helper()
	if iters == 0 {
		return
	}
	b.ReportMetric(float64(s.tk.load()-m.tk)/float64(iters), "rt/op")
	b.ReportMetric(float64(s.raw.load()-m.raw)/float64(iters), "raw-rt/op")
}
