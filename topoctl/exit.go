package topoctl

// How a run ends: topoctl's exit codes, and its errors rendered as one
// line each on stderr. Every command returns its error here (runMain),
// never printing it itself.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/topokit/topokit/topo"
)

// Exit codes of topoctl, as Main and Run return them.
const (
	// ExitOK: the command succeeded (diff: the trees are identical).
	ExitOK = 0
	// ExitFailure: the operation failed (the error line on stderr names the
	// path and the error code), or diff found differences.
	ExitFailure = 1
	// ExitUsage: the command line was wrong (unknown command or flag, bad
	// flag value, wrong number of arguments, a bad environment variable).
	ExitUsage = 2
	// ExitLockLost: lock's command was stopped because the store dropped
	// the lock (lease or session lost), or elect lost its leadership.
	ExitLockLost = 3
	// ExitInterrupted: SIGINT or SIGTERM (in Main: ctx's end) ended a
	// command that had work left: while it connected, read or listed, an
	// import, copy, export or rm -R (what it wrote is reverted), a lock
	// wait; as shells report Ctrl-C (128+2).
	ExitInterrupted = 130
)

// usageError marks an error as a command-line mistake (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// stdinError is the error of a failed read of standard input: a usage
// error when it is a directory (as --file of a directory is), else a
// failure.
func stdinError(err error) error {
	err = fmt.Errorf("reading standard input: %w", err)
	if errors.Is(err, syscall.EISDIR) {
		return usageError{err}
	}
	return err
}

// exitError ends topoctl with a given exit code. A nil err prints nothing
// more (the command already reported what it had to).
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e exitError) Unwrap() error { return e.err }

// runMain is Main with the environment and terminal detection of io.
func runMain(ctx context.Context, args []string, io streams) int {
	cmd, t := newRoot(io)
	cmd.SetArgs(joinDecodeValue(args))
	ran, err := cmd.ExecuteContextC(ctx)
	if t.stopMetrics != nil {
		t.stopMetrics()
	}
	helpOf := "topoctl"
	if ran != nil {
		helpOf = ran.CommandPath()
	}
	return t.out.exit(ctx, err, helpOf, t.started)
}

// exit renders err, the error a command returned (nil: it succeeded), as
// one line on stderr and returns topoctl's exit code for it: a usage
// error's (with a pointer to helpOf's --help) when the command had not
// started (flags and arguments not accepted yet), ExitInterrupted when ctx
// ended a started command, an exitError's own code, ExitLockLost for
// LockLost, ExitFailure otherwise.
func (p *printer) exit(ctx context.Context, err error, helpOf string, started bool) int {
	if err == nil {
		return ExitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			p.eprintf("topoctl: %s\n", p.errorLine(ee.err))
		}
		return ee.code
	}
	var ue usageError
	if !errors.As(err, &ue) && started && ctx.Err() != nil {
		// Ctrl-C or SIGTERM ended the command (while it connected, listed,
		// read...): the failure is the interruption's, whatever error the
		// call it cut short returned.
		p.eprintf("topoctl: interrupted: %s\n", p.errorLine(err))
		return ExitInterrupted
	}
	if errors.As(err, &ue) || !started {
		p.eprintf("topoctl: %s\nRun '%s --help' for usage.\n", escapeLines(err.Error()), helpOf)
		return ExitUsage
	}
	p.eprintf("topoctl: %s\n", p.errorLine(err))
	if topo.CodeOf(err) == topo.LockLost {
		return ExitLockLost
	}
	return ExitFailure
}

// errorLine renders err as one line: the symbolic error code first when
// it is a topo error, then the message (which names the path); a store
// that could not be reached is named.
func (p *printer) errorLine(err error) string {
	msg := escapeControl(slashPaths(err))
	c := topo.CodeOf(err)
	if c == 0 {
		return msg
	}
	msg = codeName(c) + ": " + msg
	var te *topo.Error
	if c == topo.NoNode && errors.As(err, &te) && te.Err == nil && err.Error() == te.Error() && p.onlyMemory() {
		// A bare "node doesn't exist" on a memory store: most likely a
		// file an earlier command wrote, gone with its process.
		msg += memoryHint(p.stores[0])
	}
	if c == topo.Unavailable || c == topo.Timeout {
		// A store that could not be reached is named by the error itself
		// (it may be another one than p.stores: a cell's, copy's other).
		if len(p.stores) > 0 && !namesUnreachable(err) {
			msg += " (store " + strings.Join(p.stores, ", ") + ")"
		}
	}
	return msg
}

