package test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// The atomicity check of transactions: clients move amounts between
// bankCounters counter files with multi-file transactions conditioned on
// the versions they read, and take snapshots (every counter read, or one
// List, validated by a single Txn of IfVersion checks). The sum of the
// counters is the same in every validated snapshot, and the history of
// transaction outcomes is checked with porcupine against a model of the
// counters. Each write stores a unique tag with the value, so a condition
// on the version read with tag x holds exactly when the counter still
// holds x. Plain reads only supply the inputs and are not part of the
// history: a stale read merely makes a transaction fail, so the check
// holds whatever the backend's read consistency.

const (
	bankCounters = 4
	bankInitial  = 100
)

// bankEntry is one counter's state: its value and the tag of the write
// that stored it.
type bankEntry struct {
	value int
	tag   string
}

// bankState is the model's state (comparable, as porcupine requires).
type bankState [bankCounters]bankEntry

// bankCond is one condition of a transaction: counter holds tag.
type bankCond struct {
	counter int
	tag     string
}

// bankInput is one transaction: its conditions, in op order, and its
// writes (counter -> new entry).
type bankInput struct {
	conds  []bankCond
	writes map[int]bankEntry
}

// bankOutput is a transaction's outcome.
type bankOutput struct {
	ok      bool
	failed  int  // !ok: the position in conds of the first failing condition
	unknown bool // the outcome is unknown (Unavailable)
}

var bankModel = porcupine.Model{
	Init: func() any {
		var s bankState
		for i := range s {
			s[i] = bankEntry{bankInitial, fmt.Sprintf("init%d", i)}
		}
		return s
	},
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(bankState), input.(bankInput), output.(bankOutput)
		first := -1 // the first condition that does not hold
		for i, c := range in.conds {
			if st[c.counter].tag != c.tag {
				first = i
				break
			}
		}
		apply := func() bankState {
			next := st
			for k, e := range in.writes {
				next[k] = e
			}
			return next
		}
		switch {
		case out.unknown:
			// Linearized at any point after its call: applied if its
			// conditions hold then (an unknown op returns at infinity, so
			// "never applied" is linearizing it last).
			if first < 0 {
				return true, apply()
			}
			return true, st
		case out.ok:
			return first < 0, apply()
		default:
			return first == out.failed, st
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(bankInput), output.(bankOutput)
		var b strings.Builder
		b.WriteString("txn(")
		for _, c := range in.conds {
			fmt.Fprintf(&b, "c%d=%s ", c.counter, c.tag)
		}
		for k, e := range in.writes {
			fmt.Fprintf(&b, "c%d:=%d/%s ", k, e.value, e.tag)
		}
		b.WriteString(") -> ")
		switch {
		case out.unknown:
			b.WriteString("unknown")
		case out.ok:
			b.WriteString("ok")
		default:
			fmt.Fprintf(&b, "condition %d failed", out.failed)
		}
		return b.String()
	},
	DescribeState: func(state any) string { return fmt.Sprint(state.(bankState)) },
}

// bankPath is counter i's file.
func bankPath(i int) string { return fmt.Sprintf("bank/c%d", i) }

func bankEncode(e bankEntry) []byte { return []byte(fmt.Sprintf("%d:%s", e.value, e.tag)) }

func bankDecode(data []byte) (bankEntry, error) {
	v, tag, ok := strings.Cut(string(data), ":")
	n, err := strconv.Atoi(v)
	if !ok || err != nil {
		return bankEntry{}, fmt.Errorf("a counter holds %q, which no client wrote", data)
	}
	return bankEntry{n, tag}, nil
}

// bank runs the transfer workload through conns.
type bank struct {
	t     *testing.T
	ctx   context.Context
	begin time.Time

	mu        sync.Mutex
	history   []porcupine.Operation
	snapshots int // validated snapshots
	transfers int // transfers that committed
}

func newBank(t *testing.T, ctx context.Context, c topo.Conn) *bank {
	for i := range bankCounters {
		e := bankEntry{bankInitial, fmt.Sprintf("init%d", i)}
		require.NoError(t, retryTransient(ctx, func() error {
			_, err := c.Create(ctx, bankPath(i), bankEncode(e))
			if topo.IsErrType(err, topo.NodeExists) {
				return nil
			}
			return err
		}))
	}
	return &bank{t: t, ctx: ctx, begin: time.Now()}
}

func (b *bank) now() int64 { return int64(time.Since(b.begin)) }

