package consultopo

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"
)

// holdingProxy is an HTTP proxy in front of the test agent that holds
// back the first request its match accepts, as a network delaying the
// bytes (or an agent whose RPC is slow) would: it answers nothing, and
// once the client gave up on the request (it closed the connection) and
// the test closes release, it sends the request to the agent after all.
// Every other request passes through. Nothing sleeps: the test drives the
// order.
type holdingProxy struct {
	srv   *httptest.Server
	match func(r *http.Request, body string) bool
	// after, set before the hold, reports requests sent after it, to
	// know that a read the client made after giving up was answered.
	after func(r *http.Request, body string)

	mu      sync.Mutex
	claimed bool
	// gaveUp is closed once the client gave up the held request;
	// release lets it through; landed gets the agent's status.
	gaveUp, release chan struct{}
	landed          chan int
	// closing ends the test: a request still held is dropped.
	closing chan struct{}
}

func newHoldingProxy(t *testing.T, match func(r *http.Request, body string) bool) *holdingProxy {
	t.Helper()
	p := &holdingProxy{match: match, gaveUp: make(chan struct{}), release: make(chan struct{}),
		landed: make(chan int, 1), closing: make(chan struct{})}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(func() {
		close(p.closing)
		p.srv.CloseClientConnections()
		p.srv.Close()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *holdingProxy) Addr() string { return strings.TrimPrefix(p.srv.URL, "http://") }

// Release lets the held request through and returns the agent's status.
// Without it, the request is dropped: it never reaches the agent.
func (p *holdingProxy) Release(t *testing.T) int {
	t.Helper()
	close(p.release)
	select {
	case code := <-p.landed:
		return code
	case <-time.After(waitFor):
		t.Fatal("the held request did not reach the agent")
		return 0
	}
}

func (p *holdingProxy) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	p.mu.Lock()
	hold := !p.claimed && p.match(r, string(body))
	p.claimed = p.claimed || hold
	after := p.after
	p.mu.Unlock()
	if hold {
		<-r.Context().Done() // the client gave up
		close(p.gaveUp)
		select {
		case <-p.release:
		case <-p.closing:
			return
		}
		resp, err := p.forward(context.Background(), r, body)
		code := 0
		if err == nil {
			code = resp.StatusCode
			_ = resp.Body.Close()
		}
		p.landed <- code
		return
	}
	resp, err := p.forward(r.Context(), r, body)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	if after != nil {
		after(r, string(body))
	}
}

// forward sends r (with body) to the agent.
func (p *holdingProxy) forward(ctx context.Context, r *http.Request, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://"+agent.Addr()+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = r.Header.Clone()
	return http.DefaultClient.Do(req)
}

// requireGaveUp waits until the client gave the held request up.
func (p *holdingProxy) requireGaveUp(t *testing.T) {
	t.Helper()
	select {
	case <-p.gaveUp:
	case <-time.After(waitFor):
		t.Fatal("the client did not give up the held request")
	}
}

// txnOp matches a transaction with a verb operation on a key starting
// with prefix (end prefix with a double quote for one key exactly).
func txnOp(verb, prefix string) func(r *http.Request, body string) bool {
	return func(r *http.Request, body string) bool {
		return r.URL.Path == "/v1/txn" && strings.Contains(body, `"Verb":"`+verb+`","Key":"`+prefix)
	}
}

// answered returns a channel closed once p answered a request, sent after
// the call, that match accepts.
func (p *holdingProxy) answered(match func(r *http.Request, body string) bool) <-chan struct{} {
	ch := make(chan struct{})
	var once sync.Once
	p.mu.Lock()
	p.after = func(r *http.Request, body string) {
		if match(r, body) {
			once.Do(func() { close(ch) })
		}
	}
	p.mu.Unlock()
	return ch
}

// requireClosedWithin waits for ch, failing the test with what after
// waitFor.
func requireClosedWithin(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitFor):
		t.Fatal(what)
	}
}

