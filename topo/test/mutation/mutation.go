// Package mutation is the mutation kit for backend authors: it checks that
// the conformance suite (package topo/test) catches, on YOUR backend, the
// contract violations a backend typically gets wrong. Each mutant wraps
// the backend's Conns with one deliberate defect (a compare-and-set that
// is a read then a write, a Txn that applies writes before checking its
// conditions, a fencing token that repeats, a Done that never closes, ...)
// and the suite runs against the wrapped backend; the suite must fail on
// every mutant, and pass on the unmutated baseline. A mutant that survives
// shows a check the suite cannot make against this backend (often because
// the backend's wiring hides the defect, e.g. a store so fast that a race
// window never opens).
//
// Use it from a test of the backend's package, with the same newStore and
// Options as test.Run:
//
//	func TestMutants(t *testing.T) {
//		mutation.Run(t, newStore, options, mutation.Config{Parallel: 2})
//	}
//
// Each mutant runs in a child process (the test binary, re-run on this
// test with the mutant named in the environment variable EnvMutant, with
// -test.failfast), because a failing subtest cannot be contained in the
// process that runs it. The mutants wrap the backend through the topo.Conn
// interface only; lock descriptors and terms they wrap implement
// Unwrap() topo.Fence, so the backend's IfHeld finds its own through
// backendkit.FenceAs.
package mutation

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
	"github.com/topokit/topokit/topo/test"
)

// EnvMutant is the environment variable naming the mutant a child process
// runs. Run sets it for its children; nothing else should.
const EnvMutant = "TOPOKIT_SUITE_MUTANT"

// Baseline is the name of the mutant without a defect: the suite must
// pass on it (through the mutants' wrappers), so that every other
// mutant's failure is due to its defect.
const Baseline = "none"

// Mutant is one deliberate contract violation.
type Mutant struct {
	// Name identifies the mutant (Config.Mutants, EnvMutant).
	Name string
	// Defect says what the mutant gets wrong.
	Defect string
	// CaughtBy is the conformance subtest ("Group/Subtest") that catches
	// it first on memorytopo. Any failing subtest kills the mutant; this
	// one is what Config.Targeted runs.
	CaughtBy string
}

