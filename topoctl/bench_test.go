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
// 3,000-file tree on each backend, reporting records/s: one request at a
// time, at the default --parallel, and in batches of the default --batch.
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
	zkRuns := 0 // the framework runs a benchmark more than once
	b.Run("zk2/raw-create-loop", func(b *testing.B) {
		c, _, err := zk.Connect([]string{backends[2].addr}, 10*time.Second, zk.WithLogInfo(false))
		require.NoError(b, err)
		defer c.Close()
		zkRuns++
		for i := range b.N {
			// One parent, then the 3,000 values under it: ZooKeeper
			// needs a znode's parent to exist.
			parent := fmt.Sprintf("/raw-%d-%d", zkRuns, i)
			_, err := c.Create(parent, nil, 0, zk.WorldACL(zk.PermAll))
			require.NoError(b, err)
			for j := range n {
				_, err := c.Create(fmt.Sprintf("%s/%d", parent, j), []byte(fmt.Sprintf("shard %d", j)), 0, zk.WorldACL(zk.PermAll))
				require.NoError(b, err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
	})
	// Each tree command one request at a time (parallel=1,batch=1),
	// --parallel requests in flight (batch=1), and in batches of --batch
	// writes per transaction. copy writes into the
	// backend, from a memory store holding the tree.
	type mode struct{ par, batch int }
	runs := 0
	for _, be := range backends {
		for _, op := range []string{"import", "copy", "rm-R"} {
			modes := []mode{{1, 1}, {defaultParallel, 1}, {defaultParallel, defaultBatch}}
			for _, m := range modes {
				b.Run(fmt.Sprintf("%s/%s/parallel=%d,batch=%d", be.impl, op, m.par, m.batch), func(b *testing.B) {
					// A fresh root and memory store per run: the framework
					// runs a benchmark more than once, and a second import
					// into the same root would skip every (identical) file.
					runs++
					for i := range b.N {
						root := fmt.Sprintf("bench-%s-%d-%d-%d-%d", op, m.par, m.batch, runs, i)
						if be.impl != "consul" {
							root = "/" + root
						}
						tg := target{impl: be.impl, addr: be.addr, root: root}
						run := func(tg target, args ...string) {
							code, out, errs := runB(tg, args...)
							require.Equal(b, 0, code, "%v: %s %s", args, out, errs)
						}
						par, batch := fmt.Sprint(m.par), fmt.Sprint(m.batch)
						switch op {
						case "import":
							b.StartTimer()
							run(tg, "import", "--parallel", par, "--batch", batch, in)
							b.StopTimer()
						case "copy":
							b.StopTimer()
							mem := target{impl: "memory", addr: root, root: "/"}
							run(mem, "import", in)
							b.StartTimer()
							run(mem, "copy", "--parallel", par, "--batch", batch, "--to", tg.spec())
							b.StopTimer()
						case "rm-R":
							b.StopTimer()
							run(tg, "import", in)
							b.StartTimer()
							run(tg, "rm", "-R", "--force", "--parallel", par, "--batch", batch, "/")
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
