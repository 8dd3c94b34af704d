package test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// faultStore returns the backend's FaultyStore for the subtest.
func (s *store) faultStore() FaultyStore {
	t := s.t
	t.Helper()
	fs := s.opts.FaultyStore(t)
	require.NotNil(t, fs.Open, "Options.FaultyStore returned a nil Open")
	require.NotNil(t, fs.Fault, "Options.FaultyStore returned a nil Fault")
	return fs
}

// faultOpener returns open wrapped so that each Conn is closed at the end
// of the subtest.
func faultOpener(t *testing.T, open func() topo.Conn) func() topo.Conn {
	return func() topo.Conn {
		c := open()
		require.NotNil(t, c, "the faulty store's opener returned a nil Conn")
		t.Cleanup(c.Close)
		return c
	}
}

// faultRun runs work(k) for k = 0, 1, ... on each of clients goroutines,
// injecting fault (once) when the clients have completed a third of ops
// operations in total, and stopping each client once it has done its share
// of ops and half its share more after the fault returned (the moments
// right after a recovery are when stale reads show). work returns an error
// to stop the run.
func faultRun(t *testing.T, clients, ops int, fault func(t *testing.T), work func(client, k int) error) {
	t.Helper()
	var done atomic.Int64
	faultDone := make(chan struct{})
	var once sync.Once
	injected := make(chan struct{})
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for id := range clients {
		wg.Go(func() {
			after := 0 // operations started after the fault returned
			for k := 0; ; k++ {
				select {
				case <-faultDone:
					if k >= ops/clients && after >= ops/clients/2 {
						return
					}
					after++
				default:
				}
				if err := work(id, k); err != nil {
					errs <- fmt.Errorf("client %d, operation %d: %w", id, k, err)
					once.Do(func() { close(injected) })
					return
				}
				if done.Add(1) == int64(ops/3) {
					once.Do(func() { close(injected) })
				}
			}
		})
	}
	// The fault runs on the test's goroutine (it may fail the test).
	<-injected
	func() {
		defer close(faultDone)
		fault(t)
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// transient reports whether err is an error a call may return while the
// store recovers from a fault (its outcome is then unknown).
func transient(err error) bool {
	switch topo.CodeOf(err) {
	case topo.Unavailable, topo.Timeout, topo.Interrupted, topo.LockLost:
		return true
	}
	return false
}

// testLinearizableUnderFault records a concurrent history of Get, Update
// and compare-and-set on one file through connections with the backend's
// linearizable-read option, while the store suffers its fault, and checks
// it with porcupine. Calls that fail with a transient error have unknown
// outcomes (a write may have happened); a Get that says NoNode (the file
// always exists) is a violation.
func testLinearizableUnderFault(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	fs := s.faultStore()
	openFn := fs.OpenLinearizable
	if openFn == nil {
		openFn = fs.Open
	}
	open := faultOpener(t, openFn)
	const clients, ops = 6, 1200
	mustCreate(t, ctx, open(), "lin/f", "init")
	conns := make([]topo.Conn, clients)
	for i := range conns {
		conns[i] = open()
	}

	begin := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(id int, in linInput, call, ret int64, out linOutput) {
		mu.Lock()
		defer mu.Unlock()
		history = append(history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
	}
	now := func() int64 { return int64(time.Since(begin)) }
	rngs := make([]*rand.Rand, clients)
	for i := range rngs {
		rngs[i] = rand.New(rand.NewPCG(uint64(i), 7))
	}
	faultRun(t, clients, ops, fs.Fault, func(id, k int) error {
		c := conns[id]
		runtime.Gosched()
		value := fmt.Sprintf("c%d-%d", id, k)
		get := func() ([]byte, topo.Version, bool, error) {
			call := now()
			data, ver, err := c.Get(ctx, "lin/f")
			switch {
			case err == nil:
				record(id, linInput{op: "get"}, call, now(), linOutput{value: string(data)})
				return data, ver, true, nil
			case topo.IsErrType(err, topo.NoNode):
				record(id, linInput{op: "get"}, call, now(), linOutput{value: "\x00NoNode"})
				return nil, nil, false, nil
			case transient(err):
				return nil, nil, false, nil
			}
			return nil, nil, false, fmt.Errorf("Get: %w", err)
		}
		switch rngs[id].IntN(3) {
		case 0:
			_, _, _, err := get()
			return err
		case 1:
			call := now()
			_, err := c.Update(ctx, "lin/f", []byte(value), nil)
			switch {
			case err == nil:
				record(id, linInput{op: "put", value: value}, call, now(), linOutput{})
			case transient(err):
				record(id, linInput{op: "put", value: value}, call, math.MaxInt64, linOutput{unknown: true})
			default:
				return fmt.Errorf("Update: %w", err)
			}
		default:
			data, ver, ok, err := get()
			if !ok {
				return err
			}
			call := now()
			_, err = c.Update(ctx, "lin/f", []byte(value), ver)
			in := linInput{op: "cas", value: value, expected: string(data)}
			switch {
			case err == nil:
				record(id, in, call, now(), linOutput{ok: true})
			case topo.IsErrType(err, topo.BadVersion):
				record(id, in, call, now(), linOutput{ok: false})
			case transient(err):
				record(id, in, call, math.MaxInt64, linOutput{unknown: true})
			default:
				return fmt.Errorf("compare-and-set: %w", err)
			}
		}
		return nil
	})
	res := porcupine.CheckOperationsTimeout(registerModel, history, 30*time.Second)
	require.NotEqual(t, porcupine.Illegal, res, "the history of Get/Update/compare-and-set through linearizable-read Conns, under the store's fault, is not linearizable:\n%s", describeHistory(history))
}

// testReadYourWritesUnderFault: with the backend's default options, while
// the store suffers its fault, each connection writes its own file and
// reads it back: a Get after an acknowledged Update returns that value
// (or the value of one of the connection's own earlier writes whose outcome
// was unknown), never an older one, and no Get ever says NoNode for a file
// that exists.
func testReadYourWritesUnderFault(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	fs := s.faultStore()
	open := faultOpener(t, fs.Open)
	const clients, ops = 4, 1200
	conns := make([]topo.Conn, clients)
	for i := range conns {
		conns[i] = open()
		mustCreate(t, ctx, conns[i], fmt.Sprintf("ryw/c%d", i), "init")
	}
	unknown := make([]map[string]bool, clients)
	for i := range unknown {
		unknown[i] = map[string]bool{}
	}
	// getRetry reads p until the read does not fail transiently.
	getRetry := func(c topo.Conn, p string) ([]byte, error) {
		for {
			data, _, err := c.Get(ctx, p)
			if err == nil || !transient(err) {
				return data, err
			}
			if ctx.Err() != nil {
				return nil, err
			}
		}
	}
	faultRun(t, clients, ops, fs.Fault, func(id, k int) error {
		c := conns[id]
		own := fmt.Sprintf("ryw/c%d", id)
		value := fmt.Sprintf("c%d-%d", id, k)
		_, err := c.Update(ctx, own, []byte(value), nil)
		switch {
		case transient(err):
			unknown[id][value] = true
			return nil
		case err != nil:
			return fmt.Errorf("Update: %w", err)
		}
		data, err := getRetry(c, own)
		if err != nil {
			return fmt.Errorf("Get of its own file after an acknowledged Update: %w", err)
		}
		if got := string(data); got != value && !unknown[id][got] {
			return fmt.Errorf("Get of its own file returned %q after its Update of %q was acknowledged (a stale read)", got, value)
		}
		other := fmt.Sprintf("ryw/c%d", (id+1)%clients)
		if _, err := getRetry(c, other); err != nil {
			return fmt.Errorf("Get of another connection's file, which exists throughout: %w", err)
		}
		return nil
	})
}