// mutants is the one list of mutants.
var mutants = []Mutant{
	// Files.
	{"cas-creates-absent", "a versioned Update of an absent file creates it (the etcd ModRevision==0 / ZooKeeper version 0 trap)", "File/UpdateAbsentWithVersion"},
	{"dir-cas-creates-file", "a versioned Update of a path that is only a directory creates a file there (issue 10 item 4)", "File/FileAndDirectory"},
	{"stale-versions", "every write keeps returning the first version", "File/Update"},
	{"cas-returns-other", "an Update returns the version read after it, which may be another writer's (issue 10 item 8)", "Concurrency/Linearizable"},
	{"list-dir-prefix", "List treats its prefix as a directory", "File/List"},
	{"getversion-latest", "GetVersion ignores the version", "File/GetVersion"},
	{"delete-erases-parent", "deleting a child rewrites the parent file's data (issue 10 item 3)", "File/FileAndDirectory"},
	{"delete-not-atomic", "a versioned Delete is a Get, a compare, then an unconditional Delete", "Concurrency/VersionedDelete"},
	{"cas-not-atomic", "compare-and-set is a Get followed by an unconditional write", "Concurrency/CompareAndSet"},
	{"stale-reads", "Get serves each connection's last read or write from a cache", "File/Update"},
	{"reserved-create", "Create, Update and Delete accept reserved paths (issue 10 item 9)", "File/ReservedNames"},
	{"reserved-lock", "Lock, TryLock, LockWithTTL and LockName accept reserved directories", "File/ReservedNames"},
	{"lenient-paths", "Create normalises \"a//b\" instead of rejecting it", "File/ErrorsNamePath"},
	{"create-ignores-context", "Create ignores its context", "BadInput/CancelledContext"},
	{"oversize-truncated", "Create truncates oversized values instead of refusing them", "BadInput/ValueSize"},
	// Check order and messages.
	{"input-before-context", "the file, watch and lock calls check their input before their context, so a call with bad input and an ended context says InvalidPath or InvalidArgument instead of Interrupted or Timeout", "CheckOrder/OpenConn"},
	{"closed-before-input", "a closed Conn says Closed before it checks the context and the input", "CheckOrder/ClosedConn"},
	{"ttl-before-lock-args", "LockWithTTL refuses a non-positive ttl before it checks the directory and the value", "CheckOrder/OpenConn"},
	{"own-messages", "Create, Update, Delete, GetVersion and LockWithTTL word their own InvalidArgument errors (code and path only) instead of backendkit's", "CheckOrder/OpenConn"},
	// Directories.
	{"listdir-unsorted", "ListDir is not sorted", "Directory/ListDir"},
	{"no-ephemeral", "a full ListDir never marks lock or election entries Ephemeral", "Lock/Ephemeral"},
	// Locks.
	{"trylock-blocks", "TryLock waits like Lock", "File/ReservedNames"},
	{"lock-not-exclusive", "Lock grants immediately without excluding anyone", "File/ReservedNames"},
	{"unlock-twice-ok", "a second Unlock succeeds", "Lock/Blocks"},
	{"timeout-as-interrupted", "a Lock whose deadline passes reports Interrupted instead of Timeout", "Lock/Timeout"},
	{"check-lags-loss", "Check says nil for 1 s after the lock was lost", "SessionLoss/Lock"},
	{"stale-unlock", "the Unlock of a lost lock releases the lock's current holder and returns nil (issue 10 item 1)", "SessionLoss/Lock"},
	{"waiter-stays-blocked", "a Lock waiter whose session ends keeps waiting for the holder (issue 10 item 18)", "SessionLoss/Waiter"},
	{"lock-file-bare-nonode", "Lock, TryLock and LockWithTTL of a file or of a directory without files return a bare NoNode (issue 35 item 1)", "Lock/FileOrEmptyDirectory"},
	{"closed-claims-lost", "after Close, Check and Unlock of a lock say LockLost instead of Closed (issue 35 item 5)", "Close/ClaimCallsClosed"},
	// Watches.
	{"watch-silent-delete", "a watch closes on delete without the NoNode event", "Watch/Delete"},
	{"watchrecursive-ends-on-delete", "a recursive watch ends at the first deletion", "WatchRecursive/Events"},
	{"watchrecursive-forgets", "a recursive watch drops the events of re-created paths", "WatchRecursive/Recreate"},
	// Elections.
	{"leadership-never-cancelled", "the leadership context is never cancelled", "Election/Handover"},
	{"leadership-cancelled-late", "the leadership context is cancelled 1 s after leadership ended", "Election/Handover"},
	{"nested-elections-leak", "an election without a leader reports the leader of a nested election (issue 10 item 10)", "Election/Nested"},
	{"newleader-latest-only", "WaitForNewLeader keeps only the latest leader until read, so a reader misses the leader current at the call", "Election/WaitForNewLeader"},
	// Fencing (issue 11).
	{"token-repeats", "every holder of a lock gets the token of its first holder", "Fence/Tokens"},
	{"token-decreases", "a later holder of a lock gets a smaller token", "Fence/Tokens"},
	{"term-token-repeats", "every term of an election gets the token of its first term", "Fence/Terms"},
	{"term-after-stop", "Term keeps returning the last term after Stop instead of NotLeader", "Fence/Terms"},
	{"done-never-closes", "Done of locks and terms never closes", "Fence/Tokens"},
	{"done-only-on-release", "Done closes on Unlock and Stop only, not when the store drops the claim", "Fence/Tokens"},
	{"ifheld-ignores-fence", "IfHeld always holds: a stale holder's guarded writes go through", "Stale/AfterSessionLoss"},
	// Transactions (issue 11).
	{"txn-writes-first", "Txn applies its writes one by one before it checks its conditions", "Stale/AfterSessionLoss"},
	{"txn-partial-on-failure", "a failed Txn leaves the writes before the failing op applied", "Stale/AfterSessionLoss"},
	{"txn-index-off", "a failed Txn names op 0 instead of the failing op", "Stale/AfterSessionLoss"},
	{"txn-read-then-write", "Txn is emulated: each condition read on its own, then the writes applied one by one", "Txn/Atomicity"},
	{"txn-unwatched", "a Watch does not report the writes of transactions", "Txn/Ops"},
}

// engineCaughtBy is the conformance subtest that catches each defect of
// the claims engine first on the template.
var engineCaughtBy = map[claims.Defect]string{
	claims.DefectGrantSecond:     "Lock/Blocks",
	claims.DefectSkipWait:        "Lock/Blocks",
	claims.DefectLossKeepsClaims: "LeaderValues/ProclaimDeposed",
	claims.DefectTokenIsPosition: "LeaderValues/Proclaim",
}

// EngineMutants returns the mutants of the claims engine (topo/claims),
// named after their claims.Defect, in a fixed order. Unlike the others
// they do not wrap the Conn: the backend's wiring puts the defect into its
// engines (EngineDefect), so they only make sense for a backend built on
// the engine; Config.Engine runs them.
func EngineMutants() []Mutant {
	var out []Mutant
	for _, d := range claims.Defects() {
		out = append(out, Mutant{Name: string(d.Defect), Defect: d.What, CaughtBy: engineCaughtBy[d.Defect]})
	}
	return out
}

