package consultopo

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
)

// convertError maps an error from the consul api onto a *topo.Error for
// path:
//   - ctx ended: Timeout (deadline) or Interrupted (cancelled);
//   - the Conn was closed during the call: Closed;
//   - HTTP 404: NoNode; 409: BadVersion; 429: ResourceExhausted;
//     413 and 400: InvalidArgument;
//   - anything else (transport errors, 5xx, ACL refusals): Unavailable.
//
// *topo.Error values pass through unchanged (see topo.MapError).
func (c *Conn) convertError(ctx context.Context, err error, path string) error {
	return topo.MapError(ctx, err, path, c.ctx.Err() != nil, codeOf)
}

// codeOf is the Consul-specific part of convertError's mapping.
func codeOf(err error) topo.ErrorCode {
	if errors.Is(err, context.DeadlineExceeded) {
		return topo.Timeout
	}
	if errors.Is(err, context.Canceled) {
		return topo.Interrupted
	}
	var se api.StatusError
	if errors.As(err, &se) {
		switch se.Code {
		case http.StatusNotFound:
			return topo.NoNode
		case http.StatusConflict:
			return topo.BadVersion
		case http.StatusTooManyRequests:
			return topo.ResourceExhausted
		case http.StatusRequestEntityTooLarge, http.StatusBadRequest:
			return topo.InvalidArgument
		}
	}
	return topo.Unavailable
}

// isInvalidSession reports whether err is Consul refusing a session that no
// longer exists (it was destroyed or its TTL lapsed).
func isInvalidSession(err error) bool {
	var se api.StatusError
	if errors.As(err, &se) {
		return strings.Contains(se.Body, "invalid session") || strings.Contains(se.Body, "Invalid session")
	}
	return err != nil && strings.Contains(err.Error(), "invalid session")
}

// isTransient reports whether err may go away by itself: the agent could
// not be reached or answered with a server error.
func isTransient(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var se api.StatusError
	if errors.As(err, &se) {
		return se.Code >= 500 || se.Code == http.StatusTooManyRequests
	}
	return api.IsRetryableError(err)
}
