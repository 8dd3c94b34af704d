package backendkit

import "context"

// Linked returns a context derived from ctx that also ends (cancelled)
// when other ends, and the function that cancels it and releases the link.
// A backend uses it to end a caller's request, or a background watch, when
// its Conn closes (other: the Conn's context): consultopo's calls and
// watches, etcd2topo's watches and its requests made for a lease (other:
// the lease's loss). Safe for concurrent use.
func Linked(ctx, other context.Context) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(other, cancel)
	return cctx, func() {
		stop()
		cancel()
	}
}