// EngineDefect returns the claims engine defect a child process runs (the
// engine mutant named in EnvMutant), DefectNone otherwise. A backend built
// on topo/claims passes it to the engines of the stores its wiring opens
// (claims.Options.Defect); in a normal run it is DefectNone.
func EngineDefect() claims.Defect {
	name := os.Getenv(EnvMutant)
	for _, m := range EngineMutants() {
		if m.Name == name {
			return claims.Defect(name)
		}
	}
	return claims.DefectNone
}

// survivorRetries is how many more times Run runs a mutant that survived.
const survivorRetries = 2

// Mutants returns every mutant, in a fixed order (without the baseline).
func Mutants() []Mutant { return slices.Clone(mutants) }

// Config tunes Run. The zero value runs every mutant against the whole
// suite, four children at a time, each bounded by 10 minutes.
type Config struct {
	// Mutants names the mutants to run; nil runs them all. The baseline
	// always runs.
	Mutants []string
	// Parallel is how many child processes run at once (0: 4). The
	// children mostly wait, but each opens its own stores: size it to
	// what the backend's test servers take.
	Parallel int
	// Timeout bounds each child's run of the suite (0: 10 minutes).
	Timeout time.Duration
	// Engine adds the claims engine's mutants (EngineMutants) to the
	// mutants run: set it for a backend built on topo/claims whose wiring
	// applies EngineDefect.
	Engine bool
	// Targeted runs each mutant against its CaughtBy subtest only (and
	// the baseline against those subtests): much faster, but a mutant
	// that only another subtest catches on this backend then survives.
	Targeted bool
	// CaughtBy names, by mutant name, the subtest ("Group/Subtest") that
	// catches a mutant on this backend in place of the mutant's own
	// CaughtBy (a backend whose other behaviour hides the defect from the
	// kit's target); Targeted runs it.
	CaughtBy map[string]string
}

// Run runs the conformance suite (test.Run with newStore and opts) against
// the backend wrapped by each mutant, each in a child process, and fails t
// if the suite passes on any mutant (it survived), if a child fails
// without a failing subtest (a crash or a hang), or if the suite fails on
// the baseline. A mutant that survives a run is run up to twice more and
// counts as caught when any of its runs fails (some defects show only when
// the suite's reader loses a race, which a loaded machine can make it
// win). It logs, for each mutant, the subtests that caught it. In
// a child process (EnvMutant set) it runs the suite against the named
// mutant instead. t must be the test function itself or a subtest of it
// (children re-run it by name); Run must not be called twice in one test.
func Run(t *testing.T, newStore func(t *testing.T) (open func() topo.Conn), opts test.Options, cfg Config) {
	t.Helper()
	if name := os.Getenv(EnvMutant); name != "" {
		RunMutant(t, name, newStore, opts)
		return
	}
	byName := map[string]Mutant{Baseline: {Name: Baseline, Defect: "the baseline: no defect"}}
	all := mutants
	if cfg.Engine {
		all = append(slices.Clone(mutants), EngineMutants()...)
	}
	for _, m := range all {
		byName[m.Name] = m
	}
	for n, sub := range cfg.CaughtBy {
		m, ok := byName[n]
		require.Truef(t, ok && n != Baseline, "Config.CaughtBy: unknown mutant %q", n)
		m.CaughtBy = sub
		byName[n] = m
	}
	names := []string{Baseline}
	if cfg.Mutants == nil {
		for _, m := range all {
			names = append(names, m.Name)
		}
	} else {
		for _, n := range cfg.Mutants {
			_, ok := byName[n]
			require.Truef(t, ok && n != Baseline, "Config.Mutants: unknown mutant %q", n)
			names = append(names, n)
		}
	}
	parallel := cfg.Parallel
	if parallel <= 0 {
		parallel = 4
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	type result struct {
		out string
		err error
	}
	results := make(map[string]result, len(names))
	var mu sync.Mutex
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, name := range names {
		run := runPattern(t.Name(), "")
		if cfg.Targeted {
			run = runPattern(t.Name(), byName[name].CaughtBy)
			if name == Baseline {
				var targets []string
				for _, n := range names[1:] {
					targets = append(targets, byName[n].CaughtBy)
				}
				run = runPattern(t.Name(), targets...)
			}
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out, err := runChild(t.Context(), name, run, timeout)
			mu.Lock()
			results[name] = result{out, err}
			mu.Unlock()
		})
	}
	wg.Wait()
	// A mutant whose defect shows only when the suite's reader loses a
	// race against the mutant's own goroutine (newleader-latest-only, on a
	// loaded machine) may pass once: a survivor runs again, up to
	// survivorRetries more times, and counts as caught when any run fails.
	for _, name := range names[1:] {
		for try := 0; try < survivorRetries && results[name].err == nil; try++ {
			run := runPattern(t.Name(), "")
			if cfg.Targeted {
				run = runPattern(t.Name(), byName[name].CaughtBy)
			}
			out, err := runChild(t.Context(), name, run, timeout)
			t.Logf("mutant %q survived a run; run %d again: caught %v", name, try+2, err != nil)
			results[name] = result{out, err}
		}
	}
	failLine := regexp.MustCompile(`--- FAIL: ` + regexp.QuoteMeta(t.Name()) + `/(\S+)`)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			r := results[name]
			m := byName[name]
			if name == Baseline {
				require.NoError(t, r.err, "the suite fails on the unmutated backend (through the mutants' wrappers), so the mutants prove nothing:\n%s", r.out)
				return
			}
			require.Error(t, r.err, "mutant %q SURVIVED: the suite passes on a backend that %s (expected to be caught by %s):\n%s", name, m.Defect, m.CaughtBy, r.out)
			var caught []string
			for _, sub := range failLine.FindAllStringSubmatch(r.out, -1) {
				if strings.Count(sub[1], "/") == 1 {
					caught = append(caught, sub[1])
				}
			}
			require.NotEmpty(t, caught, "mutant %q made the child fail without a failing subtest (a crash or a hang?):\n%s", name, r.out)
			t.Logf("mutant %q (%s) caught by %v", name, m.Defect, caught)
		})
	}
}

