// Command topoctl operates a topology store (etcd, ZooKeeper, Consul or
// memory) through topokit; `topoctl serve` runs an embedded etcd for it.
// See docs/quickstart.md and `topoctl --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/topokit/topokit/cmd/topoctl/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, SetDefaultLogger: true})
	stop()
	os.Exit(code)
}
