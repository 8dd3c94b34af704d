package main

// Every bundled backend, registered for -topo-implementation.
import (
	_ "github.com/topokit/topokit/topo/consultopo"
	_ "github.com/topokit/topokit/topo/memorytopo"
)
