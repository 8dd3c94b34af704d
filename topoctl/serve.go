package topoctl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/topokit/topokit/etcdcluster"
	"github.com/topokit/topokit/internal/etcdembed"
)

// serveStopWait bounds how long serve waits, once told to stop, for the
// embedded etcd to close gracefully (clients attached with watches hold
// it up).
const serveStopWait = time.Second

// lockDataDir takes an exclusive lock (flock) on the file
// topoctl-serve.pid in dataDir and writes this process's PID in it, so that
// a second serve on the same data directory refuses at once, naming the
// process that uses it. The lock ends with the returned func or the
// process.
func lockDataDir(dataDir string) (func(), error) {
	p := filepath.Join(dataDir, "topoctl-serve.pid")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := flock(f); err != nil {
		b, _ := os.ReadFile(p)
		_ = f.Close()
		holder := "another process"
		if pid := strings.TrimSpace(string(b)); pid != "" {
			holder = "process " + pid
		}
		return nil, fmt.Errorf("data directory %s is in use by %s (another \"topoctl serve\"; its lock file is %s): stop it, or pick another --data-dir", dataDir, holder, p)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() {
		_ = f.Truncate(0)
		unflock(f)
		_ = f.Close()
	}, nil
}

func newServeCmd(stores *connector, in *input, out *printer) *cobra.Command {
	var (
		dataDir    string
		clientAddr string
		peerAddr   string
		name       string
		etcdLogs   bool
		readyWait  time.Duration
		tickMs     uint
		electionMs uint
		cl         clusterFlags
		sec        serveSecurity
	)
	cmd := &cobra.Command{
		Use: "serve",
		Example: `  topoctl serve
  topoctl serve --data-dir /tmp/etcd --listen-client-address 127.0.0.1:12379 --listen-peer-address 127.0.0.1:12380
  topoctl serve --cluster --name n1 --data-dir /tmp/n1
  topoctl serve --seeds http://127.0.0.1:2379 --name n2 --data-dir /tmp/n2 --listen-client-address 127.0.0.1:22379 --listen-peer-address 127.0.0.1:22380
  topoctl serve --seeds http://10.0.0.1:2379,http://10.0.0.2:2379,http://10.0.0.3:2379 --bootstrap-expect 3 --name n1 --data-dir /var/lib/n1 ...
  topoctl serve --cluster --name n1 --data-dir /var/lib/n1 --listen-client-address 10.0.0.1:2379 --listen-peer-address 10.0.0.1:2380 \
    --cert-file n1.pem --key-file n1-key.pem --trusted-ca-file ca.pem --client-cert-auth \
    --peer-cert-file n1-peer.pem --peer-key-file n1-peer-key.pem --peer-trusted-ca-file ca.pem --peer-client-cert-auth`,
		Short: "Run an embedded etcd: one member, or a node of a self-managing cluster",
		Long: `Run a single-member etcd inside topoctl until interrupted (Ctrl-C or
SIGTERM), then stop it cleanly (--cluster or --seeds: a node of a
self-managing cluster instead, below). Its data lives in --data-dir and survives
restarts. The default data directory is $` + envDataDir + `, else
$XDG_DATA_HOME/topokit/etcd, else ~/.local/share/topokit/etcd.

Once ready it prints the client URL and the flags and environment variables
other commands need. With the default data directory, other topoctl
commands find it with no flags at all: serve records its client address in
that directory. The record stays after serve stops: a command given no
address first checks (with a TCP dial of at most 1s) that something listens
there, and when nothing does it fails at once, asking whether "topoctl
serve" is running, instead of waiting for --timeout. With --output json it
prints that as one JSON object.

Only one serve may use a data directory: a second one refuses at once,
naming the process (from the lock file topoctl-serve.pid there). Nor does
serve run the data directory of a member of a cluster of several members
(a "serve --cluster" node's): run that with --cluster. Once told
to stop, serve says so and stops within about 1s, disconnecting attached
clients; a new serve can bind the same addresses right after.

With --cluster (or --seeds) the node joins a self-managing etcd cluster
instead (package etcdcluster): without seeds and member data it bootstraps
a one-member cluster; with --seeds (client URLs of running members) it
volunteers to be a member, and an elected decider adds it as a learner and
promotes it while the cluster is below its ideal size ("topoctl cluster
size N", default 3); --client-only never becomes a member. While no member
answers at the seeds the node waits, saying every 5s what it waits for.
A cluster node prints its warnings on stderr (seeds where no member
answers, ports it cannot bind, a volunteer the decider passes over) even
at the default --log-level; a --log-level given sets its level instead.
To start a new cluster of N nodes symmetrically, start every node with the
same --seeds (the client URLs of all N, each node's own included) and
--bootstrap-expect N: once N of them see each other exactly one
bootstraps, the others join it, and the ideal size is N; a node started
later, or restarted without data, with the same command joins the running
cluster. Restarted with its data it rejoins as the member it was (after
an outage, start the members one at a time in any order: the first ones
wait, saying for which members, until a majority runs); if the
cluster removed that member meanwhile, it finds out through the members
its data records (even when started with --cluster and no seeds), moves
its data aside and volunteers again. A data directory is one node's: a
node given a copy of another node's, or restarted with another
--listen-peer-address (or --advertise-peer-url) than its data's member
has, exits with an error saying what to do instead of running a second
process as that member. Ctrl-C leaves gracefully: the node
withdraws, hands raft leadership on, is removed, and stops. See "topoctl
cluster status". Every bootstrap makes a cluster with a new cluster ID: a
node that lost its data directory and is run again with --cluster makes a
new, separate cluster at its old addresses, never a second copy of the old
one; clients and nodes given addresses of both refuse them. To bring such a
node back into its cluster, run it with --seeds instead. A node that left
(Ctrl-C) or was removed keeps its old data moved aside in
DIR/member.removed-<time>: run again with --cluster and no seeds it
refuses to bootstrap a second cluster beside its old one; give --seeds to
rejoin, or remove that data to start a new cluster. --name must be
unique in the cluster: a node started with the name of a running node
(other addresses) exits with an error naming that node's URLs.

--heartbeat-interval and --election-timeout are etcd's raft timing, in
milliseconds. The defaults (50 and 500, where etcd's are 100 and 1000)
suit members on one machine or one LAN: when the raft leader dies the
others elect a new one within one to two election timeouts, and a
client of the cluster (etcdcluster.OpenConn) writes again about a second
after the leader was killed. Members whose peers are further apart need
an election timeout above their round-trip time and at least 10
heartbeat intervals (etcd refuses fewer than 5); a loaded machine that
starves the leader for longer than the election timeout causes a
needless election, which loses nothing but refuses writes meanwhile.
Give every member of a cluster the same values.

TLS and authentication take etcd's own flags: --cert-file, --key-file,
--trusted-ca-file and --client-cert-auth for clients, --peer-cert-file,
--peer-key-file, --peer-trusted-ca-file and --peer-client-cert-auth for
peers (URLs become https), and --auth for etcd users and roles, with the
root password from --root-password-file or $TOPOCTL_ROOT_PASSWORD. Make
the certificates with "topoctl tls". Certificates and keys are re-read on
every TLS handshake, as etcd does, so replacing the files rotates them
without a restart (the CA files are read at start). In a cluster each node
also presents its --cert-file as a client of the cluster, so with
certificate auth only nodes holding certificates of the cluster's CA can
read, write, volunteer or be raft peers, and the decider nominates a
volunteer only after a peer TLS handshake with it succeeded.

Off the loopback serve refuses to listen without TLS and certificate
authentication (client: --client-cert-auth or --auth; peer:
--peer-client-cert-auth) unless --insecure is given; on 0.0.0.0 or :: it
needs --advertise-client-url (and --advertise-peer-url in a cluster). Bad
TLS files (missing, unreadable, a key that does not match, expired; in a
cluster, not valid for the node's advertised address) stop it before it
starts. See docs/security.md.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if dataDir == "" {
				d, err := defaultDataDir(in.getenv)
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
			if readyWait <= 0 {
				return usagef("--ready-timeout must be positive (got %s)", readyWait)
			}
			if err := etcdcluster.CheckRaftTiming(tickMs, electionMs); err != nil {
				return usagef("--heartbeat-interval %d, --election-timeout %d: %v", tickMs, electionMs, err)
			}
			// Every check of the security flags and files happens here,
			// before anything is created or listens.
			if err := sec.check(in, out, clientAddr, peerAddr, !cl.clientOnly); err != nil {
				return err
			}
			if cl.enabled() && !cl.clientOnly {
				if err := cl.checkAdvertisePeer(peerAddr, sec.peerTLS()); err != nil {
					return err
				}
			}
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return err
			}
			unlock, err := lockDataDir(dataDir)
			if err != nil {
				return err
			}
			defer unlock()
			if cl.enabled() {
				return serveCluster(ctx, out, cl, &sec, serveNode{name, dataDir, clientAddr, peerAddr, tickMs, electionMs, etcdLogs})
			}
			if err := checkPlainData(dataDir); err != nil {
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
				Name:               name,
				Dir:                dataDir,
				ClientURL:          scheme(sec.clientTLS()) + clientAddr,
				AdvertiseClientURL: sec.advertiseClient,
				PeerURL:            scheme(sec.peerTLS()) + peerAddr,
				ClientTLS:          sec.clientInfo(),
				PeerTLS:            sec.peerInfo(),
				BcryptCost:         sec.bcryptCost,
				TickMs:             tickMs,
				ElectionMs:         electionMs,
				Logger:             lg,
			})
			if err != nil {
				if errors.Is(err, etcdembed.ErrAddrInUse) {
					return fmt.Errorf("%w (is another \"topoctl serve\" or etcd running? pick other ports with --listen-client-address/--listen-peer-address)", err)
				}
				return err
			}
			// Member.Close must run once (a second embed.Etcd.Close panics).
			closeMember := sync.OnceFunc(m.Close)
			stopping := false
			defer func() {
				if !stopping {
					closeMember()
				}
			}()
			rctx, cancel := context.WithTimeout(ctx, readyWait)
			err = m.WaitReady(rctx)
			cancel()
			if err != nil {
				return err
			}
			addr := m.ClientAddr()
			if sec.auth {
				actx, cancel := context.WithTimeout(ctx, readyWait)
				err := sec.enableAuth(actx, scheme(sec.clientTLS())+addr)
				cancel()
				if err != nil {
					return err
				}
			}
			ef := endpointFile(dataDir)
			if err := os.WriteFile(ef, []byte(addr+"\n"), 0o600); err != nil {
				return err
			}
			out.log.Info("embedded etcd ready", "client_url", scheme(sec.clientTLS())+addr, "data_dir", dataDir)
			printServe(out, in, stores.root, addr, dataDir, &sec)

			select {
			case <-ctx.Done():
				out.log.Info("stopping the embedded etcd")
			case err := <-m.Etcd.Err():
				if err != nil {
					return fmt.Errorf("embedded etcd failed: %w", err)
				}
			}
			if !out.jsonOut() {
				out.printf("stopping the embedded etcd (at most %s; attached clients are disconnected)...\n", serveStopWait)
			}
			stopping = true
			closed := make(chan struct{})
			go func() { closeMember(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(serveStopWait):
				// Clients hold streams (watches) open, which etcd would wait
				// for up to its request timeout (7s). Its raft log and
				// backend are stopped cleanly instead: every acknowledged
				// write is on disk, and the listeners are already closed,
				// so a new serve can bind at once.
				out.log.Info("clients still attached, stopping the server without waiting for them")
				m.Etcd.Server.Stop()
			}
			if !out.jsonOut() {
				out.printf("embedded etcd stopped; its data stays in %s\n", dataDir)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", "", "etcd data directory (default: $"+envDataDir+", else $XDG_DATA_HOME/topokit/etcd, else ~/.local/share/topokit/etcd)")
	f.StringVar(&clientAddr, "listen-client-address", defaultClientAddress, "host:port to serve clients on")
	f.StringVar(&peerAddr, "listen-peer-address", defaultPeerAddress, "host:port to serve etcd peers on")
	f.StringVar(&name, "name", "topoctl", "etcd member name")
	f.BoolVar(&etcdLogs, "etcd-logs", false, "print etcd's own logs (JSON) to stderr")
	f.DurationVar(&readyWait, "ready-timeout", time.Minute, "how long to wait for etcd to be ready (positive)")
	f.UintVar(&tickMs, "heartbeat-interval", etcdcluster.LANTickMs, "raft heartbeat interval in milliseconds (etcd's flag; etcd's default is 100)")
	f.UintVar(&electionMs, "election-timeout", etcdcluster.LANElectionMs, "raft election timeout in milliseconds, at least 5 (advised: 10) heartbeat intervals and above the peers' round-trip time (etcd's flag; etcd's default is 1000)")
	cl.register(f)
	sec.register(f)
	return cmd
}

// checkPlainData refuses, for a plain serve, a data directory holding a
// member of a cluster of several members (a node of "serve --cluster", or
// of another etcd cluster): run alone, outside that cluster's management,
// it would be a second process of that member, or be removed by the
// cluster's decider while serving.
func checkPlainData(dataDir string) error {
	ms, ok := etcdembed.DataMembers(dataDir)
	if !ok || len(ms) < 2 {
		return nil
	}
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		n := m.Name
		if n == "" {
			n = "(unstarted)"
		}
		names = append(names, n+" "+strings.Join(m.PeerURLs, ","))
	}
	slices.Sort(names)
	return fmt.Errorf("data directory %s holds a member of a %d-member etcd cluster (%s); a plain \"topoctl serve\" runs one member alone: "+
		"to run this node of a self-managing cluster again, use \"topoctl serve --cluster\" with its --name, addresses and TLS flags of before; "+
		"else give serve its own --data-dir", dataDir, len(ms), strings.Join(names, "; "))
}

// printServe tells the user how other commands reach the embedded etcd.
func printServe(out *printer, in *input, root, addr, dataDir string, sec *serveSecurity) {
	flags := []string{"--topo-implementation", "etcd2", "--topo-global-server-address", addr, "--topo-global-root", root}
	env := map[string]string{envImplementation: "etcd2", envServerAddress: addr, envRoot: root}
	flags = append(flags, sec.clientFlags()...)
	def, _ := defaultDataDir(in.getenv)
	noFlags := (dataDir == def || addr == defaultClientAddress) && root == defaultRoot && len(sec.clientFlags()) == 0
	if out.jsonOut() {
		_ = out.printJSON(map[string]any{
			"client_url": scheme(sec.clientTLS()) + addr, "server_address": addr, "data_dir": dataDir,
			"flags": flags, "env": env, "no_flags_needed": noFlags,
		})
		return
	}
	out.printf("embedded etcd ready\n")
	out.printf("  client URL:     %s%s\n", scheme(sec.clientTLS()), addr)
	out.printf("  data directory: %s\n", dataDir)
	if noFlags {
		out.printf("Other topoctl commands use it with no flags, or explicitly with:\n")
	} else {
		out.printf("Other topoctl commands use it with:\n")
	}
	out.printf("  topoctl %s ...\n", strings.Join(flags, " "))
	out.printf("or with these environment variables:\n")
	out.printf("  export %s=etcd2 %s=%s %s=%s\n", envImplementation, envServerAddress, addr, envRoot, root)
	if extra := sec.clientFlags(); len(extra) > 0 {
		out.printf("  and the TLS/auth flags above (their variables: TOPOCTL_ETCD_CA_FILE, TOPOCTL_ETCD_CERT_FILE, TOPOCTL_ETCD_KEY_FILE, TOPOCTL_ETCD_USER, TOPOCTL_ETCD_PASSWORD)\n")
	}
	out.printf("Stop it with Ctrl-C (SIGINT) or SIGTERM.\n")
}