// txn runs ops through c, where condOf[i] is the counter whose tag op i
// checks (-1: none), and records the outcome. It returns whether the
// transaction committed; an error is a contract violation.
func (b *bank) txn(c topo.Conn, id int, ops []topo.TxnOp, condOf []int, in bankInput) (bool, error) {
	call := b.now()
	_, err := c.Txn(b.ctx, ops...)
	ret := b.now()
	var out bankOutput
	var te *topo.TxnError
	switch {
	case err == nil:
		out.ok = true
	case transient(err):
		out.unknown = true
		ret = math.MaxInt64
	case errors.As(err, &te) && (topo.IsErrType(err, topo.BadVersion) || topo.IsErrType(err, topo.NoNode)):
		if te.Index < 0 || te.Index >= len(ops) || condOf[te.Index] < 0 {
			return false, fmt.Errorf("Txn failed naming op %d, which has no condition: %w", te.Index, err)
		}
		if topo.IsErrType(err, topo.NoNode) {
			return false, fmt.Errorf("Txn reports a counter absent (they always exist): %w", err)
		}
		pos := 0
		for i := range te.Index {
			if condOf[i] >= 0 {
				pos++
			}
		}
		out.failed = pos
	default:
		return false, fmt.Errorf("Txn: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.history = append(b.history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: ret})
	return out.ok, nil
}

// read reads counter i through c; ok is false (with a nil error) when the
// read failed transiently.
func (b *bank) read(c topo.Conn, i int) (bankEntry, topo.Version, bool, error) {
	data, v, err := c.Get(b.ctx, bankPath(i))
	switch {
	case err == nil:
		e, err := bankDecode(data)
		return e, v, err == nil, err
	case transient(err):
		return bankEntry{}, nil, false, nil
	}
	return bankEntry{}, nil, false, fmt.Errorf("Get(%s): %w", bankPath(i), err)
}

// transfer moves an amount between two counters, with one of three shapes
// of conditions.
func (b *bank) transfer(c topo.Conn, id, k int, rng *rand.Rand) error {
	from := rng.IntN(bankCounters)
	to := (from + 1 + rng.IntN(bankCounters-1)) % bankCounters
	ef, vf, ok, err := b.read(c, from)
	if !ok {
		return err
	}
	runtime.Gosched() // interleave the clients even on a fast store
	et, vt, ok, err := b.read(c, to)
	if !ok {
		return err
	}
	amount := 1 + rng.IntN(10)
	nf := bankEntry{ef.value - amount, fmt.Sprintf("c%d-%d-f", id, k)}
	nt := bankEntry{et.value + amount, fmt.Sprintf("c%d-%d-t", id, k)}
	in := bankInput{writes: map[int]bankEntry{from: nf, to: nt}}
	var ops []topo.TxnOp
	var condOf []int
	switch rng.IntN(3) {
	case 0: // IfVersion of both, then unconditional writes
		ops = []topo.TxnOp{topo.IfVersion(bankPath(from), vf), topo.IfVersion(bankPath(to), vt),
			topo.UpdateOp(bankPath(from), bankEncode(nf), nil), topo.UpdateOp(bankPath(to), bankEncode(nt), nil)}
		condOf = []int{from, to, -1, -1}
		in.conds = []bankCond{{from, ef.tag}, {to, et.tag}}
	case 1: // two compare-and-set writes
		ops = []topo.TxnOp{topo.UpdateOp(bankPath(from), bankEncode(nf), vf), topo.UpdateOp(bankPath(to), bankEncode(nt), vt)}
		condOf = []int{from, to}
		in.conds = []bankCond{{from, ef.tag}, {to, et.tag}}
	default: // a condition on one, a compare-and-set of the other, an unconditional write
		ops = []topo.TxnOp{topo.IfVersion(bankPath(to), vt), topo.UpdateOp(bankPath(from), bankEncode(nf), vf),
			topo.UpdateOp(bankPath(to), bankEncode(nt), nil)}
		condOf = []int{to, from, -1}
		in.conds = []bankCond{{to, et.tag}, {from, ef.tag}}
	}
	committed, err := b.txn(c, id, ops, condOf, in)
	if committed {
		b.mu.Lock()
		b.transfers++
		b.mu.Unlock()
	}
	return err
}

// snapshot reads every counter (one Get each, or one List) and validates
// the reads with one Txn of IfVersion checks; a validated snapshot must
// sum to the initial total.
func (b *bank) snapshot(c topo.Conn, id int, useList bool) error {
	entries := make([]bankEntry, bankCounters)
	versions := make([]topo.Version, bankCounters)
	if useList {
		kvs, err := c.List(b.ctx, "bank/")
		if transient(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("List(bank/): %w", err)
		}
		if len(kvs) != bankCounters {
			return fmt.Errorf("List(bank/) returned %d counters, want %d: %q", len(kvs), bankCounters, kvPaths(kvs))
		}
		for i, kv := range kvs {
			if kv.Path != bankPath(i) {
				return fmt.Errorf("List(bank/) returned %q", kvPaths(kvs))
			}
			e, err := bankDecode(kv.Value)
			if err != nil {
				return err
			}
			entries[i], versions[i] = e, kv.Version
		}
	} else {
		for i := range bankCounters {
			e, v, ok, err := b.read(c, i)
			if !ok {
				return err
			}
			entries[i], versions[i] = e, v
			runtime.Gosched()
		}
	}
	ops := make([]topo.TxnOp, bankCounters)
	condOf := make([]int, bankCounters)
	in := bankInput{}
	for i := range bankCounters {
		ops[i] = topo.IfVersion(bankPath(i), versions[i])
		condOf[i] = i
		in.conds = append(in.conds, bankCond{i, entries[i].tag})
	}
	valid, err := b.txn(c, id, ops, condOf, in)
	if err != nil || !valid {
		return err
	}
	sum := 0
	for _, e := range entries {
		sum += e.value
	}
	if sum != bankCounters*bankInitial {
		return fmt.Errorf("a snapshot validated by a Txn of IfVersion checks sums to %d, want %d: %v (read by List: %v)",
			sum, bankCounters*bankInitial, entries, useList)
	}
	b.mu.Lock()
	b.snapshots++
	b.mu.Unlock()
	return nil
}

// work is one client's k-th operation: mostly transfers, some snapshots.
func (b *bank) work(c topo.Conn, id, k int, rng *rand.Rand) error {
	switch n := rng.IntN(8); {
	case n < 5:
		return b.transfer(c, id, k, rng)
	default:
		return b.snapshot(c, id, n == 7)
	}
}

// check checks the history with porcupine, and the final state: every
// counter readable, summing to the initial total.
func (b *bank) check(c topo.Conn, what string) {
	t := b.t
	t.Helper()
	b.mu.Lock()
	history := slices.Clone(b.history)
	transfers, snapshots := b.transfers, b.snapshots
	b.mu.Unlock()
	require.Positivef(t, transfers, "%s: no transfer committed", what)
	require.Positivef(t, snapshots, "%s: no snapshot was validated", what)
	var sum int
	require.NoError(t, retryTransient(b.ctx, func() error {
		sum = 0
		for i := range bankCounters {
			data, _, err := c.Get(b.ctx, bankPath(i))
			if err != nil {
				return err
			}
			e, err := bankDecode(data)
			if err != nil {
				return err
			}
			sum += e.value
		}
		return nil
	}))
	require.Equalf(t, bankCounters*bankInitial, sum, "%s: the counters' final sum", what)
	res := porcupine.CheckOperationsTimeout(bankModel, history, 60*time.Second)
	require.NotEqualf(t, porcupine.Illegal, res, "%s: the history of transfer and snapshot transactions is not linearizable (a transaction was not atomic, or a condition was not checked):\n%s",
		what, describeBank(history))
}

func describeBank(history []porcupine.Operation) string {
	var b strings.Builder
	for _, op := range history {
		fmt.Fprintf(&b, "client %d [%d, %d] %s\n", op.ClientId, op.Call, op.Return, bankModel.DescribeOperation(op.Input, op.Output))
	}
	return b.String()
}

// testTxnAtomicity: several clients, each on its own Conn, run transfers
// and snapshots concurrently (see bank).
func testTxnAtomicity(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	const clients, opsPerClient = 5, 40
	b := newBank(t, ctx, s.conn())
	errs := make(chan error, clients)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for id := range clients {
		c := s.conn()
		wg.Go(func() {
			<-start
			rng := rand.New(rand.NewPCG(uint64(id), 11))
			for k := range opsPerClient {
				if err := b.work(c, id, k, rng); err != nil {
					errs <- fmt.Errorf("client %d, operation %d: %w", id, k, err)
					return
				}
			}
		})
	}
	close(start)
	requireNoWorkerErrs(t, &wg, errs)
	b.check(s.conn(), "concurrent transfers")
}

// testTxnAtomicityUnderFault: the transfers and snapshots of
// testTxnAtomicity on the backend's FaultyStore while it suffers its
// fault; transactions that fail transiently have unknown outcomes.
func testTxnAtomicityUnderFault(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	fs := s.faultStore()
	open := faultOpener(t, fs.Open)
	const clients, ops = 5, 300
	b := newBank(t, ctx, open())
	conns := make([]topo.Conn, clients)
	rngs := make([]*rand.Rand, clients)
	for i := range conns {
		conns[i] = open()
		rngs[i] = rand.New(rand.NewPCG(uint64(i), 13))
	}
	faultRun(t, clients, ops, fs.Fault, func(id, k int) error {
		return b.work(conns[id], id, k, rngs[id])
	})
	b.check(open(), "concurrent transfers across the store's fault")
}
