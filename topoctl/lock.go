package topoctl

import (
	"context"
	"errors"
	"fmt"
	goio "io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/connect"
	"github.com/topokit/topokit/topo/inspect"
)

// The environment variables lock's command gets.
const (
	// envLockPath names the locked directory, as typed ("/keyspaces/ks").
	envLockPath = "TOPOCTL_LOCK_PATH"
	// envLockToken is the lock's fencing token (topo.Fence.Token), a
	// decimal number.
	envLockToken = "TOPOCTL_LOCK_FENCING_TOKEN"
)

// exitCommandNotFound is the exit code when lock's command cannot be
// started, as shells use.
const exitCommandNotFound = 127

func newLockCmd(stores *connector, in *input, out *printer) *cobra.Command {
	o := &holding{in: in, out: out}
	var (
		ttl           time.Duration
		try           bool
		named         bool
		checkInterval time.Duration
		grace         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "lock DIR [--ttl D] [--try] [-- COMMAND [ARG...]]",
		Short: "Run a command while holding the lock on a directory (or hold it until Ctrl-C)",
		Long: `Take the exclusive lock on DIR (which must hold at least one file, unless
--named takes a named lock, for which DIR need not exist), run
COMMAND while holding it, then release it. topoctl exits with the command's
status (128+N when a signal N ended it). Without COMMAND, topoctl holds the
lock until Ctrl-C or SIGTERM (exit 0), like "etcdctl lock", after printing
"holding the lock on DIR (fencing token N); ..." (with --output json:
{"path","fencing_token"}).

The fencing token is the lock's topo.Fence token: a number that every later
holder of the lock on DIR gets strictly greater, so that a resource can
refuse a holder that lost the lock without knowing it. COMMAND gets it in
$` + envLockToken + `, and DIR in $` + envLockPath + ` (as "etcdctl lock"
gives ETCD_LOCK_KEY and ETCD_LOCK_REV).

COMMAND runs in a process group of its own, so that everything it starts
is stopped with it. On Linux, if topoctl itself is killed (SIGKILL, a
crash) the whole group is killed at once, well before the lock lapses: the
group's leader is a guard (topoctl's own executable, run again) that the
kernel signals when topoctl dies (parent-death signal) and that then kills
the group. Elsewhere a killed topoctl leaves COMMAND running: the lock
lapses with its time to live while COMMAND may still run. The lock is released only once no process of
the group is left (a process the command leaves behind gets SIGTERM, and
SIGKILL --grace later). Being in its own group, COMMAND does not read from
the terminal.

The wait for the lock has no bound by default: lock waits until the lock
is free or it is interrupted (Ctrl-C: exit 130), as "etcdctl lock" does,
since a lock may be held for as long as a job runs. A --timeout given
on the command line, in ` + envTimeout + ` or in the --config file bounds
the wait too (Timeout, exit 1; 0 means no bound). Without a bound, a
store that stops answering while lock waits keeps it waiting until Ctrl-C.
--try fails at once with NodeExists when someone else holds the lock.
--ttl sets the lock's time to live: if topoctl dies, the lock lapses about
that long later; without it the backend's default applies. Backends honour
it differently, and topoctl prints a note on stderr with the effective time
when it is not --ttl: etcd rounds it up to whole seconds; ZooKeeper ties
every lock to the session, which lapses one session timeout (30s asked of
the server) after topoctl stops; Consul rounds it up to whole seconds and
to 10s and invalidates a session up to twice its TTL later (--ttl 5s: 10s
to 20s). --try uses the
default time to live, so it does not combine with --ttl. --named takes the
backend's long named-lock time to live and waits for the lock, so --named
does not combine with --try or --ttl (a usage error, exit 2).

On SIGINT or SIGTERM topoctl sends SIGTERM to the command's process group,
says so and how long it waits, waits up to --grace (default 10s) for every
process of it to end (then sends SIGKILL), releases the lock and exits 130;
a second signal ends topoctl at once, and the lock then lapses with its time
to live. If the store drops the lock while the command runs (lease or
session lost), topoctl stops the group the same way and fails with LockLost,
exit 3. --try, when the lock is held, names the holder where the store
shows it.`,
		Example: `  topoctl lock /keyspaces/commerce -- ./reparent.sh
  topoctl lock --try /keyspaces/commerce -- echo got it
  topoctl lock /keyspaces/commerce        # hold until Ctrl-C`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 {
				return usagef("lock needs a directory: topoctl lock DIR [-- COMMAND [ARG...]]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.timeout = stores.timeout
			if grace < 0 {
				return usagef("--grace %s: want 0 or more", grace)
			}
			dir, err := topo.CleanDirPath(args[0])
			if err != nil {
				return err
			}
			argv := args[1:]
			if len(argv) > 0 && argv[0] == "--" {
				argv = argv[1:]
			}
			if named && (try || cmd.Flags().Changed("ttl")) {
				return usagef("--named takes the backend's long named-lock time to live and waits: it does not combine with --try or --ttl")
			}
			if cmd.Flags().Changed("ttl") {
				if try {
					return usagef("--try uses the backend's default time to live; drop --ttl")
				}
				if ttl <= 0 {
					return usagef("--ttl must be positive")
				}
			}
			if checkInterval <= 0 {
				return usagef("--check-interval must be positive")
			}
			ctx := cmd.Context()
			st, err := stores.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()

			if ttl > 0 {
				if note := effectiveTTLNote(st.spec.impl, "the lock", ttl); note != "" {
					out.eprintf("topoctl: note: %s\n", note)
				}
			}
			host, _ := os.Hostname()
			contents := fmt.Sprintf("topoctl lock on %s pid %d: %s", host, os.Getpid(), strings.Join(argv, " "))
			lctx, cancel := callCtx(ctx, stores.lockWait())
			var ld topo.LockDescriptor
			switch {
			case named:
				ld, err = st.conn.LockName(lctx, dir, contents)
			case try:
				ld, err = st.conn.TryLock(lctx, dir, contents)
			case ttl > 0:
				ld, err = st.conn.LockWithTTL(lctx, dir, contents, ttl)
			default:
				ld, err = st.conn.Lock(lctx, dir, contents)
			}
			cancel()
			if err != nil {
				var lh *topo.LockHeldError
				if try && topo.IsErrType(err, topo.NodeExists) && errors.As(err, &lh) && lh.Holder != "" {
					// The backend named the holder: say it once.
					by := ", by " + strconv.Quote(lh.Holder)
					if lh.Session != "" {
						by += " (session " + lh.Session + ")"
					}
					return &kindError{msg: fmt.Sprintf("lock on %s is held by someone else%s", displayPath(dir), by), err: err}
				}
				if try && topo.IsErrType(err, topo.NodeExists) {
					return fmt.Errorf("lock on %s is held by someone else%s: %w", displayPath(dir), o.holder(ctx, st, dir), err)
				}
				if ctx.Err() != nil {
					return exitError{code: ExitInterrupted, err: fmt.Errorf("interrupted while waiting for the lock on %s: %w", displayPath(dir), err)}
				}
				if wait := stores.lockWait(); wait > 0 && topo.IsErrType(err, topo.Timeout) {
					// The wait --timeout bounds ran out: say so, who
					// holds the lock, and what else to do.
					held := ""
					if by := o.holder(ctx, st, dir); by != "" {
						held = "; it is held by " + strings.TrimPrefix(by, ", by ")
					}
					return fmt.Errorf("could not take the lock on %s within --timeout %s%s (a larger --timeout waits longer; lock --try fails at once): %w", displayPath(dir), wait, held, err)
				}
				if nf := (*backendkit.LockNeedsFilesError)(nil); !named && errors.As(err, &nf) {
					// The backend's refusal (backendkit.LockNeedsFiles),
					// in topoctl's words: what lock takes, and --named.
					if nf.IsFile {
						parent := displayPath(dir[:max(strings.LastIndexByte(dir, '/'), 0)])
						return &kindError{msg: fmt.Sprintf("%s is a file, not a directory: locks are taken on directories (lock %s), or use --named to take a named lock on any path", displayPath(dir), parent), err: err}
					}
					return &kindError{msg: fmt.Sprintf("%s holds no file: locks are taken on directories that hold at least one file, or use --named to take a named lock on any path", displayPath(dir)), err: err}
				}
				return err
			}
			out.log.Info("lock acquired", "dir", displayPath(dir))

			var status int
			var runErr, lost error
			if len(argv) == 0 {
				lost = o.hold(ctx, ld, dir, checkInterval)
			} else {
				status, runErr, lost = o.run(ctx, ld, displayPath(dir), argv, checkInterval, grace)
			}

			uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout(stores.timeout))
			uerr := ld.Unlock(uctx)
			ucancel()
			out.log.Info("lock released", "dir", displayPath(dir), "err", uerr)

			switch {
			case lost != nil:
				return exitError{code: ExitLockLost, err: fmt.Errorf("the lock on %s was lost while the command ran (the command was stopped): %w", displayPath(dir), lost)}
			case runErr != nil:
				return exitError{code: status, err: runErr}
			case uerr != nil && !topo.IsErrType(uerr, topo.Interrupted):
				if status == 0 {
					status = ExitFailure
				}
				return exitError{code: status, err: fmt.Errorf("releasing the lock on %s: %w", displayPath(dir), uerr)}
			case ctx.Err() != nil && len(argv) > 0:
				return exitError{code: ExitInterrupted, err: fmt.Errorf("interrupted: the command was stopped (its status: %d) and the lock on %s released", status, displayPath(dir))}
			case status != 0:
				return exitError{code: status}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&ttl, "ttl", 0, "time to live of the lock (default: the backend's)")
	f.BoolVar(&try, "try", false, "fail with NodeExists instead of waiting when the lock is held")
	f.BoolVar(&named, "named", false, "take a named lock (LockName): DIR need not exist; long time to live; not with --try or --ttl")
	f.DurationVar(&checkInterval, "check-interval", time.Second, "how often to check that the lock is still held")
	f.DurationVar(&grace, "grace", 10*time.Second, "how long the command may take to exit after SIGTERM before it is killed")
	return cmd
}

// holding is lock's side of a held lock: what it prints, the command it
// runs with its standard input, and the bound of each check.
type holding struct {
	in  *input
	out *printer
	// timeout is --timeout (0: defaultTimeout bounds each check).
	timeout time.Duration
}

// hold holds ld until ctx ends (nil) or the lock is lost (the error
// that said so), checking it every interval.
func (o *holding) hold(ctx context.Context, ld topo.LockDescriptor, dir string, every time.Duration) error {
	if o.out.jsonOut() {
		_ = o.out.printJSON(map[string]any{"path": displayPath(dir), "fencing_token": ld.Token()})
	} else {
		o.out.printf("holding the lock on %s (fencing token %d); Ctrl-C or SIGTERM releases it\n", displayPath(dir), ld.Token())
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		kctx, kcancel := context.WithTimeout(ctx, unlockTimeout(o.timeout))
		err := ld.Check(kctx)
		kcancel()
		if topo.IsErrType(err, topo.LockLost) {
			return err
		}
	}
}

// holder returns ", by <contents>" naming who holds the lock on dir, as
// far as the store shows it (see inspect.LockHolder), or "" when it cannot
// be read.
func (o *holding) holder(ctx context.Context, st *store, dir string) string {
	cctx, cancel := context.WithTimeout(ctx, unlockTimeout(o.timeout))
	defer cancel()
	h, err := inspect.LockHolder(cctx, st.conn, dir)
	if err != nil {
		o.out.log.Debug("cannot read the lock holder", "dir", dir, "err", err)
		return ""
	}
	return ", by " + strconv.Quote(h)
}

func unlockTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return defaultTimeout
	}
	return d
}

