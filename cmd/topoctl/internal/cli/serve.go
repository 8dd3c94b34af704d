package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/topokit/topokit/internal/etcdembed"
)

func newServeCmd(o *options) *cobra.Command {
	var (
		dataDir    string
		clientAddr string
		peerAddr   string
		name       string
		etcdLogs   bool
		readyWait  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a single-member embedded etcd for topoctl and other clients",
		Long: `Run a single-member etcd inside topoctl until interrupted (Ctrl-C or
SIGTERM), then stop it cleanly. Its data lives in --data-dir and survives
restarts. The default data directory is $` + EnvDataDir + `, else
$XDG_DATA_HOME/topokit/etcd, else ~/.local/share/topokit/etcd.

Once ready it prints the client URL and the flags and environment variables
other commands need. With the default data directory, other topoctl
commands find it with no flags at all: serve records its client address in
that directory. The record stays after serve stops: a command given no
address first checks (with a TCP dial of at most 1s) that something listens
there, and when nothing does it fails at once, asking whether "topoctl
serve" is running, instead of waiting for --timeout. With --output json it
prints that as one JSON object.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if dataDir == "" {
				d, err := defaultDataDir(o.getenv)
				if err != nil {
					return usageError{err}
				}
				dataDir = d
			}
			for _, a := range []string{clientAddr, peerAddr} {
				if _, _, err := net.SplitHostPort(a); err != nil {
					return usagef("listen address %q: want host:port", a)
				}
			}
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return err
			}
			var lg *zap.Logger
			if etcdLogs {
				var err error
				if lg, err = zap.NewProduction(); err != nil {
					return err
				}
			}
			m, err := etcdembed.Start(etcdembed.Config{
				Name:      name,
				Dir:       dataDir,
				ClientURL: "http://" + clientAddr,
				PeerURL:   "http://" + peerAddr,
				Logger:    lg,
			})
			if err != nil {
				if errors.Is(err, etcdembed.ErrAddrInUse) {
					return fmt.Errorf("%w (is another \"topoctl serve\" or etcd running? pick other ports with --listen-client-address/--listen-peer-address)", err)
				}
				return err
			}
			// Member.Close must run once (a second embed.Etcd.Close panics).
			closeMember := sync.OnceFunc(m.Close)
			defer closeMember()
			rctx, cancel := context.WithTimeout(ctx, readyWait)
			err = m.WaitReady(rctx)
			cancel()
			if err != nil {
				return err
			}
			addr := m.ClientAddr()
			ef := endpointFile(dataDir)
			if err := os.WriteFile(ef, []byte(addr+"\n"), 0o600); err != nil {
				return err
			}
			o.log.Info("embedded etcd ready", "client_url", "http://"+addr, "data_dir", dataDir)
			o.printServe(addr, dataDir)

			select {
			case <-ctx.Done():
				o.log.Info("stopping the embedded etcd")
			case err := <-m.Etcd.Err():
				if err != nil {
					return fmt.Errorf("embedded etcd failed: %w", err)
				}
			}
			closeMember()
			if !o.jsonOut() {
				o.printf("embedded etcd stopped; its data stays in %s\n", dataDir)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "", "etcd data directory (default: $"+EnvDataDir+", else $XDG_DATA_HOME/topokit/etcd, else ~/.local/share/topokit/etcd)")
	f.StringVar(&clientAddr, "listen-client-address", DefaultClientAddress, "host:port to serve clients on")
	f.StringVar(&peerAddr, "listen-peer-address", DefaultPeerAddress, "host:port to serve etcd peers on")
	f.StringVar(&name, "name", "topoctl", "etcd member name")
	f.BoolVar(&etcdLogs, "etcd-logs", false, "print etcd's own logs (JSON) to stderr")
	f.DurationVar(&readyWait, "ready-timeout", time.Minute, "how long to wait for etcd to be ready")
	return cmd
}

// printServe tells the user how other commands reach the embedded etcd.
func (o *options) printServe(addr, dataDir string) {
	flags := []string{"--topo-implementation", "etcd2", "--topo-global-server-address", addr, "--topo-global-root", o.root}
	env := map[string]string{EnvImplementation: "etcd2", EnvServerAddress: addr, EnvRoot: o.root}
	def, _ := defaultDataDir(o.getenv)
	noFlags := (dataDir == def || addr == DefaultClientAddress) && o.root == DefaultRoot
	if o.jsonOut() {
		_ = o.printJSON(map[string]any{
			"client_url": "http://" + addr, "server_address": addr, "data_dir": dataDir,
			"flags": flags, "env": env, "no_flags_needed": noFlags,
		})
		return
	}
	o.printf("embedded etcd ready\n")
	o.printf("  client URL:     http://%s\n", addr)
	o.printf("  data directory: %s\n", dataDir)
	if noFlags {
		o.printf("Other topoctl commands use it with no flags, or explicitly with:\n")
	} else {
		o.printf("Other topoctl commands use it with:\n")
	}
	o.printf("  topoctl %s ...\n", strings.Join(flags, " "))
	o.printf("or with these environment variables:\n")
	o.printf("  export %s=etcd2 %s=%s %s=%s\n", EnvImplementation, EnvServerAddress, addr, EnvRoot, o.root)
	o.printf("Stop it with Ctrl-C (SIGINT) or SIGTERM.\n")
}