// onlyMemory reports whether every store the command named is a memory
// one (IMPL:ADDR:ROOT names starting "memory:").
func (p *printer) onlyMemory() bool {
	for _, s := range p.stores {
		if !strings.HasPrefix(s, "memory:") {
			return false
		}
	}
	return len(p.stores) > 0
}

// namesUnreachable reports whether err is the error of a store that could
// not be reached, which names its address: topoctl's dial guard's
// (checkListening), or a backend's when it found no server to open a
// connection with. Both carry a *topo.UnreachableError.
func namesUnreachable(err error) bool {
	var ue *topo.UnreachableError
	return errors.As(err, &ue)
}

// codeName returns the Go name of a topo error code, e.g. "NoNode".
func codeName(c topo.ErrorCode) string {
	switch c {
	case topo.NodeExists:
		return "NodeExists"
	case topo.NoNode:
		return "NoNode"
	case topo.NodeNotEmpty:
		return "NodeNotEmpty"
	case topo.Timeout:
		return "Timeout"
	case topo.Interrupted:
		return "Interrupted"
	case topo.BadVersion:
		return "BadVersion"
	case topo.PartialResult:
		return "PartialResult"
	case topo.NoUpdateNeeded:
		return "NoUpdateNeeded"
	case topo.NoImplementation:
		return "NoImplementation"
	case topo.ResourceExhausted:
		return "ResourceExhausted"
	case topo.InvalidPath:
		return "InvalidPath"
	case topo.InvalidArgument:
		return "InvalidArgument"
	case topo.Closed:
		return "Closed"
	case topo.Compacted:
		return "Compacted"
	case topo.LockLost:
		return "LockLost"
	case topo.Unavailable:
		return "Unavailable"
	case topo.PermissionDenied:
		return "PermissionDenied"
	case topo.ReadOnly:
		return "ReadOnly"
	case topo.NotLeader:
		return "NotLeader"
	case topo.NoLeader:
		return "NoLeader"
	}
	return fmt.Sprintf("Code%d", int(c))
}

// slashPaths returns err's message with the paths of the *topo.Error
// values in its chain shown as users type them, with a leading "/" (the
// backends name canonical paths, without it). It sets those paths in place:
// call it only on an error that is about to be printed.
func slashPaths(err error) string {
	var chain []*topo.Error
	for e := err; e != nil; {
		if te, ok := e.(*topo.Error); ok {
			chain = append(chain, te)
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			e = u.Unwrap()
		case interface{ Unwrap() []error }:
			if es := u.Unwrap(); len(es) > 0 {
				e = es[0]
			} else {
				e = nil
			}
		default:
			e = nil
		}
	}
	olds := make([]string, len(chain))
	for i, te := range chain {
		olds[i] = te.Error()
	}
	for _, te := range chain {
		// NoImplementation's "path" is the implementation's name; a
		// connection error's may be a URL (never a path: "//" is an
		// empty segment).
		if te.Path != "" && !strings.HasPrefix(te.Path, "/") && te.Code != topo.NoImplementation && !strings.Contains(te.Path, "://") {
			te.Path = "/" + te.Path
		}
	}
	msg := err.Error()
	for i, te := range chain {
		msg = strings.Replace(msg, olds[i], te.Error(), 1)
	}
	return msg
}

// escapeLines is escapeControl for a message of several lines, such as
// cobra's "unknown command" with its "Did you mean this?" suggestions: each
// line, without its leading tabs, is escaped; the newlines and those tabs
// stay. Trailing newlines are dropped.
func escapeLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		rest := strings.TrimLeft(l, "\t")
		lines[i] = l[:len(l)-len(rest)] + escapeControl(rest)
	}
	return strings.Join(lines, "\n")
}

// escapeControl makes s printable on one terminal line: control bytes
// (newlines included) and invalid UTF-8 are shown as \xNN escapes.
func escapeControl(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			if r < 0x80 {
				fmt.Fprintf(&b, "\\x%02x", r)
			} else {
				fmt.Fprintf(&b, "\\u%04x", r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
