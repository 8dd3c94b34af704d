package etcdcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/topokit/topokit/etcdcluster"
	"github.com/topokit/topokit/topo/etcd2topo"
)

// A program embeds a node and runs it until SIGINT/SIGTERM, then leaves
// the cluster gracefully. The first instance starts without seeds and
// bootstraps; the others name any running member as a seed.
func ExampleRun() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := etcdcluster.Run(ctx, etcdcluster.Config{
		Name:      "node2",
		DataDir:   "/var/lib/myapp/etcd",
		ClientURL: "http://10.0.0.2:2379",
		PeerURL:   "http://10.0.0.2:2380",
		Seeds:     []string{"http://10.0.0.1:2379"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// Operations: the status as JSON, and a new ideal size.
func ExampleStatus() {
	cli, err := etcdcluster.NewClient([]string{"127.0.0.1:2379"}, 0)
	if err != nil {
		panic(err)
	}
	defer cli.Close()
	ctx := context.Background()
	st, err := etcdcluster.Status(ctx, cli, "")
	if err != nil {
		panic(err)
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	fmt.Println(string(b))
	if err := etcdcluster.SetSize(ctx, cli, "", 5); err != nil {
		panic(err)
	}
}

// A topokit Conn on the cluster that follows its member list.
func ExampleOpenConn() {
	conn, err := etcdcluster.OpenConn(etcd2topo.Options{Endpoints: []string{"127.0.0.1:2379"}}, "/vitess/global", 0)
	if err != nil {
		panic(err)
	}
	defer conn.Close()
}
