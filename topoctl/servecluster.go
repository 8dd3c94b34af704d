package topoctl

import (
	"context"
	"strings"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/topokit/topokit/etcdcluster"
)

// clusterFlags are serve's flags for a self-managing etcd cluster.
type clusterFlags struct {
	cluster         bool
	seeds           string
	clientOnly      bool
	advertiseClient string
	advertisePeer   string
	prefix          string
}

func (c *clusterFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&c.cluster, "cluster", false, "run a node of a self-managing etcd cluster (bootstraps one when there are no seeds and no member data)")
	f.StringVar(&c.seeds, "seeds", "", "comma-separated client URLs of running cluster members to join (implies --cluster)")
	f.BoolVar(&c.clientOnly, "client-only", false, "with --seeds: stay a client of the cluster, never a member")
	f.StringVar(&c.advertiseClient, "advertise-client-url", "", "client URL other nodes use to reach this one (default: the listen address)")
	f.StringVar(&c.advertisePeer, "advertise-peer-url", "", "peer URL other members use to reach this one (default: the listen address)")
	f.StringVar(&c.prefix, "cluster-prefix", etcdcluster.DefaultPrefix, "etcd key prefix of the cluster's own keys")
}

func (c *clusterFlags) enabled() bool { return c.cluster || c.seeds != "" || c.clientOnly }

// serveCluster runs one node of a self-managing etcd cluster until ctx
// ends, then leaves it gracefully.
func (o *options) serveCluster(ctx context.Context, c clusterFlags, name, dataDir, clientAddr, peerAddr string, etcdLogs bool) error {
	if c.clientOnly && c.seeds == "" {
		return usagef("--client-only needs --seeds")
	}
	cfg := etcdcluster.Config{
		Name:               name,
		DataDir:            dataDir,
		ClientURL:          "http://" + clientAddr,
		PeerURL:            "http://" + peerAddr,
		AdvertiseClientURL: c.advertiseClient,
		AdvertisePeerURL:   c.advertisePeer,
		ClientOnly:         c.clientOnly,
		Prefix:             c.prefix,
		Logger:             o.log,
	}
	for _, s := range strings.Split(c.seeds, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.Seeds = append(cfg.Seeds, s)
		}
	}
	if etcdLogs {
		lg, err := zap.NewProduction()
		if err != nil {
			return err
		}
		cfg.EtcdLogger = lg
	}
	n, err := etcdcluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	role := "member or volunteer"
	if c.clientOnly {
		role = "client"
	}
	if o.jsonOut() {
		_ = o.printJSON(map[string]any{"name": name, "client_url": cfg.ClientURL, "data_dir": dataDir, "role": role, "seeds": append([]string{}, cfg.Seeds...)})
	} else {
		o.printf("cluster node %s running as a %s\n", name, role)
		o.printf("  client URL:     %s\n", cfg.ClientURL)
		o.printf("  data directory: %s\n", dataDir)
		o.printf("See it with: topoctl --topo-global-server-address %s cluster status\n", clientAddr)
		o.printf("Stop it with Ctrl-C (SIGINT) or SIGTERM: the node leaves the cluster first.\n")
	}
	<-ctx.Done()
	if !o.jsonOut() {
		o.printf("leaving the cluster...\n")
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), etcdcluster.DefaultLeaveTimeout)
	defer cancel()
	err = n.Leave(lctx)
	n.Close()
	if err != nil {
		return err
	}
	if !o.jsonOut() {
		o.printf("node %s stopped (data directory %s)\n", name, dataDir)
	}
	return nil
}
