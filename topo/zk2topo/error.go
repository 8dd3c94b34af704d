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
func (c *Conn) convert(err error, p string) error {
	if err == nil {
		return nil
	}
	var te *topo.Error
	if errors.As(err, &te) {
		return err
	}
	code := topo.Unavailable
	switch {
	case errors.Is(err, zk.ErrNoNode):
		code = topo.NoNode
	case errors.Is(err, zk.ErrNodeExists):
		code = topo.NodeExists
	case errors.Is(err, zk.ErrNotEmpty):
		code = topo.NodeNotEmpty
	case errors.Is(err, zk.ErrBadVersion):
		code = topo.BadVersion
	case errors.Is(err, zk.ErrInvalidPath):
		code = topo.InvalidPath
	case errors.Is(err, zk.ErrNoAuth), errors.Is(err, zk.ErrAuthFailed):
		code = topo.PermissionDenied
	case errors.Is(err, zk.ErrInvalidACL),
		errors.Is(err, zk.ErrBadArguments), errors.Is(err, zk.ErrNoChildrenForEphemerals), errors.Is(err, zk.ErrInvalidFlags):
		code = topo.InvalidArgument
	case err.Error() == "unknown error: -6": // the server's UNIMPLEMENTED code
		code = topo.NoImplementation
	case errors.Is(err, zk.ErrClosing), errors.Is(err, zk.ErrConnectionClosed):
		if c.closed.Load() {
			code = topo.Closed
		}
	}
	return backendkit.Wrap(code, p, err)
}
