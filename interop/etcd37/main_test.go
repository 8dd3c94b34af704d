package etcd37

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// serverAddr is the client address of the etcd this package's tests
// share: server v3.6.16 (etcdtest's default), a process of its own that
// etcdtest builds in a module of its own, so that this module's client
// v3.7 and that server never meet at compile time.
var serverAddr string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	addr, stop, err := etcdtest.Launch()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	serverAddr = addr
	return m.Run()
}

// v37Only compiles only against etcd client v3.7 (whose Cmp wraps the
// generated Compare behind GetCompare; in v3.6 Cmp is the Compare), so
// this package cannot be built, by mistake, with the v3.6 client.
var v37Only = (*clientv3.Cmp).GetCompare

// TestServerAnswers: the etcd etcdtest runs (server v3.6.16 unless
// TOPOKIT_ETCDTEST_SERVER says otherwise) answers the v3.7 client.
func TestServerAnswers(t *testing.T) {
	require.NotNil(t, v37Only)
	want, err := etcdtest.ServerVersion()
	require.NoError(t, err)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{serverAddr}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer cli.Close()
	st, err := cli.Status(context.Background(), serverAddr)
	require.NoError(t, err)
	require.Equal(t, strings.TrimPrefix(want, "v"), st.Version)
}
