package consultopo

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test"
)

// countingTransport counts the requests it sends, but for blocking
// queries (waits, which run in the background of some operations) and
// session renewals (which run on their own clock).
type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if blockingWait(r.URL.RawQuery) == 0 && !strings.HasPrefix(r.URL.Path, "/v1/session/renew/") {
		c.n.Add(1)
	}
	return c.base.RoundTrip(r)
}

// TestRoundTrips: every Conn operation sends at most the HTTP requests
// docs/roundtrips.md lists for it (blocking queries aside), counted by a
// RoundTripper under the Conn's client, on an uncontended store: the
// Conn's long-lived session exists already (the first Lock or election
// creates it once).
func TestRoundTrips(t *testing.T) {
	table := test.RoundTripLimits(t, "../../docs/roundtrips.md", "Consul")
	c := newTestConn(t, testRoot(t))
	ctr := &countingTransport{base: c.transport}
	client, err := api.NewClient(&api.Config{Address: agent.Addr(), HttpClient: &http.Client{Transport: ctr}})
	require.NoError(t, err)
	c.client, c.kv = client, client.KV()
	ctx := context.Background()
	_, err = c.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)
	l, err := c.Lock(ctx, "d", "warm")
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))

	var v topo.Version
	var lp topo.LeaderParticipation
	var lctx context.Context
	for _, op := range []struct {
		name string
		run  func() error
	}{
		{"Create", func() (err error) { v, err = c.Create(ctx, "d/g", []byte("x")); return }},
		{"Get", func() (err error) { _, _, err = c.Get(ctx, "d/g"); return }},
		{"Update with version", func() (err error) { v, err = c.Update(ctx, "d/g", []byte("y"), v); return }},
		{"Update without version", func() (err error) { v, err = c.Update(ctx, "d/g", []byte("z"), nil); return }},
		{"List", func() (err error) { _, err = c.List(ctx, "d/"); return }},
		{"ListDir", func() (err error) { _, err = c.ListDir(ctx, "d", true); return }},
		{"Delete with version", func() error { return c.Delete(ctx, "d/g", v) }},
		{"Create", func() (err error) { _, err = c.Create(ctx, "d/h", nil); return }},
		{"Delete without version", func() error { return c.Delete(ctx, "d/h", nil) }},
		{"Lock", func() (err error) { l, err = c.Lock(ctx, "d", "x"); return }},
		{"Check", func() error { return l.Check(ctx) }},
		{"Unlock", func() error { return l.Unlock(ctx) }},
		{"TryLock", func() (err error) { l, err = c.TryLock(ctx, "d", "x"); return }},
		{"Unlock", func() error { return l.Unlock(ctx) }},
		{"LockName + Unlock", func() (err error) {
			if l, err = c.LockName(ctx, "d", "x"); err == nil {
				err = l.Unlock(ctx)
			}
			return
		}},
		{"LockWithTTL + Unlock", func() (err error) {
			if l, err = c.LockWithTTL(ctx, "d", "x", time.Minute); err == nil {
				err = l.Unlock(ctx)
			}
			return
		}},
		{"Txn", func() (err error) { _, err = c.Txn(ctx, topo.CreateOp("d/t", []byte("x"))); return }},
		{"NewLeaderParticipation + WaitForLeadership", func() (err error) {
			if lp, err = c.NewLeaderParticipation("e", "id"); err == nil {
				lctx, err = lp.WaitForLeadership()
			}
			return
		}},
		{"First look at a term", func() error { return lctx.Err() }},
		{"GetCurrentLeaderID", func() (err error) { _, err = lp.GetCurrentLeaderID(ctx); return }},
		{"Stop", func() error { lp.Stop(); return nil }},
		{"Watch", func() error {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			_, _, err := c.Watch(wctx, "d/f")
			return err
		}},
		{"WatchRecursive", func() error {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			_, _, err := c.WatchRecursive(wctx, "d")
			return err
		}},
	} {
		want, ok := table[op.name]
		require.Truef(t, ok, "docs/roundtrips.md lists no %q for Consul", op.name)
		before := ctr.n.Load()
		require.NoError(t, op.run(), op.name)
		got := ctr.n.Load() - before
		t.Logf("%s: %d requests", op.name, got)
		require.LessOrEqualf(t, got, int64(want), "%s sent %d requests; docs/roundtrips.md allows %d", op.name, got, want)
	}
}
