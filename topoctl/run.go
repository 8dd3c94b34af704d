package topoctl

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Run is the topoctl binary: it runs topoctl with the process's arguments
// (os.Args[1:]), standard streams and environment (TOPO_IMPLEMENTATION,
// TOPO_GLOBAL_SERVER_ADDRESS, ... as `topoctl --help` lists them), installs
// topoctl's logger (stderr, at --log-level) as slog's default, and cancels
// long-running commands on SIGINT or SIGTERM (a second signal then ends the
// process at once). It returns the exit code for os.Exit (ExitOK,
// ExitFailure, ExitUsage, ExitLockLost, ExitInterrupted, or the status of
// lock's command). Call it once per process, from main.
func Run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // the next signal gets the default action
	}()
	return runMain(ctx, os.Args[1:], streams{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, SetDefaultLogger: true})
}

// Main runs topoctl in-process with args (without the program name, e.g.
// []string{"ls", "/"}) and returns its exit code, as Run does for the
// binary. It reads input from stdin (put, import, ...) and writes to stdout
// and stderr; a nil stdin reads as empty, a nil stdout or stderr discards.
// Errors are printed to stderr as one line. Cancelling ctx ends
// long-running commands (serve, watch, lock, elect, leader --observe) as
// SIGINT ends them in the binary.
//
// Unlike Run, Main reads no environment variables: flags and --config
// decide (so serve's default --data-dir, where etcd2's default address is
// recorded, is the user cache directory's topokit/etcd, see
// os.UserCacheDir). It changes no process-wide state: it leaves slog's default
// logger alone and installs no signal handler. Calls are independent (each
// builds its own command tree), so they may run concurrently; stores are
// opened and closed by each call, and the memory backend's store named by
// an address lives as long as the process.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runMain(ctx, args, streams{Stdin: stdin, Stdout: stdout, Stderr: stderr})
}
