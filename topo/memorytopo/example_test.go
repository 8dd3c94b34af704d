package memorytopo_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/middleware"
)

// A cluster manager under test talks to a topo.Server; the Factory lets the
// test break the store underneath it.
func ExampleNewServerAndFactory() {
	ctx := context.Background()
	ts, f := memorytopo.NewServerAndFactory(ctx, "zone1")
	defer ts.Close()

	conn, _ := ts.ConnForCell(ctx, "zone1")
	_, _ = conn.Create(ctx, "tablets/t1", []byte("serving"))

	f.SetError(topo.Unavailable)
	_, _, err := conn.Get(ctx, "tablets/t1")
	fmt.Println(topo.IsErrType(err, topo.Unavailable))
	f.SetError(nil)

	data, _, _ := conn.Get(ctx, "tablets/t1")
	fmt.Println(string(data), f.CallCount(memorytopo.OpGet))
	// Output:
	// true
	// serving 2
}

// Fail only the writes of one subtree, and only once.
func ExampleFactory_AddFault() {
	ctx := context.Background()
	f := memorytopo.NewFactory()
	conn, _ := f.Create("global", "", "/")
	defer conn.Close()

	errDisk := errors.New("disk full")
	remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpUpdate, Path: "keyspaces/*/Keyspace", Err: errDisk, Times: 1})
	defer remove()

	_, err := conn.Update(ctx, "keyspaces/ks1/Keyspace", []byte("v1"), nil)
	fmt.Println(errors.Is(err, errDisk), topo.IsErrType(err, topo.Unavailable))
	_, err = conn.Update(ctx, "keyspaces/ks1/Keyspace", []byte("v1"), nil)
	fmt.Println(err)
	// Output:
	// true true
	// <nil>
}

// A hung server: calls block until their context ends.
func ExampleFactory_Hang() {
	f := memorytopo.NewFactory()
	conn, _ := f.Create("global", "", "/")
	defer conn.Close()

	f.Hang()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, _, err := conn.Get(ctx, "anything")
	fmt.Println(topo.IsErrType(err, topo.Timeout))
	f.Unhang()
	// Output: true
}

// Session loss: the leader's context is cancelled and another participant
// takes over.
func ExampleConn_ExpireSession() {
	f := memorytopo.NewFactory()
	c1, _ := f.NewConn("", "/")
	c2, _ := f.NewConn("", "/")
	defer c1.Close()
	defer c2.Close()

	p1, _ := c1.NewLeaderParticipation("scheduler", "one")
	p2, _ := c2.NewLeaderParticipation("scheduler", "two")
	lead1, _ := p1.WaitForLeadership()

	c1.ExpireSession()
	<-lead1.Done()
	_, _ = p2.WaitForLeadership()
	id, _ := p2.GetCurrentLeaderID(context.Background())
	fmt.Println(id)
	p1.Stop()
	p2.Stop()
	// Output: two
}

// Reach the session controls of a Server's Conn, decorated by middleware
// or not. (Package memtest does this for every client it opens.)
func ExampleConnOf() {
	ctx := context.Background()
	logging := middleware.Logging(slog.New(slog.DiscardHandler))
	ts, _ := memorytopo.NewServerAndFactoryWithOptions(ctx, memorytopo.Options{SessionTTL: time.Second}, nil, topo.WithMiddleware(logging))
	defer ts.Close()

	conn := ts.GlobalCell()
	_, _ = conn.Create(ctx, "jobs/j1", nil)
	lock, _ := conn.Lock(ctx, "jobs", "worker")

	c, ok := memorytopo.ConnOf(conn)
	fmt.Println(ok)
	c.ExpireSession()
	<-lock.Done()
	fmt.Println(topo.IsErrType(lock.Check(ctx), topo.LockLost))
	// Output:
	// true
	// true
}
