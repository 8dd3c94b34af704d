package election_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// Campaign for mastership of a resource, work while master, and hand
// mastership over.
func ExampleTopoFactory() {
	ctx := context.Background()
	// Any backend works; each instance normally runs in its own process
	// with its own connection.
	ts, f := memorytopo.NewServerAndFactory(ctx)
	defer ts.Close()
	connB, err := f.Create(topo.GlobalCell, "", "/global")
	if err != nil {
		log.Fatal(err)
	}
	defer connB.Close()

	factoryA, err := election.NewTopoFactory(ts.GlobalCell(), "instance-a")
	if err != nil {
		log.Fatal(err)
	}
	factoryB, err := election.NewTopoFactory(connB, "instance-b")
	if err != nil {
		log.Fatal(err)
	}
	a, err := factoryA.NewTopoElection(ctx, "billing-reports")
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close(ctx)
	b, err := factoryB.NewElection(ctx, "billing-reports")
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close(ctx)

	if err := a.Await(ctx); err != nil {
		log.Fatal(err)
	}
	mastership, err := a.WithMastership(ctx)
	if err != nil {
		log.Fatal(err)
	}
	leader, _ := a.Leader(ctx)
	fmt.Println("master:", leader)

	bWon := make(chan error, 1)
	go func() { bWon <- b.Await(ctx) }()

	// Do the master's work under the mastership context; it is cancelled
	// if the store takes mastership away.
	select {
	case <-mastership.Done():
		fmt.Println("lost mastership")
	default:
		fmt.Println("working as master")
	}

	// Hand over: the mastership context ends, and b wins.
	if err := a.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("a's mastership context ended:", mastership.Err() != nil)
	if err := <-bWon; err != nil {
		log.Fatal(err)
	}
	leader, _ = a.Leader(ctx)
	fmt.Println("master:", leader)
	// Output:
	// master: instance-a
	// working as master
	// a's mastership context ended: true
	// master: instance-b
}

// Run the master loop: the Runner awaits mastership, calls Work with the
// mastership context, campaigns again when a term ends, and retries store
// errors with backoff until its context ends.
func ExampleRunner() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := memorytopo.NewServer(ctx)
	defer ts.Close()

	factory, err := election.NewTopoFactory(ts.GlobalCell(), "instance-a")
	if err != nil {
		log.Fatal(err)
	}
	e, err := factory.NewElection(ctx, "compactor")
	if err != nil {
		log.Fatal(err)
	}
	defer e.Close(context.Background())

	r := &election.Runner{
		Election: e,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Work: func(mastership context.Context) error {
			fmt.Println("became master; compacting")
			// A real Work loops until mastership ends; here we stop the
			// whole Runner once the first term started.
			cancel()
			<-mastership.Done()
			fmt.Println("term over")
			return nil
		},
	}
	if err := r.Run(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("runner stopped")
	// Output:
	// became master; compacting
	// term over
	// runner stopped
}
