package topoctl

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/etcdcluster"
)

// newClusterCmd groups the commands of a self-managing etcd cluster (see
// "topoctl serve --cluster" and package etcdcluster).
func newClusterCmd(stores *connector, out *printer) *cobra.Command {
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
		Example: `  topoctl --topo-global-server-address 127.0.0.1:23791 cluster status
  topoctl --topo-global-server-address 127.0.0.1:23791 cluster size 5`,
	}
	cmd.PersistentFlags().StringVar(&prefix, "cluster-prefix", etcdcluster.DefaultPrefix, "etcd key prefix of the cluster's own keys")
	cmd.AddCommand(newClusterStatusCmd(stores, out, &prefix), newClusterSizeCmd(stores, out, &prefix))
	return groupCmd(cmd)
}

// clusterClient checks that the shared flags name an etcd store and opens
// an etcd client on its endpoints that follows the member list.
func (o *connector) clusterClient(ctx context.Context) (*clusterConn, error) {
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
	co := etcdcluster.ClientOptions{CertFile: o.sec.etcdCert, KeyFile: o.sec.etcdKey, CAFile: o.sec.etcdCA,
		Username: o.sec.etcdUser, Password: o.sec.etcdPassword}
	cli, err := etcdcluster.NewClientWith(eps, 0, co)
	if err != nil {
		return nil, err
	}
	explain := func(err error) error {
		// The client reports a refused handshake only as a deadline that
		// passed (without a member's answer): such an error gets the
		// TLS diagnosis's hint; other errors are returned unchanged.
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		_, bound := dialBounds(o.timeout)
		hint := dialHint(o.addr, transport.TLSInfo{CertFile: o.sec.etcdCert, KeyFile: o.sec.etcdKey, TrustedCAFile: o.sec.etcdCA, ServerName: o.sec.etcdServerName}, clientTLSFlags, bound)
		if hint == "" {
			return err
		}
		return fmt.Errorf("%w; %s", err, hint)
	}
	return &clusterConn{cli: cli, opts: co, explain: explain}, nil
}

func newClusterStatusCmd(stores *connector, out *printer, prefix *string) *cobra.Command {
	return &cobra.Command{
		Use: "status",
		Example: `  topoctl cluster status
  topoctl cluster status -o json`,
		Short: "Members, learners, leader, raft term and index per member, decider, volunteers, ideal size, health",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cc, err := stores.clusterClient(cmd.Context())
			if err != nil {
				return err
			}
			defer cc.close()
			ctx, cancel := stores.callCtx(cmd.Context())
			defer cancel()
			st, err := etcdcluster.StatusWith(ctx, cc.cli, *prefix, cc.opts)
			if err != nil {
				return cc.explain(err)
			}
			// Without a quorum the status is printed all the same (read
			// from the members that answer), then the command fails.
			var noQuorum error
			if nq := st.NoQuorum(); nq != "" {
				noQuorum = fmt.Errorf("%s", nq)
			}
			if out.jsonOut() {
				if err := out.printJSON(clusterJSON(st)); err != nil {
					return err
				}
				return noQuorum
			}
			if st.Decider == "" && len(st.Volunteers) == 0 {
				out.eprintf("note: no decider and no volunteers: this etcd is not a self-managing cluster (started without serve --cluster or --seeds), so nothing manages its membership\n")
			}
			out.printf("cluster ID: %s\n", dash(st.ClusterID))
			out.printf("ideal size: %d   healthy: %t   leader: %s   decider: %s\n", st.IdealSize, st.Healthy && st.Shortfall == "", dash(st.Leader), dash(st.Decider))
			if st.Shortfall != "" {
				out.printf("below ideal size: %s (quorum: %t)\n", st.Shortfall, st.Healthy)
			}
			out.printf("volunteers: %s\n", dash(strings.Join(st.Volunteers, ", ")))
			if st.Nominee != nil {
				out.printf("nominee:    %s (%s), nominated at %s by %s\n", st.Nominee.Name, st.Nominee.PeerURL, st.Nominee.NominatedAt.Format("15:04:05"), st.Nominee.Decider)
			}
			out.printf("%-16s %-17s %-8s %-8s %-7s %-7s %8s %10s  %s\n", "NAME", "ID", "ROLE", "STARTED", "HEALTHY", "LEADER", "TERM", "INDEX", "CLIENT URLS")
			for _, m := range st.Members {
				role := "voter"
				if m.Learner {
					role = "learner"
				}
				out.printf("%-16s %-17s %-8s %-8t %-7t %-7t %8d %10d  %s\n", dash(m.Name), m.ID, role, m.Started, m.Healthy, m.Leader, m.RaftTerm, m.RaftIndex, strings.Join(m.ClientURLs, ","))
			}
			if st.Stale {
				out.printf("(no quorum: the member list and the keys above are what an answering member knows, possibly out of date)\n")
			}
			if st.UnconfirmedDecider != "" {
				out.printf("(no decider shown: the last one recorded, %s, does not answer; no membership change happens until a quorum runs)\n", st.UnconfirmedDecider)
			}
			return noQuorum
		},
	}
}

