package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
)

// exitCommandNotFound is the exit code when lock's command cannot be
// started, as shells use.
const exitCommandNotFound = 127

func newLockCmd(o *options) *cobra.Command {
	var (
		ttl           time.Duration
		try           bool
		checkInterval time.Duration
		grace         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "lock DIR [--ttl D] [--try] -- COMMAND [ARG...]",
		Short: "Run a command while holding the lock on a directory",
		Long: `Take the exclusive lock on DIR (which must hold at least one file), run
COMMAND while holding it, then release it. topoctl exits with the command's
status (128+N when a signal N ended it).

The wait for the lock is bounded by --timeout (0: wait until interrupted).
--try fails at once with NodeExists when someone else holds the lock.
--ttl sets the lock's time to live: if topoctl dies, the lock lapses about
that long later (backends round it up: Consul to 10s; ZooKeeper to its
session timeout); without it the backend's default applies. --try uses the
default time to live, so it does not combine with --ttl.

On SIGINT or SIGTERM topoctl sends SIGTERM to the command, waits up to
--grace for it (then kills it) and releases the lock; a second signal ends
topoctl at once, and the lock then lapses with its time to live. If the store drops
the lock while the command runs (lease or session lost), topoctl stops the
command the same way and fails with LockLost.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) >= 2 && args[1] == "--" {
				args = args[1:]
			}
			if len(args) < 2 {
				return usagef("lock needs a directory and a command: topoctl lock DIR -- COMMAND [ARG...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := topo.CleanDirPath(args[0])
			if err != nil {
				return err
			}
			argv := args[1:]
			if argv[0] == "--" {
				argv = argv[1:]
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
			st, err := o.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()

			host, _ := os.Hostname()
			contents := fmt.Sprintf("topoctl lock on %s pid %d: %s", host, os.Getpid(), strings.Join(argv, " "))
			lctx, cancel := o.callCtx(ctx)
			var ld topo.LockDescriptor
			switch {
			case try:
				ld, err = st.conn.TryLock(lctx, dir, contents)
			case ttl > 0:
				ld, err = st.conn.LockWithTTL(lctx, dir, contents, ttl)
			default:
				ld, err = st.conn.Lock(lctx, dir, contents)
			}
			cancel()
			if err != nil {
				if try && topo.IsErrType(err, topo.NodeExists) {
					return fmt.Errorf("lock on %s is held by someone else: %w", displayPath(dir), err)
				}
				return err
			}
			o.log.Info("lock acquired", "dir", displayPath(dir))

			status, runErr, lost := o.runLocked(ctx, ld, argv, checkInterval, grace)

			uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout(o.timeout))
			uerr := ld.Unlock(uctx)
			ucancel()
			o.log.Info("lock released", "dir", displayPath(dir), "err", uerr)

			switch {
			case lost != nil:
				if status == 0 {
					status = ExitFailure
				}
				return exitError{code: status, err: fmt.Errorf("the lock on %s was lost while the command ran: %w", displayPath(dir), lost)}
			case runErr != nil:
				return exitError{code: status, err: runErr}
			case uerr != nil && !topo.IsErrType(uerr, topo.Interrupted):
				if status == 0 {
					status = ExitFailure
				}
				return exitError{code: status, err: fmt.Errorf("releasing the lock on %s: %w", displayPath(dir), uerr)}
			case status != 0:
				return exitError{code: status}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&ttl, "ttl", 0, "time to live of the lock (default: the backend's)")
	f.BoolVar(&try, "try", false, "fail with NodeExists instead of waiting when the lock is held")
	f.DurationVar(&checkInterval, "check-interval", time.Second, "how often to check that the lock is still held")
	f.DurationVar(&grace, "grace", 10*time.Second, "how long the command may take to exit after SIGTERM before it is killed")
	return cmd
}

func unlockTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultTimeout
	}
	return d
}

// runLocked runs argv while ld is held. It returns the command's exit
// status, an error when the command could not run, and the error that
// reported the lock's loss, if it was lost.
func (o *options) runLocked(ctx context.Context, ld topo.LockDescriptor, argv []string, every, grace time.Duration) (int, error, error) {
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	c := exec.CommandContext(cctx, argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = o.io.Stdin, o.io.Stdout, o.io.Stderr
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGTERM) }
	c.WaitDelay = grace
	if err := c.Start(); err != nil {
		return exitCommandNotFound, fmt.Errorf("starting %s: %w", argv[0], err), nil
	}

	var lost atomic.Pointer[error]
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
			kctx, kcancel := context.WithTimeout(cctx, unlockTimeout(o.timeout))
			err := ld.Check(kctx)
			kcancel()
			if topo.IsErrType(err, topo.LockLost) {
				lost.Store(&err)
				o.log.Error("lock lost, stopping the command", "err", err)
				stop()
				return
			}
		}
	}()
	err := c.Wait()
	close(done)
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
