package topoctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.uber.org/zap"

	"github.com/topokit/topokit/etcdcluster"
)

// clusterFlags are serve's flags for a self-managing etcd cluster.
type clusterFlags struct {
	cluster       bool
	seeds         string
	clientOnly    bool
	advertisePeer string
	prefix        string
	expect        int
}

func (c *clusterFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&c.cluster, "cluster", false, "run a node of a self-managing etcd cluster (bootstraps one when there are no seeds and no member data)")
	f.StringVar(&c.seeds, "seeds", "", "comma-separated client URLs of running cluster members to join (implies --cluster)")
	f.BoolVar(&c.clientOnly, "client-only", false, "with --seeds: stay a client of the cluster, never a member")
	f.StringVar(&c.advertisePeer, "advertise-peer-url", "", "with --cluster: peer URL other members reach this one at (default: the listen address; required when that is 0.0.0.0 or ::)")
	f.IntVar(&c.expect, "bootstrap-expect", 0, "with --seeds: when no member answers at the seeds, form a new cluster once this many nodes started with the same --seeds and --bootstrap-expect see each other (exactly one bootstraps; the ideal size becomes this number)")
	f.StringVar(&c.prefix, "cluster-prefix", etcdcluster.DefaultPrefix, "etcd key prefix of the cluster's own keys")
}

func (c *clusterFlags) enabled() bool { return c.cluster || c.seeds != "" || c.clientOnly }

// checkAdvertisePeer requires --advertise-peer-url when the peer address
// listens on every interface, and checks its scheme.
func (c *clusterFlags) checkAdvertisePeer(peerAddr string, tls bool) error {
	h, _, _ := net.SplitHostPort(peerAddr)
	if isUnspecified(h) && c.advertisePeer == "" {
		return usagef("--listen-peer-address %s listens on every interface, which is no address other members can dial: give --advertise-peer-url %sHOST:%s with an address of this machine they can reach", peerAddr, scheme(tls), portOf(peerAddr))
	}
	if c.advertisePeer != "" {
		return checkURL("--advertise-peer-url", c.advertisePeer, tls)
	}
	return nil
}

// serveNode is serve's description of the node it runs: its name, data
// directory, listen addresses, raft timing (milliseconds) and whether
// etcd's own logs are printed.
type serveNode struct {
	name, dataDir, clientAddr, peerAddr string
	tickMs, electionMs                  uint
	etcdLogs                            bool
}

