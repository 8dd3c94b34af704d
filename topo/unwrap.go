package topo

// ConnAs finds the first Conn in conn's decorator chain that is a T: conn
// itself, then what each decorator's Unwrap() Conn method returns (see
// Middleware), the outermost first. It reports false when none is: the
// chain holds no T, or a decorator on the way has no Unwrap method. T is
// typically a backend's own Conn type or an optional interface that some
// backends implement (memorytopo.ConnOf, topo/inspect and topoctl find
// theirs with it). It calls no store and is safe for concurrent use.
func ConnAs[T any](conn Conn) (T, bool) {
	for conn != nil {
		if t, ok := conn.(T); ok {
			return t, true
		}
		u, ok := conn.(interface{ Unwrap() Conn })
		if !ok {
			break
		}
		conn = u.Unwrap()
	}
	var zero T
	return zero, false
}