// runPattern returns the -test.run pattern of the test called name,
// restricted to the given "Group/Subtest" subtests (none: all).
func runPattern(name string, subtests ...string) string {
	var parts []string
	for _, p := range strings.Split(name, "/") {
		parts = append(parts, "^"+regexp.QuoteMeta(p)+"$")
	}
	base := strings.Join(parts, "/")
	if len(subtests) == 0 || (len(subtests) == 1 && subtests[0] == "") {
		return base
	}
	var groups, subs []string
	for _, st := range subtests {
		g, s, _ := strings.Cut(st, "/")
		if !slices.Contains(groups, g) {
			groups = append(groups, regexp.QuoteMeta(g))
		}
		if !slices.Contains(subs, s) {
			subs = append(subs, regexp.QuoteMeta(s))
		}
	}
	return fmt.Sprintf("%s/^(%s)$/^(%s)$", base, strings.Join(groups, "|"), strings.Join(subs, "|"))
}

// runChild re-runs this test binary with the mutant named in EnvMutant.
func runChild(ctx context.Context, name, run string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run="+run, "-test.v", "-test.count=1",
		"-test.failfast", fmt.Sprintf("-test.timeout=%s", timeout))
	cmd.Env = append(os.Environ(), EnvMutant+"="+name)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// RunMutant runs the suite in this process against the backend wrapped by
// the named mutant (Baseline for none). Run calls it in its children;
// call it directly to debug one mutant (then the suite fails, as it
// must, unless the mutant survives).
func RunMutant(t *testing.T, name string, newStore func(t *testing.T) (open func() topo.Conn), opts test.Options) {
	t.Helper()
	known := name == Baseline
	for _, m := range mutants {
		known = known || m.Name == name
	}
	if EngineDefect() != claims.DefectNone && string(EngineDefect()) == name {
		// An engine mutant: the defect is in the backend's engines
		// (EngineDefect); the Conns are wrapped as for the baseline.
		known, name = true, Baseline
	}
	require.Truef(t, known, "unknown mutant %q", name)
	var cur *store
	wrapOpener := func(open func() topo.Conn, st *store) func() topo.Conn {
		return func() topo.Conn {
			c := open()
			if c == nil {
				return nil
			}
			return &conn{Conn: c, name: name, store: st}
		}
	}
	mopts := opts
	if opts.ExpireSession != nil {
		mopts.ExpireSession = func(t *testing.T, c topo.Conn) { opts.ExpireSession(t, unwrap(c)) }
	}
	if opts.Partition != nil {
		mopts.Partition = func(t *testing.T) test.Partitioned {
			p := opts.Partition(t)
			if p.Conn != nil {
				p.Conn = &conn{Conn: p.Conn, name: name, store: cur}
			}
			return p
		}
	}
	if opts.FaultyStore != nil {
		mopts.FaultyStore = func(t *testing.T) test.FaultyStore {
			fs := opts.FaultyStore(t)
			st := &store{}
			if fs.Open != nil {
				fs.Open = wrapOpener(fs.Open, st)
			}
			if fs.OpenLinearizable != nil {
				fs.OpenLinearizable = wrapOpener(fs.OpenLinearizable, st)
			}
			return fs
		}
	}
	test.Run(t, func(t *testing.T) func() topo.Conn {
		open := newStore(t)
		if open == nil {
			return nil
		}
		cur = &store{}
		return wrapOpener(open, cur)
	}, mopts)
}

// unwrap returns the backend's Conn behind a mutant's.
func unwrap(c topo.Conn) topo.Conn {
	if m, ok := c.(*conn); ok {
		return m.Conn
	}
	return c
}
