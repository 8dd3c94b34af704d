package etcd37

// Every package of topokit that does not embed an etcd server, built here
// with etcd client v3.7 (docs/compatibility.md lists them): the test
// binary does not link if one of them stops compiling against it.
import (
	_ "github.com/topokit/topokit/election"
	_ "github.com/topokit/topokit/election/electiontest"
	_ "github.com/topokit/topokit/semaphore"
	_ "github.com/topokit/topokit/topo"
	_ "github.com/topokit/topokit/topo/backendkit"
	_ "github.com/topokit/topokit/topo/claims"
	_ "github.com/topokit/topokit/topo/consultopo"
	_ "github.com/topokit/topokit/topo/consultopo/consultest"
	_ "github.com/topokit/topokit/topo/memorytopo"
	_ "github.com/topokit/topokit/topo/memorytopo/memtest"
	_ "github.com/topokit/topokit/topo/middleware"
	_ "github.com/topokit/topokit/topo/zk2topo"
	_ "github.com/topokit/topokit/topo/zk2topo/zktest"
)
