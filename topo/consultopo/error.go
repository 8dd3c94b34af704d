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
func (c *Conn) convertError(ctx context.Context, err error, path string) error {
	if err == nil {
		return nil
	}
	var te *topo.Error
	if errors.As(err, &te) {
		return err
	}
	if ctx.Err() != nil {
		return topo.Wrap(topo.CodeOf(topo.FromContext(ctx, path)), path, err)
	}
	if c.ctx.Err() != nil {
		return topo.Wrap(topo.Closed, path, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return topo.Wrap(topo.Timeout, path, err)
	}
	if errors.Is(err, context.Canceled) {
		return topo.Wrap(topo.Interrupted, path, err)
	}
	var se api.StatusError
	if errors.As(err, &se) {
		switch se.Code {
		case http.StatusNotFound:
			return topo.Wrap(topo.NoNode, path, err)
		case http.StatusConflict:
			return topo.Wrap(topo.BadVersion, path, err)
		case http.StatusTooManyRequests:
			return topo.Wrap(topo.ResourceExhausted, path, err)
		case http.StatusRequestEntityTooLarge, http.StatusBadRequest:
			return topo.Wrap(topo.InvalidArgument, path, err)
		}
	}
	return topo.Wrap(topo.Unavailable, path, err)
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