func newClusterSizeCmd(stores *connector, out *printer, prefix *string) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:     "size N",
		Example: `  topoctl cluster size 5`,
		Short:   "Set the ideal number of voting members; the cluster converges to it",
		Long: `Set the ideal number of voting members; the cluster converges to it.
Sizes above 7 are refused unless --force: etcd advises at most 7 voters
(every voter slows every write). An even size is accepted with a warning:
it tolerates no more failed members than the odd size below it.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 1 {
				return usagef("cluster size: want a whole number of at least 1, got %q", args[0])
			}
			if n > etcdcluster.MaxVoters && !force {
				return usagef("cluster size: %d voters is above the %d etcd advises (every voter slows every write); use --force to set it anyway", n, etcdcluster.MaxVoters)
			}
			if n%2 == 0 {
				out.eprintf("warning: an even size (%d) tolerates no more failed members than %d does (%d), and needs one more for a quorum\n", n, n-1, (n-1)/2)
			}
			cc, err := stores.clusterClient(cmd.Context())
			if err != nil {
				return err
			}
			defer cc.close()
			ctx, cancel := stores.callCtx(cmd.Context())
			defer cancel()
			if err := etcdcluster.SetSizeWith(ctx, cc.cli, *prefix, n, etcdcluster.SizeOptions{Force: true, Client: cc.opts}); err != nil {
				return cc.explain(err)
			}
			if st, err := etcdcluster.StatusWith(ctx, cc.cli, *prefix, cc.opts); err == nil && st.Decider == "" && len(st.Volunteers) == 0 {
				out.eprintf("note: no decider and no volunteers: this etcd is not a self-managing cluster (started without serve --cluster or --seeds): nothing acts on this size\n")
			}
			if out.jsonOut() {
				return out.printJSON(map[string]any{"ideal_size": n})
			}
			out.printf("ideal size set to %d\n", n)
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, fmt.Sprintf("set a size above %d voters", etcdcluster.MaxVoters))
	return cmd
}

// clusterStatusJSON is cluster status under -o json: etcdcluster's
// ClusterStatus with topoctl's snake_case field names and empty lists as
// [] (etcdcluster's own JSON names are camelCase).
type clusterStatusJSON struct {
	Members []memberStatusJSON `json:"members"`
	Leader  string             `json:"leader"`
	Decider string             `json:"decider"`
	// UnconfirmedDecider: without a quorum, the recorded decider whose
	// node does not answer (Decider is then "").
	UnconfirmedDecider string       `json:"unconfirmed_decider,omitempty"`
	Volunteers         []string     `json:"volunteers"`
	IdealSize          int          `json:"ideal_size"`
	Nominee            *nomineeJSON `json:"nominee,omitempty"`
	ClusterID          string       `json:"cluster_id"`
	// Healthy is Quorum with no Shortfall.
	Healthy bool `json:"healthy"`
	// Quorum: a quorum of the voters answered and one leads.
	Quorum    bool   `json:"quorum"`
	Shortfall string `json:"shortfall,omitempty"`
	// Stale: without a quorum, the member list and the keys are what an
	// answering member knows.
	Stale bool `json:"stale,omitempty"`
}

type memberStatusJSON struct {
	ID               string   `json:"id"`
	Name             string   `json:"name"`
	PeerURLs         []string `json:"peer_urls"`
	ClientURLs       []string `json:"client_urls"`
	Learner          bool     `json:"learner"`
	Started          bool     `json:"started"`
	Healthy          bool     `json:"healthy"`
	Leader           bool     `json:"leader"`
	RaftTerm         uint64   `json:"raft_term"`
	RaftIndex        uint64   `json:"raft_index"`
	RaftAppliedIndex uint64   `json:"raft_applied_index"`
	Revision         int64    `json:"revision"`
	Error            string   `json:"error,omitempty"`
}

type nomineeJSON struct {
	Name        string    `json:"name"`
	PeerURL     string    `json:"peer_url"`
	MemberID    string    `json:"member_id,omitempty"`
	Decider     string    `json:"decider"`
	NominatedAt time.Time `json:"nominated_at"`
}

func clusterJSON(st *etcdcluster.ClusterStatus) clusterStatusJSON {
	out := clusterStatusJSON{
		Members: []memberStatusJSON{}, Leader: st.Leader, Decider: st.Decider, UnconfirmedDecider: st.UnconfirmedDecider,
		Volunteers: append([]string{}, st.Volunteers...), IdealSize: st.IdealSize, Healthy: st.Healthy && st.Shortfall == "", Quorum: st.Healthy, Shortfall: st.Shortfall, ClusterID: st.ClusterID,
		Stale: st.Stale,
	}
	for _, m := range st.Members {
		out.Members = append(out.Members, memberStatusJSON{
			ID: m.ID, Name: m.Name, PeerURLs: append([]string{}, m.PeerURLs...), ClientURLs: append([]string{}, m.ClientURLs...),
			Learner: m.Learner, Started: m.Started, Healthy: m.Healthy, Leader: m.Leader,
			RaftTerm: m.RaftTerm, RaftIndex: m.RaftIndex, RaftAppliedIndex: m.RaftAppliedIndex,
			Revision: m.Revision, Error: m.Error,
		})
	}
	if n := st.Nominee; n != nil {
		out.Nominee = &nomineeJSON{n.Name, n.PeerURL, n.MemberID, n.Decider, n.NominatedAt}
	}
	return out
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// clusterConn is an etcd client opened by clusterClient.
type clusterConn struct {
	cli  *clientv3.Client
	opts etcdcluster.ClientOptions
	// explain adds to an error of a cluster call why the TLS handshake
	// with the first member failed, when that is the cause.
	explain func(error) error
}

func (c *clusterConn) close() { _ = c.cli.Close() }
