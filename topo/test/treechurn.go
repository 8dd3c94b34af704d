package test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// The tree churn check: clients create, update (with and without a
// version), delete (with and without a version) and transact on files
// that are each other's parents and children, so that every write may
// create or empty directories another client's write is using. Every
// outcome is checked against a model of the files (porcupine), and every
// value anyone reads (Get, List, Watch, WatchRecursive) must come with the
// version its write returned: a write is never lost or misattributed,
// and no emptied directory is left to be seen as a file (see churnKeep
// for the window ZooKeeper has).

// churnPaths are the files of the churn: a file with a file below it with
// a file below it, a sibling below the top one, and one in another
// directory.
var churnPaths = [...]string{"tc/a", "tc/a/b", "tc/a/b/c", "tc/a/x", "tc/d/e"}

// churnKeep are files that stay through the churn, one in each of
// tc/a and tc/a/b, so that those two are never emptied: on ZooKeeper an
// emptied directory reads as an empty file for about a round trip
// (docs/layout-zookeeper.md, "Deleting the last file" and "Directories
// left empty"), which could be read, written or deleted as one. tc/d is
// emptied: List and WatchRecursive may show it as an empty file during
// the churn (no client writes empty contents), List never once every
// write returned, and the WatchRecursive's files converge on List's.
var churnKeep = [...]string{"tc/a/keep", "tc/a/b/keep"}

// churnEntry is one file's state: its contents and version ("" when
// absent).
type churnEntry struct{ value, version string }

// churnState is the model's state (comparable, as porcupine requires).
type churnState [len(churnPaths)]churnEntry

// churnStep is one op of a write or transaction.
type churnStep struct {
	kind    topo.TxnOpKind
	path    int
	value   string // CreateOp, UpdateOp
	version string // "" for none
}

// churnInput is a Get of path (steps nil), or a plain write (one step,
// plain) or a transaction.
type churnInput struct {
	path  int
	plain bool
	steps []churnStep
}

// churnOutput is the outcome: a Get's entry, or a write's versions or the
// failing step and its code.
type churnOutput struct {
	got      churnEntry
	ok       bool
	failed   int
	code     topo.ErrorCode
	versions []string
}

// churnFails returns the code step fails with in st, or 0 when it holds.
func churnFails(step churnStep, st churnState) topo.ErrorCode {
	e := st[step.path]
	switch step.kind {
	case topo.TxnCreate:
		if e.value != "" {
			return topo.NodeExists
		}
	case topo.TxnIfAbsent:
		if e.value != "" {
			return topo.NodeExists
		}
	case topo.TxnIfPresent:
		if e.value == "" {
			return topo.NoNode
		}
	default: // IfVersion, UpdateOp, DeleteOp
		if step.version == "" && step.kind == topo.TxnUpdate {
			return 0
		}
		if e.value == "" {
			return topo.NoNode
		}
		if step.version != "" && step.version != e.version {
			return topo.BadVersion
		}
	}
	return 0
}

var churnModel = porcupine.Model{
	Init: func() any { return churnState{} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(churnState), input.(churnInput), output.(churnOutput)
		if in.steps == nil {
			return st[in.path] == out.got, st
		}
		if out.code == topo.ResourceExhausted { // refused, nothing written
			return true, st
		}
		if !out.ok {
			// The op named fails, with that code, in the state the call
			// is linearized at. That it is the first failing op is not
			// checked here (Txn/Failures, Txn/Atomicity do): zk2topo
			// finds the first by leaving a failing op out of the next
			// multis, and may name an op whose failure an earlier multi
			// saw while a later one saw an op before it pass.
			return out.failed >= 0 && out.failed < len(in.steps) && churnFails(in.steps[out.failed], st) == out.code, st
		}
		for _, step := range in.steps {
			if churnFails(step, st) != 0 {
				return false, st
			}
		}
		next := st
		for i, step := range in.steps {
			switch step.kind {
			case topo.TxnCreate, topo.TxnUpdate:
				next[step.path] = churnEntry{step.value, out.versions[i]}
			case topo.TxnDelete:
				next[step.path] = churnEntry{}
			}
		}
		return true, next
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(churnInput), output.(churnOutput)
		if in.steps == nil {
			return fmt.Sprintf("get(%s) -> %q@%s", churnPaths[in.path], out.got.value, out.got.version)
		}
		var b strings.Builder
		if in.plain {
			b.WriteString("plain(")
		} else {
			b.WriteString("txn(")
		}
		for _, s := range in.steps {
			fmt.Fprintf(&b, "%s %s %q @%q; ", s.kind, churnPaths[s.path], s.value, s.version)
		}
		if out.ok {
			fmt.Fprintf(&b, ") -> ok %v", out.versions)
		} else {
			fmt.Fprintf(&b, ") -> op %d: %v", out.failed, out.code)
		}
		return b.String()
	},
	DescribeState: func(state any) string { return fmt.Sprint(state.(churnState)) },
}

