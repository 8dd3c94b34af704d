package main

// Every bundled backend, registered for -topo-implementation.
import (
	_ "github.com/topokit/topokit/topo/consultopo"
	_ "github.com/topokit/topokit/topo/etcd2topo"
	_ "github.com/topokit/topokit/topo/memorytopo"
	_ "github.com/topokit/topokit/topo/zk2topo"
)
