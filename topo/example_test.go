package topo_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"

	// Importing a backend registers its factory; this one is "memory".
	// Real deployments import etcd2topo ("etcd2"), zk2topo ("zk2") or
	// consultopo ("consul") instead.
	"github.com/topokit/topokit/topo/memorytopo"
)

// Open the global cell of a topology by implementation name, address and
// root, then write and read a file.
func ExampleOpenServer() {
	ts, err := topo.OpenServer("memory", "example-open", "/global")
	if err != nil {
		log.Fatal(err)
	}
	defer ts.Close()

	ctx := context.Background()
	conn := ts.GlobalCell()
	v1, err := conn.Create(ctx, "config/settings", []byte("replicas=3"))
	if err != nil {
		log.Fatal(err)
	}
	// A compare-and-set update: it fails with BadVersion if someone else
	// wrote the file since we read version v1.
	if _, err := conn.Update(ctx, "config/settings", []byte("replicas=5"), v1); err != nil {
		log.Fatal(err)
	}
	data, _, err := conn.Get(ctx, "config/settings")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(data))

	_, err = conn.Create(ctx, "config/settings", nil)
	fmt.Println(topo.IsErrType(err, topo.NodeExists))
	// Output:
	// replicas=5
	// true
}

// Register a cell in the global cell, then open it by name. Each cell's
// CellInfo names the address and root of the cell's own store.
func ExampleServer_ConnForCell() {
	ctx := context.Background()
	ts, err := topo.OpenServer("memory", "example-cells", "/global")
	if err != nil {
		log.Fatal(err)
	}
	defer ts.Close()

	err = ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{
		ServerAddress: "example-cells", // the same store here; usually a local one
		Root:          "/zone1",
	})
	if err != nil {
		log.Fatal(err)
	}
	names, err := ts.GetCellInfoNames(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(names)

	zone1, err := ts.ConnForCell(ctx, "zone1")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := zone1.Create(ctx, "tablets/t1", []byte("serving")); err != nil {
		log.Fatal(err)
	}
	// The cell's files live under its own root, not in the global cell.
	_, _, err = ts.GlobalCell().Get(ctx, "tablets/t1")
	fmt.Println(topo.IsErrType(err, topo.NoNode))
	// Output:
	// [zone1]
	// true
}

// Take the exclusive lock on a directory around a read-modify-write.
func ExampleConn_Lock() {
	ctx := context.Background()
	ts := memorytopo.NewServer(ctx)
	defer ts.Close()
	conn := ts.GlobalCell()

	if _, err := conn.Create(ctx, "keyspaces/ks1/config", []byte("v1")); err != nil {
		log.Fatal(err)
	}
	// The context bounds only the wait for the lock.
	lockCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lock, err := conn.Lock(lockCtx, "keyspaces/ks1", "resharding by example")
	if err != nil {
		log.Fatal(err)
	}
	// Another holder cannot take it meanwhile.
	_, err = conn.TryLock(ctx, "keyspaces/ks1", "someone else")
	fmt.Println("TryLock while held:", topo.CodeOf(err))

	// Check before each write that the lock still holds.
	if err := lock.Check(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := conn.Update(ctx, "keyspaces/ks1/config", []byte("v2"), nil); err != nil {
		log.Fatal(err)
	}
	if err := lock.Unlock(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("Check after Unlock:", topo.CodeOf(lock.Check(ctx)))
	// Output:
	// TryLock while held: node already exists
	// Check after Unlock: interrupted
}

// Watch one file: the current value first, then every change, until the
// file is deleted or the context is cancelled.
func ExampleConn_Watch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := memorytopo.NewServer(ctx)
	defer ts.Close()
	conn := ts.GlobalCell()

	if _, err := conn.Create(ctx, "serving/primary", []byte("tablet-1")); err != nil {
		log.Fatal(err)
	}
	current, changes, err := conn.Watch(ctx, "serving/primary")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("current:", string(current.Contents))

	if _, err := conn.Update(ctx, "serving/primary", []byte("tablet-2"), nil); err != nil {
		log.Fatal(err)
	}
	wd := <-changes
	fmt.Println("changed:", string(wd.Contents))

	if err := conn.Delete(ctx, "serving/primary", nil); err != nil {
		log.Fatal(err)
	}
	// A delete (like a cancelled ctx) is the last event; then the channel
	// closes. Rapid changes may be coalesced, but the last value sent is
	// always the latest.
	for wd := range changes {
		fmt.Println("ended:", topo.CodeOf(wd.Err))
	}
	// Output:
	// current: tablet-1
	// changed: tablet-2
	// ended: node doesn't exist
}

// Watch every file under a prefix: the initial list, then one event per
// change or delete.
func ExampleConn_WatchRecursive() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := memorytopo.NewServer(ctx)
	defer ts.Close()
	conn := ts.GlobalCell()

	if _, err := conn.Create(ctx, "members/a", []byte("10.0.0.1")); err != nil {
		log.Fatal(err)
	}
	initial, events, err := conn.WatchRecursive(ctx, "members/")
	if err != nil {
		log.Fatal(err)
	}
	for _, wd := range initial {
		fmt.Println("initial:", wd.Path, string(wd.Contents))
	}
	if _, err := conn.Create(ctx, "members/b", []byte("10.0.0.2")); err != nil {
		log.Fatal(err)
	}
	if err := conn.Delete(ctx, "members/a", nil); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		wd := <-events
		if wd.Err != nil {
			fmt.Println("deleted:", wd.Path, topo.CodeOf(wd.Err))
		} else {
			fmt.Println("changed:", wd.Path, string(wd.Contents))
		}
	}
	cancel()
	for range events {
		// Drain until the channel closes (its last event is Interrupted).
	}
	// Output:
	// initial: members/a 10.0.0.1
	// changed: members/b 10.0.0.2
	// deleted: members/a node doesn't exist
}

// Elect a leader with the Conn's low-level LeaderParticipation. The
// election package wraps this in a higher-level Election with a runner.
func ExampleConn_NewLeaderParticipation() {
	ctx := context.Background()
	ts, f := memorytopo.NewServerAndFactory(ctx)
	defer ts.Close()
	// Two candidates, each with its own connection (its own session).
	connA := ts.GlobalCell()
	connB, err := f.Create(topo.GlobalCell, "", "/global")
	if err != nil {
		log.Fatal(err)
	}
	defer connB.Close()

	a, err := connA.NewLeaderParticipation("scheduler", "host-a")
	if err != nil {
		log.Fatal(err)
	}
	b, err := connB.NewLeaderParticipation("scheduler", "host-b")
	if err != nil {
		log.Fatal(err)
	}

	leading, err := a.WaitForLeadership()
	if err != nil {
		log.Fatal(err)
	}
	id, _ := b.GetCurrentLeaderID(ctx)
	fmt.Println("leader:", id)

	bLeads := make(chan context.Context)
	go func() {
		ctx, err := b.WaitForLeadership()
		if err != nil {
			log.Fatal(err)
		}
		bLeads <- ctx
	}()
	a.Stop() // a gives up: its leadership context ends and b takes over.
	<-leading.Done()
	<-bLeads
	id, _ = a.GetCurrentLeaderID(ctx)
	fmt.Println("leader:", id)
	b.Stop()
	// Output:
	// leader: host-a
	// leader: host-b
}
