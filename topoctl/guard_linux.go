package topoctl

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

// envLockGuard makes a topoctl process (any program that links this
// package: the check runs in its init) the guard of lock's command
// instead of running as usual; lockGuardCmd sets it.
const envLockGuard = "TOPOCTL_LOCK_GUARD"

func init() {
	if os.Getenv(envLockGuard) == "1" {
		os.Exit(runLockGuard(os.Args[1:]))
	}
}

// lockGuardCmd returns the command that runs argv under a guard: topoctl's
// own executable, re-run as the leader of the command's process group,
// with a parent-death signal. When topoctl dies without stopping the group
// (SIGKILL, a crash), the guard gets SIGTERM from the kernel and kills the
// whole group, so that nothing the command started, in the background
// included, outlives topoctl and with it the lock. ok is false when
// topoctl's executable cannot be found (argv then runs without a guard).
func lockGuardCmd(argv []string) (c *exec.Cmd, ok bool) {
	self, err := os.Executable()
	if err != nil {
		return exec.Command(argv[0], argv[1:]...), false
	}
	c = exec.Command(self, argv...)
	c.Env = append(os.Environ(), envLockGuard+"=1")
	return c, true
}

// runLockGuard runs argv in its own (the guard's) process group and
// returns the exit code to end with: the command's, or 128+N when signal N
// ended it; 127 when it cannot start. A SIGTERM, SIGINT or SIGHUP while
// the parent that started the guard lives is topoctl stopping the group
// (the command got it too): the guard waits on. Once the parent is gone
// the guard kills the whole group, itself included.
func runLockGuard(argv []string) int {
	// A parent that died before the guard ran made the Go runtime end it
	// with the parent-death signal already (it checks the parent right
	// after setting it up).
	parent := os.Getppid()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if len(argv) == 0 {
		return ExitFailure
	}
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envLockGuard+"=") })
	if err := c.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "topoctl: starting %s: %v\n", argv[0], err)
		return exitCommandNotFound
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	for {
		select {
		case err := <-done:
			var ee *exec.ExitError
			switch {
			case err == nil:
				return 0
			case errors.As(err, &ee):
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal())
				}
				return ee.ExitCode()
			}
			return ExitFailure
		case <-sigs:
			if os.Getppid() != parent {
				// topoctl is gone: so must be the command.
				_ = syscall.Kill(0, syscall.SIGKILL)
			}
		}
	}
}
