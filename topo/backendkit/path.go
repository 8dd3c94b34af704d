package backendkit

import (
	"context"
	"errors"

	"github.com/topokit/topokit/topo"
)

// JoinPath joins a canonical directory (possibly "", the cell root) and a
// name.
func JoinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// CheckValue returns an InvalidArgument *topo.Error for path when contents
// is larger than topo.MaxValueSize (in bytes), and nil otherwise.
func CheckValue(path string, contents []byte) error {
	if len(contents) > topo.MaxValueSize {
		return Wrap(topo.InvalidArgument, path, errors.New("value larger than MaxValueSize"))
	}
	return nil
}

// CheckContext returns nil while ctx is live, and otherwise the
// *topo.Error that FromContext gives. Backends call it before writing
// anything.
func CheckContext(ctx context.Context, path string) error {
	if ctx.Err() == nil {
		return nil
	}
	return FromContext(ctx, path)
}

// FromContext maps a finished context onto a typed error for path: Timeout
// when its deadline passed, Interrupted when it was cancelled. It returns
// nil while ctx is live.
func FromContext(ctx context.Context, path string) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	return Wrap(contextCode(err), path, err)
}

// contextCode is the code of a finished context's error: Timeout for a
// passed deadline, Interrupted for a cancellation.
func contextCode(err error) topo.ErrorCode {
	if errors.Is(err, context.DeadlineExceeded) {
		return topo.Timeout
	}
	return topo.Interrupted
}
