package cache_test

import (
	"context"
	"fmt"

	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/topo/memorytopo"
)

// A Cache of one subtree: reads come from memory, a write is read back at
// once, and a Consistent read is answered once the Cache's watch has
// passed the store's current revision (from memory on memorytopo and
// etcd, whose Conns are SyncWatchers; from the store elsewhere).
func ExampleNew() {
	ctx := context.Background()
	conn, err := memorytopo.NewFactory().NewConn("", "/global")
	if err != nil {
		panic(err)
	}
	if _, err := conn.Create(ctx, "keyspaces/ks/Keyspace", []byte("v1")); err != nil {
		panic(err)
	}
	c, err := cache.New(conn, "keyspaces/", cache.Options{})
	if err != nil {
		panic(err)
	}
	defer c.Close() // closes conn too

	b, _, info, _ := c.GetWithInfo(ctx, "keyspaces/ks/Keyspace")
	fmt.Println(string(b), info.FromMemory)

	if _, err := c.Update(ctx, "keyspaces/ks/Keyspace", []byte("v2"), nil); err != nil {
		panic(err)
	}
	b, _, _ = c.Get(ctx, "keyspaces/ks/Keyspace")
	fmt.Println(string(b))

	b, _, info, _ = c.GetWithInfo(cache.WithMode(ctx, cache.Consistent), "keyspaces/ks/Keyspace")
	fmt.Println(string(b), info.FromMemory, c.State().Health)
	// Output:
	// v1 true
	// v2
	// v2 true healthy
}
