package zk2topo

import (
	"errors"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// convert maps an error from the ZooKeeper client onto a *topo.Error for p
// (a canonical topo path). *topo.Error values pass through unchanged. The
// mapping:
//
//   - ErrNoNode → NoNode; ErrNodeExists → NodeExists; ErrNotEmpty →
//     NodeNotEmpty; ErrBadVersion → BadVersion;
//   - ErrInvalidPath → InvalidPath (ZooKeeper refuses some characters that
//     topo paths allow, e.g. U+0080–U+009F and U+E000–U+F8FF);
//   - ErrNoAuth, ErrAuthFailed → PermissionDenied (the ACLs refuse the
//     session's identity, or its credentials were refused): permanent, no
//     retry loop of the package retries it;
//   - ErrInvalidACL, ErrBadArguments, ErrNoChildrenForEphemerals,
//     ErrInvalidFlags → InvalidArgument (the request cannot succeed as
//     given: a bad ACL, or a file below a lock or election entry);
//   - the server's "unimplemented" answer → NoImplementation;
//   - lost connection or session (ErrConnectionClosed, ErrNoServer,
//     ErrSessionExpired, ErrSessionMoved, ErrClosing) → Unavailable, or
//     Closed once the Conn is closed;
//   - anything else → Unavailable.
//
// The frame is backendkit.MapError's (nil stays nil, *topo.Error values
// pass through); convert gives it no context and closed=false, because the
// client's calls take no context and Closed is decided per error above
// (classify).
func (c *Conn) convert(err error, p string) error {
	return backendkit.MapError(nil, err, p, false, c.classify)
}

// classify is the ZooKeeper-specific part of convert: the code of one
// client error.
func (c *Conn) classify(err error) topo.ErrorCode {
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return topo.NoNode
	case errors.Is(err, zk.ErrNodeExists):
		return topo.NodeExists
	case errors.Is(err, zk.ErrNotEmpty):
		return topo.NodeNotEmpty
	case errors.Is(err, zk.ErrBadVersion):
		return topo.BadVersion
	case errors.Is(err, zk.ErrInvalidPath):
		return topo.InvalidPath
	case errors.Is(err, zk.ErrNoAuth), errors.Is(err, zk.ErrAuthFailed):
		return topo.PermissionDenied
	case errors.Is(err, zk.ErrInvalidACL),
		errors.Is(err, zk.ErrBadArguments), errors.Is(err, zk.ErrNoChildrenForEphemerals), errors.Is(err, zk.ErrInvalidFlags):
		return topo.InvalidArgument
	case err.Error() == "unknown error: -6": // the server's UNIMPLEMENTED code
		return topo.NoImplementation
	case errors.Is(err, zk.ErrClosing), errors.Is(err, zk.ErrConnectionClosed):
		if c.closed.Load() {
			return topo.Closed
		}
	}
	return topo.Unavailable
}
