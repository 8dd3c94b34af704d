package inspect

import (
	"context"

	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
)

// SemaphoreHolders returns the admitted holders of the semaphore (package
// semaphore) in dir, in admission order, and its limit. A semaphore that
// nobody acquired yet has no holders and limit 0. Holders whose session
// ended may be listed until a contender reclaims their slot. It returns
// InvalidPath for a bad dir, InvalidArgument when dir holds no semaphore
// record, and the store's errors.
func SemaphoreHolders(ctx context.Context, conn topo.Conn, dir string) (holders []semaphore.Holder, limit int, err error) {
	return semaphore.Read(ctx, conn, dir)
}
