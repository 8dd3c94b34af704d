package templatetopo_test

import (
	"context"
	"fmt"

	"github.com/topokit/topokit/examples/templatetopo"
	"github.com/topokit/topokit/topo"
)

// Two Conns on one in-process store: a lock holder's guarded write goes
// through while it holds the lock, and is refused once the store ended its
// session, after a successor took the lock.
func Example() {
	ctx := context.Background()
	store := templatetopo.NewStore()
	a, _ := store.NewConn("/cell")
	defer a.Close()
	b, _ := store.NewConn("/cell")
	defer b.Close()

	_, _ = a.Create(ctx, "shard/state", []byte("v0"))
	la, _ := a.Lock(ctx, "shard", "a")
	_, err := topo.GuardedUpdate(ctx, a, la, "shard/state", []byte("v1 by a"), nil)
	fmt.Println("a's guarded write:", err)

	a.ExpireSession() // the store drops a's session; a learns it first
	lb, _ := b.Lock(ctx, "shard", "b")
	fmt.Println("b's token is greater:", lb.Token() > la.Token())
	_, err = topo.GuardedUpdate(ctx, a, la, "shard/state", []byte("stale"), nil)
	fmt.Println("a's late guarded write:", err)
	data, _, _ := b.Get(ctx, "shard/state")
	fmt.Println("state:", string(data))
	// Output:
	// a's guarded write: <nil>
	// b's token is greater: true
	// a's late guarded write: transaction op 0 (if-held): lock lost
	// state: v1 by a
}
