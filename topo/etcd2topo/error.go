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

// convertError maps an error from the etcd client onto a *topo.Error for
// path. A finished ctx wins (Timeout or Interrupted), then a closed Conn
// (Closed); etcd's own errors map as follows:
//
//	compacted revision          -> Compacted
//	auth refusals (see authErrors) -> PermissionDenied
//	lease not found             -> LockLost
//	too many requests, no space -> ResourceExhausted
//	request too large, too many
//	operations in a transaction -> InvalidArgument
//	no leader, unavailable      -> Unavailable
//	deadline exceeded           -> Timeout
//	cancelled                   -> Interrupted
//
// and anything else to Unavailable (the store failed the call).
// *topo.Error values pass through unchanged (see backendkit.MapError).
func (c *Conn) convertError(ctx context.Context, err error, path string) error {
	return backendkit.MapError(ctx, err, path, c.isClosed(), codeOf)
}

// authErrors are etcd's refusals of a request for want of authentication
// or permission: a missing or invalid token, bad credentials, a user,
// role or permission that does not exist or was not granted, or auth not
// enabled for a user. They map to PermissionDenied, which every retry
// loop of the package treats as permanent.
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

// isPermanent reports whether err is an etcd error that no retry can
// cure: an auth refusal (PermissionDenied). Retry loops stop on it.
func isPermanent(err error) bool {
	return err != nil && codeOf(err) == topo.PermissionDenied
}

// codeOf is the etcd-specific part of convertError's mapping; NewConn
// also uses it.
func codeOf(err error) topo.ErrorCode {
	var te *topo.Error
	if errors.As(err, &te) {
		return te.Code
	}
	for _, ae := range authErrors {
		// A cancelled watch reports its cause as plain text ("rpc error:
		// code = PermissionDenied desc = etcdserver: permission denied").
		if errors.Is(err, ae) || strings.Contains(err.Error(), ae.Error()) {
			return topo.PermissionDenied
		}
	}
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return topo.Compacted
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
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
