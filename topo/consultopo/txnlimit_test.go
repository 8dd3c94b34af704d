package consultopo

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
)

// TestTxnRefusedByConnCapIsResourceExhausted: with every connection the
// agent allows the client address taken (limits.http_max_conns_per_client,
// by another client's blocking queries), the agent refuses a new
// connection with 429. Create, Update and Delete reported that as
// ResourceExhausted, Txn as Unavailable (the API client's Txn call drops
// the status code of an answer other than 200 and 409).
func TestTxnRefusedByConnCapIsResourceExhausted(t *testing.T) {
	const connCap = 3
	a := consultest.StartAgentWithOptions(t, consultest.AgentOptions{MaxConnsPerClient: connCap})
	opts := testOptions()
	opts.Address = a.Addr()
	root := testRoot(t)
	c, err := NewConn(opts, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx := t.Context()
	v, err := c.Create(ctx, "f", []byte("one"))
	require.NoError(t, err)

	// Another client takes every connection with blocking queries, each
	// holder trying again until the agent lets it in.
	c.transport.CloseIdleConnections()
	hold, stop := context.WithCancel(ctx)
	defer stop()
	other := &http.Client{Transport: &http.Transport{MaxConnsPerHost: connCap + 1}}
	defer other.CloseIdleConnections()
	resp, err := other.Get(fmt.Sprintf("http://%s/v1/kv/held", a.Addr()))
	require.NoError(t, err)
	_ = resp.Body.Close()
	index := resp.Header.Get("X-Consul-Index")
	// held[i]: holder i has a connection and no answer yet.
	var held [connCap]atomic.Bool
	for i := range connCap {
		go func() {
			for hold.Err() == nil {
				tctx := httptrace.WithClientTrace(hold, &httptrace.ClientTrace{
					GotConn:              func(httptrace.GotConnInfo) { held[i].Store(true) },
					GotFirstResponseByte: func() { held[i].Store(false) },
				})
				req, _ := http.NewRequestWithContext(tctx, http.MethodGet, fmt.Sprintf("http://%s/v1/kv/held?index=%s&wait=10m", a.Addr(), index), nil)
				if resp, err := other.Do(req); err == nil {
					_ = resp.Body.Close()
				}
				held[i].Store(false)
			}
		}()
	}
	holding := func() bool {
		for i := range held {
			if !held[i].Load() {
				return false
			}
		}
		return true
	}
	refused := func() bool {
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr}).Get(fmt.Sprintf("http://%s/v1/status/leader", a.Addr()))
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusTooManyRequests
	}
	require.Eventually(t, func() bool { return holding() && refused() && holding() }, waitFor, tick, "the other client holds every connection")

	// The agent writes its 429 as soon as it accepts a connection, so
	// net/http may read it before sending the request ("Unsolicited
	// response": the call fails with a connection error, Unavailable);
	// an attempt that read the answer must be ResourceExhausted.
	refusal := func(call func() error) error {
		for range 50 {
			c.transport.CloseIdleConnections()
			err := call()
			if err == nil || !strings.Contains(err.Error(), "readLoopPeekFailLocked") {
				return err
			}
		}
		t.Fatal("every attempt met the agent's answer before its request")
		return nil
	}
	err = refusal(func() error { _, err := c.Update(ctx, "f", []byte("two"), v); return err })
	require.Truef(t, topo.IsErrType(err, topo.ResourceExhausted), "Update: %v", err)
	err = refusal(func() error { _, err := c.Txn(ctx, topo.UpdateOp("f", []byte("two"), v)); return err })
	require.Truef(t, topo.IsErrType(err, topo.ResourceExhausted), "Txn: %v", err)

	// Nothing was written: read through a connection from another
	// loopback address, which the limit of 127.0.0.1 does not count.
	from := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	defer from.CloseIdleConnections()
	resp, err = from.Get(fmt.Sprintf("http://%s/v1/kv/%s/f?raw", a.Addr(), root))
	require.NoError(t, err)
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", got)
	require.Equal(t, "one", string(got), "nothing written")
}
