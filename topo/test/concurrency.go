package test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// testConcurrentCAS: writers on separate connections race a compare-and-set
// on the same version, round after round: exactly one wins each round, the
// others get BadVersion, and the final value carries every winner's write.
func testConcurrentCAS(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	const writers, rounds = 8, 4
	conns := s.conns(writers)
	mustCreate(t, ctx, conns[0], "cas/f", "")

	want := ""
	for r := range rounds {
		_, ver, err := conns[0].Get(ctx, "cas/f")
		require.NoError(t, err)
		start := make(chan struct{})
		errs := make([]error, writers)
		versions := make([]topo.Version, writers)
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				<-start
				versions[i], errs[i] = conns[i].Update(ctx, "cas/f", []byte(fmt.Sprintf("%sr%dw%d;", want, r, i)), ver)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equalf(t, -1, winner, "round %d: writers %d and %d both won a compare-and-set on the same version", r, winner, i)
				winner = i
				continue
			}
			requireCode(t, err, topo.BadVersion, fmt.Sprintf("round %d: losing writer %d", r, i))
		}
		require.NotEqualf(t, -1, winner, "round %d: no writer won", r)
		want += fmt.Sprintf("r%dw%d;", r, winner)
		requireFile(t, ctx, conns[0], "cas/f", want, versions[winner])
	}
}

// testConcurrentCounter: connections increment a counter with
// read-modify-compare-and-set retry loops; no increment is lost.
func testConcurrentCounter(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	const workers, increments = 4, 5
	conns := s.conns(workers)
	mustCreate(t, ctx, conns[0], "counter", "0")

	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			c := conns[i]
			for range increments {
				for {
					data, ver, err := c.Get(ctx, "counter")
					if err != nil {
						errs <- err
						return
					}
					n, err := strconv.Atoi(string(data))
					if err != nil {
						errs <- err
						return
					}
					_, err = c.Update(ctx, "counter", []byte(strconv.Itoa(n+1)), ver)
					if err == nil {
						break
					}
					if !topo.IsErrType(err, topo.BadVersion) {
						errs <- fmt.Errorf("compare-and-set failed with something other than BadVersion: %w", err)
						return
					}
				}
			}
		})
	}
	requireNoWorkerErrs(t, &wg, errs)
	requireFile(t, ctx, conns[0], "counter", strconv.Itoa(workers*increments), nil)
}

// testLockMutualExclusion: goroutines on several connections (two per
// connection) loop Lock, a non-atomic read-increment-write of a file, and
// Unlock. The counter must equal the number of critical sections, and no
// two critical sections may overlap.
func testLockMutualExclusion(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	const conns, perConn, iterations = 3, 2, 3
	mustCreate(t, ctx, s.conn(), "mutex/counter", "0")

	var inside atomic.Bool
	var overlaps atomic.Int32
	errs := make(chan error, conns*perConn)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range conns {
		c := s.conn()
		for j := range perConn {
			wg.Go(func() {
				<-start
				for k := range iterations {
					holder := fmt.Sprintf("conn %d goroutine %d iteration %d", i, j, k)
					l, err := c.Lock(ctx, "mutex", holder)
					if err != nil {
						errs <- fmt.Errorf("%s: Lock: %w", holder, err)
						return
					}
					if inside.Swap(true) {
						overlaps.Add(1)
					}
					data, _, err := c.Get(ctx, "mutex/counter")
					if err == nil {
						var n int
						n, err = strconv.Atoi(string(data))
						// Give other goroutines every chance to enter too.
						runtime.Gosched()
						if err == nil {
							_, err = c.Update(ctx, "mutex/counter", []byte(strconv.Itoa(n+1)), nil)
						}
					}
					if !inside.Swap(false) {
						overlaps.Add(1)
					}
					if uerr := l.Unlock(ctx); err == nil && uerr != nil {
						err = fmt.Errorf("Unlock: %w", uerr)
					}
					if err != nil {
						errs <- fmt.Errorf("%s: %w", holder, err)
						return
					}
				}
			})
		}
	}
	close(start)
	requireNoWorkerErrs(t, &wg, errs)
	require.Zero(t, overlaps.Load(), "two lock holders were in the critical section at once")
	requireFile(t, ctx, s.conn(), "mutex/counter", strconv.Itoa(conns*perConn*iterations), nil)
}

// A linearizability check of one file under concurrent Get, unconditional
// Update and compare-and-set, with porcupine. Every write stores a unique
// value, so a compare-and-set on the version read together with value x
// succeeds exactly when the file still holds x; the model is a register.
type linInput struct {
	op       string // "get", "put" or "cas"
	value    string // put, cas: the value written
	expected string // cas: the value read with the version used
}

type linOutput struct {
	value   string // get: the value read
	ok      bool   // cas: whether it won
	unknown bool   // put, cas: failed transiently, so it may or may not have happened
}

