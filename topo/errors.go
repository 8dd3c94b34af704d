package topo

import (
	"errors"
	"fmt"
	"strings"
)

// ErrorCode classifies every error a Conn returns. An ErrorCode is itself an
// error, so each code doubles as a constant sentinel for errors.Is:
//
//	if errors.Is(err, topo.NoNode) { ... }
type ErrorCode int

// The error codes. Every backend maps its store's own errors onto these.
const (
	// NodeExists: Create on a path that already holds a file, or TryLock on a
	// lock that is held.
	NodeExists ErrorCode = iota + 1
	// NoNode: the file or directory does not exist.
	NoNode
	// NodeNotEmpty: a directory delete found children.
	NodeNotEmpty
	// Timeout: the context's deadline passed before the call completed.
	Timeout
	// Interrupted: the context was cancelled, a watch or participation was
	// stopped, or a lock was released.
	Interrupted
	// BadVersion: a compare-and-set saw a version other than the expected one.
	BadVersion
	// PartialResult: a multi-part read returned only some of its parts.
	PartialResult
	// NoUpdateNeeded: an update function decided nothing has to change.
	NoUpdateNeeded
	// NoImplementation: the backend does not support the call (only
	// GetVersion may be unsupported), or no factory has the requested name.
	NoImplementation
	// ResourceExhausted: the store refused the call for lack of resources
	// (too many requests, quota exceeded, or too many concurrent writers
	// for a transaction to get through); nothing was applied.
	ResourceExhausted
	// InvalidPath: the path breaks the rules of CleanFilePath/CleanDirPath.
	InvalidPath
	// InvalidArgument: another argument is malformed: a negative or foreign
	// version, a value larger than MaxValueSize, a non-positive TTL, an empty
	// name or id.
	InvalidArgument
	// Closed: the Conn (or Server) was closed before or during the call. A
	// write (or Txn) that Close interrupted may have been applied: its
	// outcome is unknown, as after Timeout, Interrupted or Unavailable.
	Closed
	// Compacted: the store discarded the requested history (etcd compaction).
	Compacted
	// LockLost: a held lock or leadership was lost (lease or session expired,
	// lock node deleted behind the holder's back).
	LockLost
	// Unavailable: the store could not be reached and the call may be retried.
	Unavailable
	// PermissionDenied: the store refused the call for lack of permission
	// (etcd auth, ZooKeeper NoAuth or a failed authentication, a Consul ACL
	// denial). It is permanent: retrying with the same credentials fails
	// again, so every retry loop in topokit gives up on it at once.
	PermissionDenied
	// ReadOnly: a write, lock or election was refused because the
	// connection is in read-only mode (see topo/middleware.ReadOnly).
	ReadOnly
	// NotLeader: a leader-only call (LeaderParticipation.Term, an
	// election's Proclaim) was made by a participant that does not lead,
	// or no longer leads.
	NotLeader
	// NoLeader: nobody leads the election (LeaderParticipation.Leader).
	NoLeader
)

var codeNames = [...]string{
	NodeExists:        "node already exists",
	NoNode:            "node doesn't exist",
	NodeNotEmpty:      "node not empty",
	Timeout:           "deadline exceeded",
	Interrupted:       "interrupted",
	BadVersion:        "bad node version",
	PartialResult:     "partial result",
	NoUpdateNeeded:    "no update needed",
	NoImplementation:  "not implemented",
	ResourceExhausted: "resource exhausted",
	InvalidPath:       "invalid path",
	InvalidArgument:   "invalid argument",
	Closed:            "connection closed",
	Compacted:         "history compacted",
	LockLost:          "lock lost",
	Unavailable:       "unavailable",
	PermissionDenied:  "permission denied",
	ReadOnly:          "read-only mode",
	NotLeader:         "not the leader",
	NoLeader:          "no leader",
}

// String returns the code's short human-readable name.
func (c ErrorCode) String() string {
	if c > 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("unknown error code %d", int(c))
}

// Error makes ErrorCode an error, so that codes serve as sentinels.
func (c ErrorCode) Error() string { return c.String() }

// Error is the error type every Conn returns. It carries a Code, the Path the
// call acted on (relative to the cell root, or a name for elections and
// factories) and, where there is one, the store's underlying Err.
// errors.Is(err, code) is true for its Code; errors.As finds the *Error.
type Error struct {
	Code ErrorCode
	Path string
	Err  error
}

// NewError returns an *Error with the given code for path.
func NewError(code ErrorCode, path string) error {
	return &Error{Code: code, Path: path}
}

// Error formats the code, path and cause, e.g. "node doesn't exist: a/b".
func (e *Error) Error() string {
	msg := e.Code.String()
	if e.Path != "" {
		msg += ": " + e.Path
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the store's underlying error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is e's ErrorCode, or an *Error with the same code.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case ErrorCode:
		return e.Code == t
	case *Error:
		return e.Code == t.Code && (t.Path == "" || t.Path == e.Path)
	}
	return false
}

// IsErrType reports whether err, or any error it wraps, carries code.
func IsErrType(err error, code ErrorCode) bool {
	return err != nil && errors.Is(err, code)
}

// CodeOf returns the ErrorCode of the first *Error or ErrorCode in err's
// chain, or 0 when there is none.
func CodeOf(err error) ErrorCode {
	var te *Error
	if errors.As(err, &te) {
		return te.Code
	}
	var c ErrorCode
	if errors.As(err, &c) {
		return c
	}
	return 0
}

// LockHeldError is the cause of the NodeExists error that TryLock returns
// while another holder has the lock, on backends that can read who: Holder
// is the contents that holder locked with (its description, as given to
// Lock), shortened to at most 512 bytes; Session is the store's name of
// its session or lease, when there is one. Find it with errors.As.
type LockHeldError struct {
	Holder  string
	Session string
}

// Error says who holds the lock.
func (e *LockHeldError) Error() string {
	msg := "the lock is held by " + e.Holder
	if e.Holder == "" {
		msg = "the lock is held"
	}
	if e.Session != "" {
		msg += " (session " + e.Session + ")"
	}
	return msg
}

// UnreachableError is the cause of the Unavailable error of a connection
// that could not be opened because no server of the store answered at
// its addresses within the dial bound (the backend's DialTimeout), as the
// bundled backends return it: etcd2topo's NewConn when no member
// answered (with TLS: completed the handshake); zk2topo's NewConn when no
// server gave a session, and its resumption of a session when no server
// gave that one back; consultopo's NewConn when the agent did not answer
// its first request, refused the connection or the TLS handshake, or
// was reached with plain HTTP on its HTTPS port. Such an error names the
// addresses in its message. A store that answered and refused
// (credentials, an error status) is not unreachable: its error has none.
// Find it with errors.As; CodeOf and errors.Is see through it to the
// *Error around it and to what Err wraps.
type UnreachableError struct {
	// Addrs are the addresses tried, as given (host:port, or a URL).
	Addrs []string
	// Err describes the failure (its message is the UnreachableError's);
	// it may wrap the store client's error.
	Err error
}

// Error is Err's message, or, without Err, one naming Addrs.
func (e *UnreachableError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return "no server answered at " + strings.Join(e.Addrs, ",")
}

// Unwrap returns Err.
func (e *UnreachableError) Unwrap() error { return e.Err }
