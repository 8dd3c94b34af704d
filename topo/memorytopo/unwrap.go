package memorytopo

import "github.com/topokit/topokit/topo"

// ConnOf finds the *Conn behind conn, itself or wrapped by decorators
// with Unwrap() topo.Conn methods (see topo.Middleware), for its test
// controls (ExpireSession, PauseKeepAlive, Partition, Heal):
//
//	c, ok := memorytopo.ConnOf(ts.GlobalCell())
//
// It reports false when conn is of another backend or a decorator on the
// way has no Unwrap method. Safe for concurrent use.
func ConnOf(conn topo.Conn) (*Conn, bool) { return topo.ConnAs[*Conn](conn) }
