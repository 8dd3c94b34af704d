//go:build etcdtestserver

// Command server is the etcd member etcdtest runs for tests, in a process
// of its own. etcdtest builds it in a module of its own (this file with
// the go.mod of the etcd server version chosen, see ../server.go), so that
// the etcd client the code under test links and the etcd server it talks
// to move independently. The build tag keeps it out of topokit's module.
//
// It reads one JSON line from standard input (the config type below),
// starts the member, and writes to standard output "started" once it
// listens, then "ready <bcrypt cost>" once it serves clients; on failure
// it writes "error <message>" instead and exits with status 1. It stops the member cleanly and exits
// when standard input closes (etcdtest closes it, or etcdtest's process
// ended) or on SIGTERM.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// config is etcdtest's memberConfig, as JSON.
type config struct {
	Name, Dir                        string
	ClientURL, PeerURL               string
	AdvertisePeerURL                 string
	InitialCluster, ClusterToken     string
	Existing, NoFsync                bool
	TickMs, ElectionMs, BcryptCost   uint
	CertFile, KeyFile, TrustedCAFile string
	ClientCertAuth                   bool
}

func main() {
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadBytes('\n')
	if err != nil {
		fail(fmt.Errorf("reading the config: %w", err))
	}
	var cfg config
	if err := json.Unmarshal(line, &cfg); err != nil {
		fail(fmt.Errorf("parsing the config: %w", err))
	}
	ec, err := embedConfig(cfg)
	if err != nil {
		fail(err)
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		fail(err)
	}
	fmt.Println("started")
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(eof)
	}()
	select {
	case <-e.Server.ReadyNotify():
		fmt.Printf("ready %d\n", e.Config().BcryptCost)
	case err := <-e.Err():
		e.Close()
		fail(err)
	case <-stop:
		e.Close()
		return
	case <-eof:
		e.Close()
		return
	}
	select {
	case <-stop:
	case <-eof:
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcdtest server:", err)
	}
	e.Close()
}

func embedConfig(cfg config) (*embed.Config, error) {
	cu, err := url.Parse(cfg.ClientURL)
	if err != nil {
		return nil, err
	}
	pu, err := url.Parse(cfg.PeerURL)
	if err != nil {
		return nil, err
	}
	apu := pu
	if cfg.AdvertisePeerURL != "" {
		if apu, err = url.Parse(cfg.AdvertisePeerURL); err != nil {
			return nil, err
		}
	}
	ec := embed.NewConfig()
	ec.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	ec.Name, ec.Dir = cfg.Name, cfg.Dir
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*apu}
	ec.InitialCluster = cfg.InitialCluster
	if ec.InitialCluster == "" {
		ec.InitialCluster = cfg.Name + "=" + apu.String()
	}
	ec.InitialClusterToken = cfg.ClusterToken
	if cfg.Existing {
		ec.ClusterState = embed.ClusterStateFlagExisting
	}
	ec.TickMs, ec.ElectionMs = cfg.TickMs, cfg.ElectionMs
	ec.UnsafeNoFsync = cfg.NoFsync
	ec.BcryptCost = cfg.BcryptCost
	ec.ClientTLSInfo.CertFile = cfg.CertFile
	ec.ClientTLSInfo.KeyFile = cfg.KeyFile
	ec.ClientTLSInfo.TrustedCAFile = cfg.TrustedCAFile
	ec.ClientTLSInfo.ClientCertAuth = cfg.ClientCertAuth
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	return ec, nil
}

func fail(err error) {
	fmt.Printf("error %s\n", err)
	os.Exit(1)
}
