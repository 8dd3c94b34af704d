package zk2topo

import (
	"context"
	"errors"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// convert maps a client error onto a *topo.Error for p with
// backendkit.MapError and classify (nil stays nil).
func (c *Conn) convert(err error, p string) error {
	return backendkit.MapError(context.Background(), err, p, false, c.classify)
}

// classify is the code of one client error. ZooKeeper refuses some
// characters topo paths allow (U+0080–U+009F): InvalidPath; requests that
// cannot succeed as given (a bad ACL, a file below a lock entry) are
// InvalidArgument; a lost connection is Unavailable, or Closed after Close.
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

// ErrEmptyFileWithChildren is the cause (errors.Is) of the InvalidArgument
// error of a Create, Update, or Txn CreateOp or UpdateOp of empty contents
// on a path that is only a directory or a file with files below it, or in
// a Txn that also writes a file below that path. ZooKeeper cannot hold
// such a file: an empty znode with children reads as a directory
// (docs/layout-zookeeper.md), so the file would not be there (or would
// vanish). Nothing was written. Other backends store such a file.
var ErrEmptyFileWithChildren = errors.New("zk2topo: an empty file with files below it cannot be stored on ZooKeeper, where it reads as a directory (docs/layout-zookeeper.md); nothing was written")