// run runs argv while ld is held, in a process group of its own. It
// returns the command's exit status, an error when the command could not
// run, and the error that reported the lock's loss, if it was lost. It
// returns only once no process of the group is left: on ctx's end or the
// lock's loss the group gets SIGTERM and, after grace, SIGKILL; when the
// command exits by itself, whatever it left running in its group is ended
// the same way.
func (o *holding) run(ctx context.Context, ld topo.LockDescriptor, lockPath string, argv []string, every, grace time.Duration) (int, error, error) {
	c, _ := lockGuardCmd(argv)
	c.Stdin = o.in.stdin
	// As etcdctl lock gives ETCD_LOCK_KEY and ETCD_LOCK_REV: the command
	// can fence its own writes with the token.
	if c.Env == nil {
		c.Env = os.Environ()
	}
	c.Env = append(c.Env, envLockPath+"="+lockPath, envLockToken+"="+strconv.FormatInt(ld.Token(), 10))
	setProcessGroup(c)
	// Output goes through pipes of our own (when it is not a file), so that
	// Wait returns when the command exits even if processes it left hold
	// the pipes; the copies end once the whole group is gone.
	var copies sync.WaitGroup
	var parentEnds []*os.File
	for _, s := range []struct {
		w   goio.Writer
		dst **os.File
	}{{o.out.stdout, new(*os.File)}, {o.out.stderr, new(*os.File)}} {
		if f, ok := s.w.(*os.File); ok {
			*s.dst = f
		} else {
			r, w, err := os.Pipe()
			if err != nil {
				return ExitFailure, err, nil
			}
			*s.dst = w
			parentEnds = append(parentEnds, w)
			copies.Add(1)
			go func() {
				defer copies.Done()
				defer r.Close()
				_, _ = goio.Copy(s.w, r)
			}()
		}
		if c.Stdout == nil {
			c.Stdout = *s.dst
		} else {
			c.Stderr = *s.dst
		}
	}
	// On Linux the command gets SIGKILL when the thread that started it
	// ends (Pdeathsig), so that it dies with a killed topoctl. The Go
	// runtime ends a thread when a goroutine locked to it exits: the
	// goroutine that starts the command keeps its thread locked until Wait
	// returns, so no other goroutine can end that thread while the command
	// runs.
	started := make(chan error, 1)
	waited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := c.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- c.Wait()
	}()
	err := <-started
	for _, f := range parentEnds {
		_ = f.Close()
	}
	if err != nil {
		copies.Wait()
		return exitCommandNotFound, fmt.Errorf("starting %s: %w", argv[0], err), nil
	}
	pgid := c.Process.Pid

	var lost atomic.Pointer[error]
	stopCh := make(chan struct{})
	stop := sync.OnceFunc(func() { close(stopCh) })
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			kctx, kcancel := context.WithTimeout(ctx, unlockTimeout(o.timeout))
			err := ld.Check(kctx)
			kcancel()
			if topo.IsErrType(err, topo.LockLost) {
				lost.Store(&err)
				o.out.log.Error("lock lost, stopping the command", "err", err)
				stop()
				return
			}
		}
	}()
	select {
	case err = <-waited:
	case <-ctx.Done():
		o.stopGroup(pgid, grace, "interrupted")
		err = <-waited
	case <-stopCh:
		o.stopGroup(pgid, grace, "the lock was lost")
		err = <-waited
	}
	close(done)
	// The command is gone; processes it left in its group must not outlive
	// the lock either.
	if groupAlive(pgid) {
		o.stopGroup(pgid, grace, "the command exited and left processes in its group")
	}
	// A process that left the group (setsid) may still hold the output
	// pipes: wait for the copies at most grace.
	copied := make(chan struct{})
	go func() { copies.Wait(); close(copied) }()
	select {
	case <-copied:
	case <-time.After(grace):
		o.out.log.Warn("the command's output is still open after its process group ended: a process left the group")
	}
	var lostErr error
	if p := lost.Load(); p != nil {
		lostErr = *p
	}
	if err == nil {
		return 0, nil, lostErr
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil, lostErr
		}
		return ee.ExitCode(), nil, lostErr
	}
	return ExitFailure, fmt.Errorf("running %s: %w", argv[0], err), lostErr
}

