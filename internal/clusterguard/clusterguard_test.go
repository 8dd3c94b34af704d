package clusterguard

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/internal/etcdembed"
)

// TestCheckEndpointsSkipsRefusingEndpoint: of two endpoints, one a
// running etcd and one where nothing listens (a member whose process is
// gone), CheckEndpoints pins the guard to the running one's cluster and
// returns at once, instead of waiting its whole timeout for the dead one
// (gRPC dials a refusing address again until the deadline): every
// topoctl command given a cluster's addresses with one member down
// waited that long.
func TestCheckEndpointsSkipsRefusingEndpoint(t *testing.T) {
	live := startMember(t)
	dead, err := etcdembed.FreeAddrs(1)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	eps := []string{"http://" + live, "http://" + dead[0]}
	var g Guard
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, DialOptions: g.DialOptions()})
	require.NoError(t, err)
	defer cli.Close()
	done := make(chan string, 1)
	go func() { done <- g.CheckEndpoints(context.Background(), cli, eps, 10*time.Minute) }()
	select {
	case got := <-done:
		require.Empty(t, got)
		require.NotZero(t, g.ID(), "pinned to the running endpoint's cluster")
	case <-ctx.Done():
		t.Fatal("CheckEndpoints waits for an endpoint where nothing listens")
	}
}
