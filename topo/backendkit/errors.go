package backendkit

import (
	"context"
	"errors"

	"github.com/topokit/topokit/topo"
)

// Wrap returns a *topo.Error with the given code for path whose cause is
// err. It returns nil when err is nil. It is the one way backends build
// errors that have a cause; topo.NewError builds those that have none.
func Wrap(code topo.ErrorCode, path string, err error) error {
	if err == nil {
		return nil
	}
	return &topo.Error{Code: code, Path: path, Err: err}
}

// MapError is the frame of a backend's mapping of its store client's errors
// onto *topo.Error values for path. In this order, it returns:
//   - nil when err is nil;
//   - err unchanged when it is, or wraps, a *topo.Error (already mapped);
//   - when ctx (which may be nil) has ended, whatever err says: a Timeout
//     *topo.Error if its deadline passed, an Interrupted one if it was
//     cancelled;
//   - when closed is true (the Conn was closed): a Closed *topo.Error;
//   - otherwise a *topo.Error with the code classify(err) gives.
//
// Every *topo.Error it makes wraps err. classify holds the store-specific
// part of the mapping; it should return Unavailable for errors it does not
// know.
func MapError(ctx context.Context, err error, path string, closed bool, classify func(error) topo.ErrorCode) error {
	if err == nil {
		return nil
	}
	var te *topo.Error
	if errors.As(err, &te) {
		return err
	}
	if ctx != nil {
		if cerr := ctx.Err(); cerr != nil {
			return Wrap(contextCode(cerr), path, err)
		}
	}
	if closed {
		return Wrap(topo.Closed, path, err)
	}
	return Wrap(classify(err), path, err)
}

// maxHolderLen bounds the holder contents a LockHeldError carries.
const maxHolderLen = 512

// LockHeld returns the NodeExists *topo.Error for path that TryLock
// returns while another holder has the lock, with a *topo.LockHeldError
// naming that holder: contents is what the holder locked with (shortened
// to 512 bytes), session the store's name of its session or lease ("" if
// none).
func LockHeld(path string, contents []byte, session string) error {
	h := contents
	if len(h) > maxHolderLen {
		h = h[:maxHolderLen]
	}
	return Wrap(topo.NodeExists, path, &topo.LockHeldError{Holder: string(h), Session: session})
}

// LockNeedsFiles returns the error Lock, TryLock and LockWithTTL return
// when no file lies below dirPath, the one wording every backend uses:
//   - isFile true (dirPath is itself a file, with nothing below it): an
//     InvalidArgument *topo.Error saying that dirPath is a file and that
//     its directory, or LockName, is what to lock;
//   - isFile false: a NoNode *topo.Error saying that the directory must
//     hold a file and that LockName locks any name.
//
// Its cause is a *LockNeedsFilesError (errors.As finds it), so that a tool
// can tell this refusal from other errors with the same code.
//
// A path that is a file with files below it is also a directory: Lock
// takes it like any directory, and this error is never built for it.
// Backends build it only once their usual check found no file below
// dirPath; deciding isFile may cost that error path one read.
func LockNeedsFiles(dirPath string, isFile bool) error {
	code := topo.NoNode
	if isFile {
		code = topo.InvalidArgument
	}
	return Wrap(code, dirPath, &LockNeedsFilesError{IsFile: isFile})
}

// LockNeedsFilesError is the cause of the errors LockNeedsFiles builds:
// Lock, TryLock or LockWithTTL found no file below the directory. IsFile
// is true when the path is itself a file.
type LockNeedsFilesError struct {
	IsFile bool
}

// Error says what was wrong and what to lock instead.
func (e *LockNeedsFilesError) Error() string {
	if e.IsFile {
		return "is a file, not a directory: Lock, TryLock and LockWithTTL take the lock of a directory that holds a file (lock its parent directory), or use LockName to lock any name"
	}
	return "the directory holds no file: Lock, TryLock and LockWithTTL need a directory that holds at least one file; use LockName to lock any name"
}
