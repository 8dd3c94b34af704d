package topoctl

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// BenchmarkTree imports, copies and deletes (rm -R) a generated
// 3,000-file tree on each backend, reporting records/s, at the default
// --parallel and one request at a time.
func BenchmarkTree(b *testing.B) {
	const n = 3000
	in := manyFiles(b, n)
	backends := []struct{ impl, addr string }{
		{"memory", b.Name()},
		{"etcd2", etcdtest.Start(b)},
		{"zk2", zktest.Start(b)},
		{"consul", consultest.Start(b)},
	}
	// Beside them, a raw client writing the same 3,000 values one request
	// at a time (etcd Put, ZooKeeper create, Consul KV Put): the floor of a
	// sequential loop.
	b.Run("etcd2/raw-put-loop", func(b *testing.B) {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{backends[1].addr}})
		require.NoError(b, err)
		defer cli.Close()
		for i := range b.N {
			for j := range n {
				_, err := cli.Put(context.Background(), fmt.Sprintf("/raw-%d/ks%d/shards/%d/Shard", i, j%10, j), fmt.Sprintf("shard %d", j))
				require.NoError(b, err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("consul/raw-put-loop", func(b *testing.B) {
		cli, err := api.NewClient(&api.Config{Address: backends[3].addr})
		require.NoError(b, err)
		for i := range b.N {
			for j := range n {
				_, err := cli.KV().Put(&api.KVPair{Key: fmt.Sprintf("raw-%d/ks%d/shards/%d/Shard", i, j%10, j), Value: []byte(fmt.Sprintf("shard %d", j))}, nil)
				require.NoError(b, err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
	})
	b.Run("zk2/raw-create-loop", func(b *testing.B) {
		c, _, err := zk.Connect([]string{backends[2].addr}, 10*time.Second, zk.WithLogInfo(false))
		require.NoError(b, err)
		defer c.Close()
		for i := range b.N {
			// One parent, then the 3,000 values under it: ZooKeeper
			// needs a znode's parent to exist.
			parent := fmt.Sprintf("/raw-%d", i)
			_, err := c.Create(parent, nil, 0, zk.WorldACL(zk.PermAll))
			require.NoError(b, err)
			for j := range n {
				_, err := c.Create(fmt.Sprintf("%s/%d", parent, j), []byte(fmt.Sprintf("shard %d", j)), 0, zk.WorldACL(zk.PermAll))
				require.NoError(b, err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
	})
	for _, be := range backends {
		for _, par := range []int{1, defaultParallel} {
			for _, op := range []string{"import", "copy", "rm-R"} {
				b.Run(fmt.Sprintf("%s/%s/parallel=%d", be.impl, op, par), func(b *testing.B) {
					for i := range b.N {
						root := fmt.Sprintf("bench-%s-%d-%d", op, par, i)
						if be.impl != "consul" {
							root = "/" + root
						}
						tg := target{impl: be.impl, addr: be.addr, root: root}
						run := func(args ...string) {
							code, out, errs := runB(tg, args...)
							require.Equal(b, 0, code, "%v: %s %s", args, out, errs)
						}
						par := fmt.Sprint(par)
						switch op {
						case "import":
							b.StartTimer()
							run("import", "--parallel", par, in)
							b.StopTimer()
						case "copy":
							b.StopTimer()
							run("import", in)
							b.StartTimer()
							run("copy", "--parallel", par, "--to", "memory:"+b.Name()+fmt.Sprint(i)+":/")
							b.StopTimer()
						case "rm-R":
							b.StopTimer()
							run("import", in)
							b.StartTimer()
							run("rm", "-R", "--force", "--parallel", par, "/")
							b.StopTimer()
						}
					}
					b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
				})
			}
		}
	}
}

// runB runs topoctl in-process against tg for a benchmark.
func runB(tg target, args ...string) (int, string, string) {
	var out, errb syncBuffer
	code := runMain(context.Background(), tg.argv(args), streams{Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}