// stopGroup sends SIGTERM to process group pgid, says so on stderr (why,
// and how long it waits), waits up to grace for every process of the group
// to end, then sends SIGKILL and waits for them to be gone.
func (o *holding) stopGroup(pgid int, grace time.Duration, why string) {
	o.out.eprintf("topoctl: %s: sending SIGTERM to the command's process group %d; waiting up to %s before SIGKILL, then releasing the lock\n", why, pgid, grace)
	signalGroup(pgid, false)
	deadline := time.Now().Add(grace)
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			o.out.eprintf("topoctl: the command's process group %d is still running after %s: sending SIGKILL\n", pgid, grace)
			signalGroup(pgid, true)
			for groupAlive(pgid) {
				time.Sleep(10 * time.Millisecond)
			}
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// effectiveTTLNote says how long after a killed topoctl what (a lock, or
// leadership) taken with --ttl ttl lapses on backend impl, when that is not ttl (see
// connect.LockLifetimeOf). It returns "" when the lock lapses after ttl,
// or for other backends.
func effectiveTTLNote(impl, what string, ttl time.Duration) string {
	lt, ok := connect.LockLifetimeOf(impl, ttl)
	switch {
	case !ok:
	case lt.Session:
		return fmt.Sprintf("ZooKeeper ties a lock to the client's session, not to --ttl %s: the lock lapses one session timeout (%s asked of the server, which may clamp it) after topoctl stops talking to ZooKeeper", ttl, lt.Min)
	case lt.Ceiling > 0:
		return fmt.Sprintf("Consul sessions have a TTL of %s here (whole seconds, at least %s, at most %s) and Consul invalidates a session up to twice its TTL after the last renewal: %s lapses %s to %s after topoctl stops renewing it, not --ttl %s", lt.Min, lt.Floor, lt.Ceiling, what, lt.Min, lt.Max, ttl)
	case lt.Min != ttl:
		return fmt.Sprintf("etcd leases last whole seconds: %s lapses %s after topoctl stops renewing it, not --ttl %s", what, lt.Min, ttl)
	}
	return ""
}