var registerModel = porcupine.Model{
	Init: func() any { return "init" },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(string), input.(linInput), output.(linOutput)
		switch in.op {
		case "get":
			return out.value == st, st
		case "put":
			return true, in.value
		default: // cas
			if out.unknown {
				if st == in.expected {
					return true, in.value
				}
				return true, st
			}
			if out.ok {
				return st == in.expected, in.value
			}
			return st != in.expected, st
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(linInput), output.(linOutput)
		switch in.op {
		case "get":
			return fmt.Sprintf("get() -> %q", out.value)
		case "put":
			return fmt.Sprintf("put(%q)", in.value)
		default:
			if out.unknown {
				return fmt.Sprintf("cas(%q -> %q) -> unknown", in.expected, in.value)
			}
			return fmt.Sprintf("cas(%q -> %q) -> %v", in.expected, in.value, out.ok)
		}
	},
}

// testLinearizable records a small concurrent history of Get, Update and
// compare-and-set on one file from several connections and checks it with
// porcupine. It also checks that every Get reports the version that the
// write of the value it read returned. It assumes reads are linearizable,
// as they are on etcd (default), a single Consul server and a standalone
// ZooKeeper; against a ZooKeeper ensemble, whose reads are only
// sequentially consistent unless the backend syncs first, it may fail.
func testLinearizable(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	const clients, opsPerClient = 4, 16
	initV := mustCreate(t, ctx, s.conn(), "lin/f", "init")

	begin := time.Now()
	var mu sync.Mutex
	var history []porcupine.Operation
	writeVersions := map[string]string{"init": initV.String()}
	type seen struct{ value, version string }
	var reads []seen
	errs := make(chan error, clients)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for id := range clients {
		c := s.conn()
		wg.Go(func() {
			<-start
			rng := rand.New(rand.NewPCG(uint64(id), 42))
			record := func(in linInput, call int64, out linOutput) {
				mu.Lock()
				defer mu.Unlock()
				history = append(history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: int64(time.Since(begin))})
			}
			// get is a recorded Get; a failure goes to errs and ok is false.
			get := func() (data []byte, ver topo.Version, ok bool) {
				call := int64(time.Since(begin))
				data, ver, err := c.Get(ctx, "lin/f")
				if err != nil {
					errs <- fmt.Errorf("Get: %w", err)
					return nil, nil, false
				}
				record(linInput{op: "get"}, call, linOutput{value: string(data)})
				return data, ver, true
			}
			for k := range opsPerClient {
				runtime.Gosched() // interleave the clients even on a fast store
				value := fmt.Sprintf("c%d-%d", id, k)
				switch rng.IntN(3) {
				case 0:
					data, ver, ok := get()
					if !ok {
						return
					}
					mu.Lock()
					reads = append(reads, seen{string(data), ver.String()})
					mu.Unlock()
				case 1:
					call := int64(time.Since(begin))
					ver, err := c.Update(ctx, "lin/f", []byte(value), nil)
					if err != nil {
						errs <- fmt.Errorf("Update: %w", err)
						return
					}
					record(linInput{op: "put", value: value}, call, linOutput{})
					mu.Lock()
					writeVersions[value] = ver.String()
					mu.Unlock()
				default:
					data, ver, ok := get()
					if !ok {
						return
					}
					call := int64(time.Since(begin))
					nv, err := c.Update(ctx, "lin/f", []byte(value), ver)
					switch {
					case err == nil:
						record(linInput{op: "cas", value: value, expected: string(data)}, call, linOutput{ok: true})
						mu.Lock()
						writeVersions[value] = nv.String()
						mu.Unlock()
					case topo.IsErrType(err, topo.BadVersion):
						record(linInput{op: "cas", value: value, expected: string(data)}, call, linOutput{ok: false})
					default:
						errs <- fmt.Errorf("compare-and-set: %w", err)
						return
					}
				}
			}
		})
	}
	close(start)
	requireNoWorkerErrs(t, &wg, errs)
	res := porcupine.CheckOperationsTimeout(registerModel, history, 20*time.Second)
	require.NotEqual(t, porcupine.Illegal, res, "the history of Get/Update/compare-and-set on one file is not linearizable:\n%s", describeHistory(history))
	for _, r := range reads {
		wv, ok := writeVersions[r.value]
		require.Truef(t, ok, "Get returned %q, which nobody wrote", r.value)
		require.Equalf(t, wv, r.version, "Get returned %q with a version other than the one its write returned", r.value)
	}
}

func describeHistory(history []porcupine.Operation) string {
	out := ""
	for _, op := range history {
		out += fmt.Sprintf("client %d [%d, %d] %s\n", op.ClientId, op.Call, op.Return, registerModel.DescribeOperation(op.Input, op.Output))
	}
	return out
}
