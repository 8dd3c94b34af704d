package etcd2topo

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/internal/clusterguard"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// ErrClusterMismatch is wrapped (with code InvalidArgument) by the error
// of NewConn and NewConnContext when the endpoints given belong to
// different etcd clusters: their answers carry different cluster IDs.
// Nothing was read or written through the Conn then.
var ErrClusterMismatch = errors.New("etcd2topo: endpoints belong to different etcd clusters")

// clusterCheckTimeout bounds each endpoint's status request at open.
const clusterCheckTimeout = 2 * time.Second

// checkClusterIDs asks every endpoint (when there are several) for its
// cluster ID (clusterguard.Guard.CheckEndpoints) and returns an
// InvalidArgument error wrapping ErrClusterMismatch, naming the endpoints
// and their cluster IDs, when two answers differ. An endpoint that does
// not answer within clusterCheckTimeout is not checked. When the answers
// agree it pins guard to their cluster ID. It must run before cli is
// shared.
func checkClusterIDs(ctx context.Context, cli *clientv3.Client, guard *clusterguard.Guard, endpoints []string, addr string) error {
	m := guard.CheckEndpoints(ctx, cli, endpoints, clusterCheckTimeout)
	if m == "" {
		return nil
	}
	return backendkit.Wrap(topo.InvalidArgument, addr,
		fmt.Errorf("%w: %s; refusing to use them together (was a member's data lost and the member bootstrapped anew?)", ErrClusterMismatch, m))
}
