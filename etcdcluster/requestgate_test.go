package etcdcluster

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestStoppingServerClosesUnderReads stops an embedded server (as etcd
// does itself after the member's removal) while clients keep reading
// from it in tight loops, before and after etcd has closed its backend,
// then closes it: no read may reach the closed backend (it would panic
// inside etcd holding the backend's read lock, and every later read and
// Close itself would wait forever), and Close returns.
func TestStoppingServerClosesUnderReads(t *testing.T) {
	cfg, err := localConfig(t, "g").withDefaults()
	require.NoError(t, err)
	n := &Node{cfg: cfg, log: cfg.Logger}
	require.NoError(t, n.startServer(cfg.Name+"="+cfg.AdvertisePeerURL, false))
	e := n.srv
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(bound):
		t.Fatal("the server did not become ready")
	}

	// The key read is committed to the backend and not in its read
	// buffer: etcd answers a read of a missing key from its in-memory
	// index, and one of a key written in the current batch from the
	// buffer, neither touching the backend's transaction.
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.ClientURL}, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Put(context.Background(), "k", "v")
	require.NoError(t, err)
	e.Server.Backend().ForceCommit()
	_, err = c.Put(context.Background(), "other", "v")
	require.NoError(t, err)

	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ok, afterStop atomic.Int64
	for range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				_, err := c.Get(rctx, "k", clientv3.WithSerializable())
				rcancel()
				if err == nil {
					ok.Add(1)
				}
				if stopped(e) {
					afterStop.Add(1)
				}
			}
		})
	}
	eventually(t, bound, "reads served", func() (bool, string) { return ok.Load() >= 100, "" })
	go e.Server.HardStop()
	<-e.Server.StopNotify()
	eventually(t, bound, "reads sent to the stopped server", func() (bool, string) { return afterStop.Load() >= 100, "" })

	closed := make(chan struct{})
	go func() {
		n.closeServer()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(bound):
		t.Fatal("closing the stopped server did not return: a request holds it")
	}
}
