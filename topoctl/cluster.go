package topoctl

import (
	"context"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/etcdcluster"
)

// newClusterCmd groups the commands of a self-managing etcd cluster (see
// "topoctl serve --cluster" and package etcdcluster).
func newClusterCmd(o *options) *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect and size a self-managing etcd cluster (serve --cluster / --seeds)",
		Long: `A cluster started with "topoctl serve --cluster" (or joined with
"topoctl serve --seeds URL") manages its own membership: an elected decider
adds volunteers one at a time as learners, promotes them once caught up,
and removes members that stopped volunteering, up to the ideal size stored
in the cluster. These commands talk to it through the etcd2 address of the
shared flags (--topo-global-server-address, or the embedded etcd's).`,
	}
	cmd.PersistentFlags().StringVar(&prefix, "cluster-prefix", etcdcluster.DefaultPrefix, "etcd key prefix of the cluster's own keys")
	cmd.AddCommand(newClusterStatusCmd(o, &prefix), newClusterSizeCmd(o, &prefix))
	return groupCmd(cmd)
}

// clusterClient checks that the shared flags name an etcd store and opens
// an etcd client on its endpoints that follows the member list.
func (o *options) clusterClient(ctx context.Context) (*clusterConn, error) {
	if o.impl != "etcd2" {
		return nil, usagef("cluster commands need the etcd2 implementation, not %q", o.impl)
	}
	sp := spec{impl: o.impl, addr: o.addr, root: o.root, defaulted: o.addrDefaulted}
	if err := o.checkListening(ctx, sp); err != nil {
		return nil, err
	}
	var eps []string
	for _, a := range strings.Split(o.addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			eps = append(eps, a)
		}
	}
	cli, err := etcdcluster.NewClient(eps, 0)
	if err != nil {
		return nil, err
	}
	return &clusterConn{cli: cli}, nil
}

func newClusterStatusCmd(o *options, prefix *string) *cobra.Command {
	return &cobra.Command{
		Use: "status",
		Example: `  topoctl cluster status
  topoctl cluster status -o json`,
		Short: "Members, learners, leader, raft term and index per member, decider, volunteers, ideal size, health",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cc, err := o.clusterClient(cmd.Context())
			if err != nil {
				return err
			}
			defer cc.close()
			ctx, cancel := o.callCtx(cmd.Context())
			defer cancel()
			st, err := etcdcluster.Status(ctx, cc.cli, *prefix)
			if err != nil {
				return err
			}
			if o.jsonOut() {
				return o.printJSON(st)
			}
			if st.Decider == "" && len(st.Volunteers) == 0 {
				o.eprintf("note: no decider and no volunteers: this etcd is not a self-managing cluster (started without serve --cluster or --seeds), so nothing manages its membership\n")
			}
			o.printf("ideal size: %d   healthy: %t   leader: %s   decider: %s\n", st.IdealSize, st.Healthy, dash(st.Leader), dash(st.Decider))
			o.printf("volunteers: %s\n", dash(strings.Join(st.Volunteers, ", ")))
			if st.Nominee != nil {
				o.printf("nominee:    %s (%s), nominated at %s by %s\n", st.Nominee.Name, st.Nominee.PeerURL, st.Nominee.NominatedAt.Format("15:04:05"), st.Nominee.Decider)
			}
			o.printf("%-16s %-17s %-8s %-8s %-7s %-7s %8s %10s  %s\n", "NAME", "ID", "ROLE", "STARTED", "HEALTHY", "LEADER", "TERM", "INDEX", "CLIENT URLS")
			for _, m := range st.Members {
				role := "voter"
				if m.Learner {
					role = "learner"
				}
				o.printf("%-16s %-17s %-8s %-8t %-7t %-7t %8d %10d  %s\n", dash(m.Name), m.ID, role, m.Started, m.Healthy, m.Leader, m.RaftTerm, m.RaftIndex, strings.Join(m.ClientURLs, ","))
			}
			return nil
		},
	}
}

func newClusterSizeCmd(o *options, prefix *string) *cobra.Command {
	return &cobra.Command{
		Use:     "size N",
		Example: `  topoctl cluster size 5`,
		Short:   "Set the ideal number of voting members; the cluster converges to it",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 1 {
				return usagef("cluster size: want a whole number of at least 1, got %q", args[0])
			}
			cc, err := o.clusterClient(cmd.Context())
			if err != nil {
				return err
			}
			defer cc.close()
			ctx, cancel := o.callCtx(cmd.Context())
			defer cancel()
			if err := etcdcluster.SetSize(ctx, cc.cli, *prefix, n); err != nil {
				return err
			}
			if o.jsonOut() {
				return o.printJSON(map[string]any{"idealSize": n})
			}
			o.printf("ideal size set to %d\n", n)
			return nil
		},
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clusterConn is an etcd client opened by clusterClient.
type clusterConn struct {
	cli *clientv3.Client
}

func (c *clusterConn) close() { _ = c.cli.Close() }
