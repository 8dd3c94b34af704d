package topo

// ConnInfo describes the connection that a Middleware wraps.
type ConnInfo struct {
	// Implementation is the name of the factory that opened the connection
	// ("etcd2", "zk2", "consul", "memory", or a custom backend's name).
	Implementation string
	// Cell is the cell the connection serves (GlobalCell for the global
	// cell).
	Cell string
	// ServerAddress and Root are the store address and root the
	// connection was opened with.
	ServerAddress, Root string
}

// Middleware decorates a Conn: it returns a Conn that adds behaviour
// (metrics, tracing, access control, ...) and forwards every call to next.
// The returned Conn must be safe for concurrent use, honour the Conn
// contract (a decorator may refuse a call with a typed error, but it must
// not change what a forwarded call returns), and close next in its Close.
// The package topo/middleware builds middlewares from a small set of hooks,
// so that a decorator need not implement every method. A decorator should
// also have a method
//
//	Unwrap() Conn
//
// returning next, so that code holding the decorated Conn can find the
// backend's own behind it (memorytopo.ConnOf does, for a test's session
// and partition controls); the decorators of topo/middleware have it.
type Middleware func(info ConnInfo, next Conn) Conn

// Decorate applies mws to conn in order, so that the first middleware is the
// outermost: Decorate(info, c, a, b) is a(info, b(info, c)). With no
// middleware it returns conn itself, so an undecorated Conn costs nothing
// extra. Nil middlewares are ignored.
func Decorate(info ConnInfo, conn Conn, mws ...Middleware) Conn {
	for i := len(mws) - 1; i >= 0; i-- {
		if mws[i] != nil {
			conn = mws[i](info, conn)
		}
	}
	return conn
}
