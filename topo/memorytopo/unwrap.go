package memorytopo

import "github.com/topokit/topokit/topo"

// ConnOf finds the *Conn behind conn: conn itself, or the Conn that
// decorators wrap, found through their Unwrap() topo.Conn methods (see
// topo.Middleware; the decorators of topo/middleware have one), the
// outermost first. It reports false when there is none: conn is of
// another backend, or a decorator on the way has no Unwrap method.
//
// Use it to reach a *Conn's test controls (ExpireSession, PauseKeepAlive,
// Partition, Heal) on a Conn that a topo.Server hands out, decorated or
// not:
//
//	c, ok := memorytopo.ConnOf(ts.GlobalCell())
//
// The memtest package keeps the *Conn of every client it opens, so tests
// using it need neither ConnOf nor Unwrap methods. Safe for concurrent
// use.
func ConnOf(conn topo.Conn) (*Conn, bool) { return topo.ConnAs[*Conn](conn) }