// proxiedConn opens a Conn under root through a holdingProxy holding
// the first request match accepts, with requests bounded at 2 s, and
// creates d/f through it (so that d can be locked).
func proxiedConn(t *testing.T, root string, match func(r *http.Request, body string) bool) (*holdingProxy, *Conn) {
	t.Helper()
	p := newHoldingProxy(t, match)
	opts := testOptions()
	opts.Address, opts.RequestTimeout = p.Addr(), 2*time.Second
	c, err := NewConn(opts, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	_, err = c.Create(t.Context(), "d/f", []byte("x"))
	require.NoError(t, err)
	return p, c
}

// lockAndUnlock runs a Lock of d by c in the background, unlocking at
// once, and returns its outcome's channel.
func lockAndUnlock(t *testing.T, c *Conn, contents string) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		l, err := c.Lock(ctx, "d", contents)
		if err == nil {
			err = l.Unlock(ctx)
		}
		done <- err
	}()
	return done
}

// returned waits for the outcome of a lockAndUnlock.
func returned(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(waitFor):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

// readOf matches a read of key.
func readOf(key string) func(r *http.Request, body string) bool {
	return func(r *http.Request, _ string) bool {
		return r.Method == http.MethodGet && r.URL.Path == "/v1/kv/"+key
	}
}

// requireVitessLockable: a Vitess-style api.Lock of key takes it within
// 10 s, and releases it.
func requireVitessLockable(t *testing.T, key string) {
	t.Helper()
	raw, err := rawClient(t).LockOpts(&api.LockOptions{Key: key, Value: []byte("vitess"),
		SessionTTL: "10s", LockWaitTime: 10 * time.Second, LockTryOnce: true})
	require.NoError(t, err)
	lost, err := raw.Lock(nil)
	require.NoError(t, err)
	require.NotNil(t, lost, "a Vitess-style api.Lock of a lock nobody holds waited in vain")
	require.NoError(t, raw.Unlock())
	require.NoError(t, raw.Destroy())
}

// requireLockable: a Vitess-style api.Lock, then a Lock of c, take the
// lock on d (key: its lock key) within seconds.
func requireLockable(t *testing.T, c *Conn, key string) {
	t.Helper()
	requireVitessLockable(t, key)
	lctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	l, err := c.Lock(lctx, "d", "next")
	require.NoError(t, err, "Lock of a lock nobody holds")
	require.NoError(t, l.Unlock(t.Context()))
}

// TestLateAcquireFreed: a Lock's acquire transaction is held on its way
// to the agent until the client gave up on it (RequestTimeout) and
// resolved it with a read that found the key absent; then it lands and
// takes the key for the Conn's long-lived session, at an index no claim
// recorded. The Conn frees it: a Vitess-style api.Lock and another Conn
// take the lock within seconds, while the first Conn stays open.
func TestLateAcquireFreed(t *testing.T) {
	root := testRoot(t)
	key := root + "/d/Lock"
	p, c1 := proxiedConn(t, root, txnOp("lock", key+`"`))
	read := p.answered(readOf(key))
	done := lockAndUnlock(t, c1, "late")
	p.requireGaveUp(t)
	requireClosedWithin(t, read, "the unanswered acquire was not resolved by a read")
	require.Equal(t, http.StatusOK, p.Release(t), "the late acquire did not take the key")
	t.Logf("the first Lock returned %v", returned(t, done, "the first Lock"))
	requireLockable(t, newTestConn(t, root), key)
}

// TestGiveBackRetried: a Lock takes the free key in a release's gap while
// another contender queues (a queue entry written here with a session of
// its own) and gives it back, but the give-back's request is lost (held
// until the client gave up, then dropped). The give-back is retried: once
// the other contender leaves, the Lock (now queued) takes the lock, then
// a Vitess-style api.Lock and another Conn take it in turn, within
// seconds.
func TestGiveBackRetried(t *testing.T) {
	root := testRoot(t)
	key := root + "/d/Lock"
	p, c1 := proxiedConn(t, root, txnOp("delete-cas", key+`"`))
	raw := rawClient(t)
	sess, _, err := raw.Session().Create(&api.SessionEntry{TTL: "30s", Behavior: api.SessionBehaviorDelete}, nil)
	require.NoError(t, err)
	defer func() { _, _ = raw.Session().Destroy(sess, nil) }()
	entry := root + "/d/locks/queue/" + sess + "-0"
	ok, _, err := raw.KV().Acquire(&api.KVPair{Key: entry, Flags: api.LockFlagValue, Session: sess}, nil)
	require.NoError(t, err)
	require.True(t, ok)

	done := lockAndUnlock(t, c1, "gap")
	p.requireGaveUp(t)
	_, err = raw.KV().Delete(entry, nil)
	require.NoError(t, err)
	require.NoError(t, returned(t, done, "the Lock that gave the key back"), "the Lock that gave the key back, once it headed the queue")
	requireLockable(t, newTestConn(t, root), key)
}

// TestLateEnqueueDropped: a Lock's enqueue transaction is held on its way
// to the agent until the client gave up on it and its clean-up (the
// delete of the entry) found nothing to delete; then it lands, leaving an
// entry on the Conn's long-lived session that no contender waits on. The
// Conn deletes it: once the holder unlocks, another Conn's Lock (which
// queues behind it) takes the lock within seconds, while the first Conn
// stays open.
func TestLateEnqueueDropped(t *testing.T) {
	root := testRoot(t)
	key, queue := root+"/d/Lock", root+"/d/locks/queue/"
	p, c1 := proxiedConn(t, root, txnOp("lock", queue))
	c2 := newTestConn(t, root)
	ctx := t.Context()
	held, err := c2.Lock(ctx, "d", "holder")
	require.NoError(t, err)

	dropped := p.answered(txnOp("delete", queue))
	done := lockAndUnlock(t, c1, "late")
	p.requireGaveUp(t)
	requireClosedWithin(t, dropped, "the abandoned entry's delete was not sent")
	require.Equal(t, http.StatusOK, p.Release(t), "the late enqueue did not land")
	require.NoError(t, held.Unlock(ctx))
	requireLockable(t, newTestConn(t, root), key)
	t.Logf("the first Lock returned %v", returned(t, done, "the first Lock"))
}

// TestLateWatchSparesOwnClaim: while the Conn watches the key of an
// acquire that got no answer (held until the client gave up, then
// dropped: it never lands), the same Conn takes the lock; the watch sees
// the key held by the Conn's session and leaves it, since a grant
// recorded it: once the watch has looked past the acquire, the lock is
// still held.
func TestLateWatchSparesOwnClaim(t *testing.T) {
	root := testRoot(t)
	key := root + "/d/Lock"
	p, c1 := proxiedConn(t, root, txnOp("lock", key+`"`))
	ctx := t.Context()
	read := p.answered(readOf(key))
	require.Error(t, returned(t, lockAndUnlock(t, c1, "lost"), "the first Lock"), "a Lock whose acquire got no answer")
	p.requireGaveUp(t)
	requireClosedWithin(t, read, "the unanswered acquire was not resolved by a read")

	l, err := c1.Lock(ctx, "d", "own")
	require.NoError(t, err)
	token := uint64(l.Token())
	watched := p.answered(func(r *http.Request, body string) bool {
		index, err := strconv.ParseUint(r.URL.Query().Get("index"), 10, 64)
		return readOf(key)(r, body) && err == nil && index >= token
	})
	requireClosedWithin(t, watched, "the watch of the lost acquire did not look past the grant")
	require.NoError(t, l.Check(ctx), "the watch of a lost acquire took the Conn's own claim for it")
	require.NoError(t, l.Unlock(ctx))
}