// churnIndex returns the index of path in churnPaths, or -1.
func churnIndex(path string) int { return slices.Index(churnPaths[:], path) }

// treeChurn records the history and every (path, value, version) seen.
type treeChurn struct {
	ctx     context.Context
	begin   time.Time
	mu      sync.Mutex
	history []porcupine.Operation
	written map[string]churnEntry // value -> {path, version} of its write
	obs     []churnObs
	wrote   chan struct{} // signalled after every successful write
}

// churnObs is a value observed with a version, and where.
type churnObs struct {
	path, value, version, where string
}

func (h *treeChurn) now() int64 { return int64(time.Since(h.begin)) }

func (h *treeChurn) record(id int, in churnInput, call int64, out churnOutput) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.history = append(h.history, porcupine.Operation{ClientId: id, Input: in, Call: call, Output: out, Return: h.now()})
}

func (h *treeChurn) observe(o churnObs) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.obs = append(h.obs, o)
}

// get is a recorded Get of churnPaths[i].
func (h *treeChurn) get(c topo.Conn, id, i int) (churnEntry, topo.Version, error) {
	ctx := h.ctx
	call := h.now()
	data, v, err := c.Get(ctx, churnPaths[i])
	var e churnEntry
	switch {
	case err == nil:
		e = churnEntry{string(data), v.String()}
		h.observe(churnObs{churnPaths[i], e.value, e.version, "Get"})
	case topo.IsErrType(err, topo.NoNode):
	default:
		return e, nil, fmt.Errorf("Get(%s): %w", churnPaths[i], err)
	}
	h.record(id, churnInput{path: i}, call, churnOutput{got: e})
	return e, v, nil
}

// write runs ops (plain: the one op as Create, Update or Delete) and
// records the outcome; an unexpected error is returned.
func (h *treeChurn) write(c topo.Conn, id int, plain bool, ops []topo.TxnOp, steps []churnStep) error {
	ctx := h.ctx
	call := h.now()
	var vs []topo.Version
	var err error
	if plain {
		op := ops[0]
		var v topo.Version
		switch op.Kind {
		case topo.TxnCreate:
			v, err = c.Create(ctx, op.Path, op.Contents)
		case topo.TxnUpdate:
			v, err = c.Update(ctx, op.Path, op.Contents, op.Version)
		case topo.TxnDelete:
			err = c.Delete(ctx, op.Path, op.Version)
		}
		vs = []topo.Version{v}
	} else {
		vs, err = c.Txn(ctx, ops...)
	}
	out := churnOutput{ok: err == nil}
	code := topo.CodeOf(err)
	var te *topo.TxnError
	switch {
	case err == nil:
		out.versions = make([]string, len(steps))
		for i, s := range steps {
			if s.kind == topo.TxnCreate || s.kind == topo.TxnUpdate {
				if vs[i] == nil {
					return fmt.Errorf("%s of %s returned no version", s.kind, churnPaths[s.path])
				}
				out.versions[i] = vs[i].String()
				h.mu.Lock()
				h.written[s.value] = churnEntry{churnPaths[s.path], out.versions[i]}
				h.mu.Unlock()
			}
		}
		select {
		case h.wrote <- struct{}{}:
		default:
		}
	case code == topo.ResourceExhausted:
		out.code = code
	case code != topo.NodeExists && code != topo.NoNode && code != topo.BadVersion:
		return fmt.Errorf("%s: unexpected error: %w", churnModel.DescribeOperation(churnInput{plain: plain, steps: steps}, out), err)
	case plain:
		out.code = code
	case errors.As(err, &te):
		out.failed, out.code = te.Index, code
	default:
		return fmt.Errorf("Txn failed without a *TxnError: %w", err)
	}
	h.record(id, churnInput{plain: plain, steps: steps}, call, out)
	return nil
}