// serveCluster runs node nd of a self-managing etcd cluster until ctx
// ends, then leaves it gracefully.
func serveCluster(ctx context.Context, out *printer, c clusterFlags, sec *serveSecurity, nd serveNode) error {
	name, dataDir := nd.name, nd.dataDir
	if c.clientOnly && c.seeds == "" {
		return usagef("--client-only needs --seeds")
	}
	if c.expect != 0 && (c.seeds == "" || c.clientOnly || c.expect < 0 || c.expect > etcdcluster.MaxVoters) {
		return usagef("--bootstrap-expect needs --seeds, a node that is not --client-only, and a number of nodes from 1 to %d", etcdcluster.MaxVoters)
	}
	co := sec.clientOptions()
	lg := out.log
	if !out.logLevelGiven {
		// What an operator must see even at the default level (error):
		// seeds where no member answers, ports the node cannot bind, a
		// volunteer the decider passes over (etcdcluster's warnings).
		lg = slog.New(slog.NewTextHandler(out.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	cfg := etcdcluster.Config{
		Name:               name,
		DataDir:            dataDir,
		ClientURL:          scheme(sec.clientTLS()) + nd.clientAddr,
		PeerURL:            scheme(sec.peerTLS()) + nd.peerAddr,
		AdvertiseClientURL: sec.advertiseClient,
		AdvertisePeerURL:   c.advertisePeer,
		ClientOnly:         c.clientOnly,
		BootstrapExpect:    c.expect,
		Prefix:             c.prefix,
		Logger:             lg,
		ClientTLS:          sec.clientInfo(),
		PeerTLS:            sec.peerInfo(),
		Username:           co.Username,
		Password:           co.Password,
		EnableAuth:         sec.auth,
		BcryptCost:         sec.bcryptCost,
		TickMs:             nd.tickMs,
		ElectionMs:         nd.electionMs,
	}
	secure := sec.clientTLS() || sec.ca != ""
	for _, s := range strings.Split(c.seeds, ",") {
		if s = strings.TrimSpace(s); s != "" {
			if secure && strings.HasPrefix(s, "http://") {
				return usagef("--seeds %s: client TLS is on, so the seeds are https:// URLs (or host:port)", s)
			}
			if !secure && strings.HasPrefix(s, "https://") {
				return usagef("--seeds %s: an https seed needs client TLS: give --trusted-ca-file (and --cert-file/--key-file when the cluster requires client certificates)", s)
			}
			cfg.Seeds = append(cfg.Seeds, s)
		}
	}
	if nd.etcdLogs {
		lg, err := zap.NewProduction()
		if err != nil {
			return err
		}
		cfg.EtcdLogger = lg
	}
	n, err := etcdcluster.Start(ctx, cfg)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%w (is another \"topoctl serve\" or etcd running? pick other ports with --listen-client-address/--listen-peer-address)", err)
		}
		if errors.Is(err, etcdcluster.ErrInvalidConfig) {
			// Checked before anything starts: the flags' mistake.
			return usageError{err}
		}
		if len(cfg.Seeds) > 0 {
			// Say why a seed refused this node's TLS, when it did.
			err = explainDial(cfg.Seeds[0], transport.TLSInfo{CertFile: sec.cert, KeyFile: sec.key, TrustedCAFile: sec.ca}, serveTLSFlags, tlsProbeBound, err)
		}
		return err
	}
	advertised := cfg.ClientURL
	if cfg.AdvertiseClientURL != "" {
		advertised = cfg.AdvertiseClientURL
	}
	advHost := strings.TrimPrefix(strings.TrimPrefix(advertised, "https://"), "http://")
	role := "member or volunteer"
	if c.clientOnly {
		role = "client"
	}
	if out.jsonOut() {
		_ = out.printJSON(map[string]any{"name": name, "client_url": advertised, "data_dir": dataDir, "role": role, "seeds": append([]string{}, cfg.Seeds...)})
	} else {
		out.printf("cluster node %s running as a %s\n", name, role)
		if !c.clientOnly {
			out.printf("  client URL:     %s\n", advertised)
		}
		out.printf("  data directory: %s\n", dataDir)
		if c.clientOnly {
			advHost = strings.TrimPrefix(strings.TrimPrefix(cfg.Seeds[0], "https://"), "http://")
		}
		out.printf("See it with: topoctl --topo-global-server-address %s %scluster status\n", advHost, flagsText(sec.clientFlags()))
		out.printf("Stop it with Ctrl-C (SIGINT) or SIGTERM: the node leaves the cluster first.\n")
	}
	<-ctx.Done()
	if !out.jsonOut() {
		out.printf("leaving the cluster...\n")
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), etcdcluster.DefaultLeaveTimeout)
	defer cancel()
	err = n.Leave(lctx)
	n.Close()
	if err != nil {
		return leaveFailed(name, dataDir, etcdcluster.DefaultLeaveTimeout, err)
	}
	if !out.jsonOut() {
		out.printf("node %s stopped (data directory %s)\n", name, dataDir)
	}
	return nil
}

// leaveFailed is serve's error when the node named name stopped without
// seeing itself removed from the cluster within timeout (err is Leave's):
// it says what state the node may be left in and how to bring it back, as
// stopping every node at once, or a cluster without a quorum, ends so.
func leaveFailed(name, dataDir string, timeout time.Duration, err error) error {
	return fmt.Errorf("node %s stopped without leaving the cluster: it saw no member remove it within %s (as when the other members stop too, or have no quorum), so it may still be a member; its data stays in %s: run the same command again to bring it back (as the member it was, or as a new one if the cluster removed it meanwhile) (%w)", name, timeout, dataDir, err)
}

// flagsText joins flags with a trailing space, "" when none.
func flagsText(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return strings.Join(f, " ") + " "
}
