package topoctl

// The bundled backends register their factories ("etcd2", "zk2", "consul",
// "memory") when imported.
import (
	_ "github.com/topokit/topokit/topo/consultopo"
	_ "github.com/topokit/topokit/topo/etcd2topo"
	_ "github.com/topokit/topokit/topo/memorytopo"
	_ "github.com/topokit/topokit/topo/zk2topo"
)
