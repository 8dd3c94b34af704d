package etcd37

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/internal/freeport"
)

// topoctl is the topoctl binary built from the main module (etcd server
// v3.6.16), and server the etcd it serves for the tests of this package.
var (
	topoctl string
	server  *etcdProc
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "etcd37-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	topoctl = filepath.Join(dir, "topoctl")
	build := exec.Command("go", "build", "-o", topoctl, "./cmd/topoctl")
	build.Dir = filepath.Join("..", "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building topoctl from the main module:", err)
		return 1
	}
	server, err = startEtcd(filepath.Join(dir, "shared"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer server.stop()
	return m.Run()
}

// etcdProc is a `topoctl serve` process: a single-member etcd.
type etcdProc struct {
	dir, addr, peer string
	cmd             *exec.Cmd
	exited          chan struct{}
}

// startEtcd starts a member keeping its data in dir, on free ports.
func startEtcd(dir string) (*etcdProc, error) {
	addrs, err := freeport.Addrs(2)
	if err != nil {
		return nil, err
	}
	p := &etcdProc{dir: dir, addr: addrs[0], peer: addrs[1]}
	return p, p.start()
}

// start runs the member and returns once it answers.
func (p *etcdProc) start() error {
	p.cmd = exec.Command(topoctl, "serve", "--data-dir", p.dir,
		"--listen-client-address", p.addr, "--listen-peer-address", p.peer)
	p.cmd.Stdout, p.cmd.Stderr = nil, os.Stderr
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("starting topoctl serve: %w", err)
	}
	p.exited = make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		p.stop()
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Get(ctx, "health")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("topoctl serve on %s exited before it was ready: %v", p.addr, p.cmd.ProcessState)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return fmt.Errorf("topoctl serve on %s not ready: %w", p.addr, err)
		}
	}
}

// stop ends the member (SIGTERM: a clean stop, its data kept) and waits
// for it to exit.
func (p *etcdProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// restart stops the member and starts it again on the same ports and
// data directory.
func (p *etcdProc) restart() error {
	p.stop()
	for attempt := 0; ; attempt++ {
		err := p.start()
		if err == nil || attempt == 20 {
			return err
		}
		// The old process's ports may linger for a moment.
		if ln, lerr := net.Listen("tcp", p.addr); lerr == nil {
			ln.Close()
		}
	}
}

// v37Only compiles only against etcd client v3.7 (whose Cmp wraps the
// generated Compare behind GetCompare; in v3.6 Cmp is the Compare), so
// this package cannot be built, by mistake, with the v3.6 client.
var v37Only = (*clientv3.Cmp).GetCompare

// TestServerAnswers: the etcd this package runs (server v3.6.16, built
// from the main module) answers the v3.7 client.
func TestServerAnswers(t *testing.T) {
	require.NotNil(t, v37Only)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{server.addr}, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	defer cli.Close()
	st, err := cli.Status(context.Background(), server.addr)
	require.NoError(t, err)
	require.Equal(t, "3.6.16", st.Version)
}
