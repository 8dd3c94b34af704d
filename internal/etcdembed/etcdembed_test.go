package etcdembed

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestStartErrors(t *testing.T) {
	_, err := Start(Config{})
	require.Error(t, err, "Dir, ClientURL and PeerURL are required")

	// A taken port is reported as ErrAddrInUse.
	addrs, err := FreeAddrs(2)
	require.NoError(t, err)
	m, err := Start(Config{Dir: t.TempDir(), ClientURL: "http://" + addrs[0], PeerURL: "http://" + addrs[1], TickMs: 10, ElectionMs: 100, NoFsync: true})
	require.NoError(t, err)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, m.WaitReady(ctx))
	require.Equal(t, addrs[0], m.ClientAddr())
	require.True(t, m.IsLeader(), "a single member leads")

	other, err := FreeAddrs(1)
	require.NoError(t, err)
	_, err = Start(Config{Dir: t.TempDir(), ClientURL: "http://" + addrs[0], PeerURL: "http://" + other[0]})
	require.ErrorIs(t, err, ErrAddrInUse)
}

func TestMemberCloseTwice(t *testing.T) {
	addrs, err := FreeAddrs(2)
	require.NoError(t, err)
	m, err := Start(Config{Name: "twice", Dir: t.TempDir(), ClientURL: "http://" + addrs[0], PeerURL: "http://" + addrs[1]})
	require.NoError(t, err)
	require.NoError(t, m.WaitReady(context.Background()))
	m.Close()
	require.NotPanics(t, m.Close)
}

// TestKeysOnlyRangeCarriesLease: the embedded server answers a keys-only
// range with each key's Lease, as Vitess's TryLock relies on (it lists the
// locked directory keys-only and takes a leased "locks" entry for a held
// lock). etcd 3.7 dropped the field from keys-only ranges
// (etcd-io/etcd#22209, unfixed in every 3.7 release), so a Vitess
// process's TryLock against `topoctl serve` blocked instead of failing
// fast; the member is configured the way `topoctl serve` configures it.
func TestKeysOnlyRangeCarriesLease(t *testing.T) {
	addrs, err := FreeAddrs(2)
	require.NoError(t, err)
	m, err := Start(Config{Name: "serve", Dir: t.TempDir(), ClientURL: "http://" + addrs[0], PeerURL: "http://" + addrs[1]})
	require.NoError(t, err)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, m.WaitReady(ctx))

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientAddr()}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer cli.Close()
	lease, err := cli.Grant(ctx, 30)
	require.NoError(t, err)
	_, err = cli.Put(ctx, "/vt/ks/locks/"+fmt.Sprint(int64(lease.ID)), "holder", clientv3.WithLease(lease.ID))
	require.NoError(t, err)
	_, err = cli.Put(ctx, "/vt/ks/file", "data")
	require.NoError(t, err)

	// Vitess's ListDir(full): keys-only, sorted by key, over the directory.
	resp, err := cli.Get(ctx, "/vt/ks/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend), clientv3.WithKeysOnly())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 2)
	require.Equal(t, "/vt/ks/file", string(resp.Kvs[0].Key))
	require.Zero(t, resp.Kvs[0].Lease)
	require.Equal(t, "/vt/ks/locks/"+fmt.Sprint(int64(lease.ID)), string(resp.Kvs[1].Key))
	require.Equal(t, int64(lease.ID), resp.Kvs[1].Lease, "a keys-only range must carry the key's lease")
}

// TestNoSlowRequestWarnings: a member warns only about requests slower
// than etcd's default threshold (300 ms). embed.NewConfig leaves the
// threshold at zero, which made the member describe every request as
// slow (a warning built from the request's text, about 4% of the server's
// CPU under load), whatever the logger did with it.
func TestNoSlowRequestWarnings(t *testing.T) {
	addrs, err := FreeAddrs(2)
	require.NoError(t, err)
	core, logs := observer.New(zap.WarnLevel)
	m, err := Start(Config{Name: "warn", Dir: t.TempDir(), ClientURL: "http://" + addrs[0], PeerURL: "http://" + addrs[1], Logger: zap.New(core)})
	require.NoError(t, err)
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, m.WaitReady(ctx))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientAddr()}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer cli.Close()
	for i := range 20 {
		_, err := cli.Put(ctx, fmt.Sprintf("/k%d", i), "v")
		require.NoError(t, err)
		_, err = cli.Get(ctx, "/k", clientv3.WithPrefix())
		require.NoError(t, err)
	}
	var slow []time.Duration
	for _, e := range logs.FilterMessage("request stats").All() {
		if d, ok := e.ContextMap()["time spent"].(time.Duration); !ok || d < 300*time.Millisecond {
			slow = append(slow, d)
		}
	}
	require.Empty(t, slow, "requests under the threshold were warned about as slow")
}