// testTreeChurn: see churn above. Clients on their own Conns run random
// creates, updates, deletes and transactions on files nested in each
// other while a WatchRecursive of the tree and a Watch of the middle file
// run on another Conn.
func testTreeChurn(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	const clients, opsPerClient = 4, 60
	h := &treeChurn{ctx: ctx, begin: time.Now(), written: map[string]churnEntry{}, wrote: make(chan struct{}, 1)}

	wc := s.conn()
	for _, p := range churnKeep {
		mustCreate(t, ctx, wc, p, "keep")
	}

	// The watchers.
	wctx, stopWatch := context.WithCancel(ctx)
	cur, rch, err := wc.WatchRecursive(wctx, "tc/")
	require.NoError(t, err)
	treeState := map[string]churnEntry{}
	var treeMu sync.Mutex
	for _, wd := range cur {
		treeState[wd.Path] = churnEntry{string(wd.Contents), wd.Version.String()}
	}
	var wwg sync.WaitGroup
	wwg.Go(func() {
		for wd := range rch {
			if wd.Err != nil {
				if topo.IsErrType(wd.Err, topo.NoNode) {
					treeMu.Lock()
					delete(treeState, wd.Path)
					treeMu.Unlock()
				}
				continue
			}
			h.observe(churnObs{wd.Path, string(wd.Contents), wd.Version.String(), "WatchRecursive"})
			treeMu.Lock()
			treeState[wd.Path] = churnEntry{string(wd.Contents), wd.Version.String()}
			treeMu.Unlock()
		}
	})
	wwg.Go(func() { // a Watch of tc/a/b, again after each delete
		for wctx.Err() == nil {
			cur, ch, err := wc.Watch(wctx, "tc/a/b")
			if err != nil {
				select { // absent: watch again after the next write
				case <-h.wrote:
				case <-wctx.Done():
				}
				continue
			}
			h.observe(churnObs{"tc/a/b", string(cur.Contents), cur.Version.String(), "Watch"})
			for wd := range ch {
				if wd.Err == nil {
					h.observe(churnObs{"tc/a/b", string(wd.Contents), wd.Version.String(), "Watch"})
				}
			}
		}
	})

	errs := make(chan error, clients)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for id := range clients {
		c := s.conn()
		wg.Go(func() {
			<-start
			rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
			n := 0
			value := func() string { n++; return fmt.Sprintf("c%d-%d", id, n) }
			var seenVersions []topo.Version
			for range opsPerClient {
				runtime.Gosched()
				i := rng.IntN(len(churnPaths))
				var err error
				switch k := rng.IntN(8); k {
				case 0:
					_, _, err = h.get(c, id, i)
				case 1: // List: every file with its write's version
					var kvs []topo.KVInfo
					kvs, err = c.List(ctx, "tc/")
					if topo.IsErrType(err, topo.NoNode) {
						err = nil
					}
					for _, kv := range kvs {
						h.observe(churnObs{kv.Path, string(kv.Value), kv.Version.String(), "List"})
					}
				case 2:
					v := value()
					err = h.write(c, id, true, []topo.TxnOp{topo.CreateOp(churnPaths[i], []byte(v))}, []churnStep{{kind: topo.TxnCreate, path: i, value: v}})
				case 3:
					v := value()
					err = h.write(c, id, true, []topo.TxnOp{topo.UpdateOp(churnPaths[i], []byte(v), nil)}, []churnStep{{kind: topo.TxnUpdate, path: i, value: v}})
				case 4, 5: // compare-and-set update or delete at the version read
					var ver topo.Version
					if _, ver, err = h.get(c, id, i); err != nil || ver == nil {
						break
					}
					seenVersions = append(seenVersions, ver)
					if k == 4 {
						v := value()
						err = h.write(c, id, true, []topo.TxnOp{topo.UpdateOp(churnPaths[i], []byte(v), ver)}, []churnStep{{kind: topo.TxnUpdate, path: i, value: v, version: ver.String()}})
					} else {
						err = h.write(c, id, true, []topo.TxnOp{topo.DeleteOp(churnPaths[i], ver)}, []churnStep{{kind: topo.TxnDelete, path: i, version: ver.String()}})
					}
				case 6:
					err = h.write(c, id, true, []topo.TxnOp{topo.DeleteOp(churnPaths[i], nil)}, []churnStep{{kind: topo.TxnDelete, path: i}})
				default: // a transaction of two or three ops on distinct files
					perm := rng.Perm(len(churnPaths))[:2+rng.IntN(2)]
					var ops []topo.TxnOp
					var steps []churnStep
					for _, j := range perm {
						var ver topo.Version
						if rng.IntN(2) == 0 {
							if _, ver, err = h.get(c, id, j); err != nil {
								break
							}
						} else if len(seenVersions) > 0 {
							ver = seenVersions[rng.IntN(len(seenVersions))]
						}
						if ver != nil {
							seenVersions = append(seenVersions, ver)
						}
						p := churnPaths[j]
						switch r := rng.IntN(7); {
						case r == 0:
							ops, steps = append(ops, topo.IfAbsent(p)), append(steps, churnStep{kind: topo.TxnIfAbsent, path: j})
						case r == 1:
							ops, steps = append(ops, topo.IfPresent(p)), append(steps, churnStep{kind: topo.TxnIfPresent, path: j})
						case r == 2 && ver != nil:
							ops, steps = append(ops, topo.IfVersion(p, ver)), append(steps, churnStep{kind: topo.TxnIfVersion, path: j, version: ver.String()})
						case r == 3:
							v := value()
							ops, steps = append(ops, topo.CreateOp(p, []byte(v))), append(steps, churnStep{kind: topo.TxnCreate, path: j, value: v})
						case r == 4:
							v := value()
							var vs string
							if ver != nil && rng.IntN(2) == 0 {
								vs = ver.String()
							} else {
								ver = nil
							}
							ops, steps = append(ops, topo.UpdateOp(p, []byte(v), ver)), append(steps, churnStep{kind: topo.TxnUpdate, path: j, value: v, version: vs})
						default:
							var vs string
							if ver != nil && rng.IntN(2) == 0 {
								vs = ver.String()
							} else {
								ver = nil
							}
							ops, steps = append(ops, topo.DeleteOp(p, ver)), append(steps, churnStep{kind: topo.TxnDelete, path: j, version: vs})
						}
					}
					if err == nil {
						err = h.write(c, id, false, ops, steps)
					}
				}
				if err != nil {
					errs <- fmt.Errorf("client %d: %w", id, err)
					return
				}
			}
		})
	}
	close(start)
	requireNoWorkerErrs(t, &wg, errs)

	// The final state, read after every write returned.
	c := s.conn()
	for i := range churnPaths {
		_, _, err := h.get(c, 0, i)
		require.NoError(t, err)
	}
	h.mu.Lock()
	t.Logf("%d operations, %d values written, %d observations", len(h.history), len(h.written), len(h.obs))
	h.mu.Unlock()
	res, info := porcupine.CheckOperationsVerbose(churnModel, h.history, 30*time.Second)
	if res == porcupine.Illegal {
		require.Failf(t, "the history of writes and reads of nested files is not linearizable", "%s", churnExplain(h.history, info))
	}

	// Every file of the final List, and the WatchRecursive's state once
	// it has caught up, are the last writes.
	final := map[string]churnEntry{}
	kvs, err := c.List(ctx, "tc/")
	if !topo.IsErrType(err, topo.NoNode) {
		require.NoError(t, err)
	}
	for _, kv := range kvs {
		final[kv.Path] = churnEntry{string(kv.Value), kv.Version.String()}
		h.observe(churnObs{kv.Path, string(kv.Value), kv.Version.String(), "final List"})
	}
	require.Eventuallyf(t, func() bool {
		treeMu.Lock()
		defer treeMu.Unlock()
		return fmt.Sprint(treeState) == fmt.Sprint(final)
	}, longWait, poll, "the WatchRecursive's files never became the final List's %v", final)
	stopWatch()
	wwg.Wait()

	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.obs {
		if o.path == "tc/d" && o.value == "" && (o.where == "List" || o.where == "WatchRecursive") {
			continue // see churnKeep
		}
		if slices.Contains(churnKeep[:], o.path) {
			require.Equalf(t, "keep", o.value, "%s returned %s", o.where, o.path)
			continue
		}
		w, ok := h.written[o.value]
		require.Truef(t, ok, "%s returned %q for %s, which no successful write stored (an emptied directory seen as a file, or a lost write's value)", o.where, o.value, o.path)
		require.Equalf(t, churnEntry{o.path, o.version}, w, "%s returned %q for %s at version %s; its write stored it at %s version %s", o.where, o.value, o.path, o.version, w.value, w.version)
	}
	for p := range final {
		require.Truef(t, churnIndex(p) >= 0 || slices.Contains(churnKeep[:], p), "the final List shows %s, which no client wrote", p)
	}
	for _, p := range churnKeep {
		require.Containsf(t, final, p, "the final List lost %s, which no client deleted", p)
	}
}

// churnExplain describes the longest linearizable prefix porcupine found,
// with the state after each op, then the ops none of which can come next.
func churnExplain(history []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var b strings.Builder
	var longest []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	st := churnModel.Init()
	done := map[int64]bool{}
	for _, op := range longest {
		_, st = churnModel.Step(st, op.Input, op.Output)
		done[op.Call] = true
		fmt.Fprintf(&b, "client %d [%d, %d] %s\n    => %v\n", op.ClientId, op.Call, op.Return, churnModel.DescribeOperation(op.Input, op.Output), st)
	}
	b.WriteString("none of these can come next:\n")
	first := int64(math.MaxInt64)
	for _, op := range history {
		if !done[op.Call] {
			first = min(first, op.Return)
		}
	}
	for _, op := range history {
		if !done[op.Call] && op.Call <= first {
			fmt.Fprintf(&b, "client %d [%d, %d] %s\n", op.ClientId, op.Call, op.Return, churnModel.DescribeOperation(op.Input, op.Output))
		}
	}
	return b.String()
}
