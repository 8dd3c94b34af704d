package etcd2topo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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
// status and returns an error wrapping ErrClusterMismatch, naming the
// endpoints and their cluster IDs, when two answers carry different
// cluster IDs. An endpoint that does not answer within clusterCheckTimeout
// is not checked. When the answers agree it pins guard to their cluster
// ID. It must run before cli is shared (Status on one
// endpoint dials it apart from the client's balancer).
func checkClusterIDs(ctx context.Context, cli *clientv3.Client, guard *clusterguard.Guard, endpoints []string, addr string) error {
	if len(endpoints) < 2 {
		return nil
	}
	ctx, cancel := context.WithTimeout(clusterguard.Skip(ctx), clusterCheckTimeout)
	defer cancel()
	ids := make([]uint64, len(endpoints))
	var wg sync.WaitGroup
	for i, ep := range endpoints {
		wg.Go(func() {
			if sr, err := cli.Status(ctx, ep); err == nil && sr.Header != nil {
				ids[i] = sr.Header.ClusterId
			}
		})
	}
	wg.Wait()
	byID := map[uint64][]string{}
	var order []uint64
	for i, id := range ids {
		if id == 0 {
			continue
		}
		if _, ok := byID[id]; !ok {
			order = append(order, id)
		}
		byID[id] = append(byID[id], endpoints[i])
	}
	if len(order) == 1 {
		guard.Pin(order[0])
	}
	if len(order) < 2 {
		return nil
	}
	var parts []string
	for _, id := range order {
		eps := byID[id]
		slices.Sort(eps)
		parts = append(parts, fmt.Sprintf("cluster %x at %s", id, strings.Join(eps, ",")))
	}
	return backendkit.Wrap(topo.InvalidArgument, addr,
		fmt.Errorf("%w: %s; refusing to use them together (was a member's data lost and the member bootstrapped anew?)", ErrClusterMismatch, strings.Join(parts, " and ")))
}
