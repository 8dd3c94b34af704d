package etcd2topo

import (
	"context"
	"errors"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// convertError maps an etcd client error onto a *topo.Error for path
// (backendkit.MapError: an ended ctx first, then Closed, then codeOf).
func (c *Conn) convertError(ctx context.Context, err error, path string) error {
	return backendkit.MapError(ctx, err, path, c.isClosed(), codeOf)
}

// authErrors are etcd's refusals for want of authentication or
// permission: PermissionDenied.
var authErrors = []error{
	rpctypes.ErrPermissionDenied,
	rpctypes.ErrInvalidAuthToken,
	rpctypes.ErrAuthFailed,
	rpctypes.ErrAuthNotEnabled,
	rpctypes.ErrUserEmpty,
	rpctypes.ErrUserNotFound,
	rpctypes.ErrRoleNotGranted,
	rpctypes.ErrPermissionNotGranted,
	rpctypes.ErrInvalidAuthMgmt,
}

// isPermanent reports whether err is one no retry cures (PermissionDenied).
func isPermanent(err error) bool {
	return err != nil && codeOf(err) == topo.PermissionDenied
}

// codeOf maps an etcd error to its code, as authErrors and the cases
// below list; a *topo.Error keeps its code, and anything else (no leader
// included) is Unavailable.
func codeOf(err error) topo.ErrorCode {
	var te *topo.Error
	if errors.As(err, &te) {
		return te.Code
	}
	for _, ae := range authErrors {
		// A cancelled watch's cause is plain text.
		if errors.Is(err, ae) || strings.Contains(err.Error(), ae.Error()) {
			return topo.PermissionDenied
		}
	}
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return topo.Compacted
	case errors.Is(err, rpctypes.ErrLeaseNotFound), errors.Is(err, errLeaseGivenUp):
		return topo.LockLost
	case errors.Is(err, rpctypes.ErrTooManyRequests), errors.Is(err, rpctypes.ErrNoSpace):
		return topo.ResourceExhausted
	case errors.Is(err, rpctypes.ErrRequestTooLarge), errors.Is(err, rpctypes.ErrTooManyOps):
		return topo.InvalidArgument
	case errors.Is(err, context.DeadlineExceeded):
		return topo.Timeout
	case errors.Is(err, context.Canceled):
		return topo.Interrupted
	}
	if s, ok := status.FromError(err); ok {
		switch s.Code() {
		case codes.DeadlineExceeded:
			return topo.Timeout
		case codes.Canceled:
			return topo.Interrupted
		case codes.ResourceExhausted:
			return topo.ResourceExhausted
		case codes.OutOfRange:
			return topo.Compacted
		case codes.PermissionDenied, codes.Unauthenticated:
			return topo.PermissionDenied
		}
	}
	return topo.Unavailable
}
