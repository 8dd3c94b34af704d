package etcdcluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/topo/etcd2topo"
)

// Node is one running node: a client of the cluster, a volunteer unless
// ClientOnly, a member while the cluster wants it, and a decider
// candidate unless ClientOnly. Its methods are safe for concurrent use.
type Node struct {
	cfg Config
	log *slog.Logger
	k   keys
	id  string // decider participant id: name/nonce

	conn *etcd2topo.Conn
	cli  *clientv3.Client
	eps  endpointClients // per-member clients for Status calls

	ctx    context.Context // the node's lifetime; Close cancels it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	leaving atomic.Bool
	closed  atomic.Bool

	mu       sync.Mutex
	srv      *embed.Etcd // the running member server, nil when none
	srvID    uint64
	gate     *requestGate         // the running server's request gate
	probe    net.Listener         // answers peer TLS handshakes while not a member
	peerTLS  *tls.Config          // the decider's check of a volunteer's peer TLS; nil when off
	sess     *concurrency.Session // holds the volunteer and endpoint keys
	part     participationStopper
	deciding atomic.Bool
	// portsBusy is set while the node cannot bind its ports and so does
	// not volunteer.
	portsBusy atomic.Bool
	// peerTaken is set while a listed member of another name has this
	// node's peer URL, once that has been logged.
	peerTaken atomic.Bool
}

type participationStopper interface{ Stop() }

// Start starts a node as cfg describes (see Config and the package doc)
// and returns once it runs: when it bootstraps a new cluster, once that
// one-member cluster serves clients; when it restarts a member from its
// data, once that member serves again (a quorum of its cluster runs: the
// first members restarted after an outage wait for the others, logging
// which) or its server stopped (removed meanwhile); both bounded by ctx,
// whose error it returns when ctx ends first. It returns an error
// wrapping ErrInvalidConfig for a refused Config, and the embedded
// server's error when it cannot start (a taken port shows as "address
// already in use"). The caller must call Leave or Close.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, 4)
	_, _ = rand.Read(nonce)
	n := &Node{cfg: cfg, log: cfg.Logger, k: keys{prefix: cfg.Prefix}, id: cfg.Name + "/" + hex.EncodeToString(nonce)}

	n.eps.opts = cfg.clientOptions()
	if _, err := cfg.clientTLSConfig(); err != nil {
		return nil, err
	}
	if n.peerTLS, err = cfg.peerDialTLS(); err != nil {
		return nil, fmt.Errorf("%w: peer TLS: %w", ErrInvalidConfig, err)
	}
	if !cfg.ClientOnly {
		if err := checkCertHosts(cfg); err != nil {
			return nil, err
		}
	}
	eps := normalizeEndpoints(cfg.Seeds, n.eps.opts.secure())
	if !cfg.ClientOnly {
		switch {
		case hasMemberData(cfg.DataDir):
			n.log.Info("restarting the member from its data", "dir", cfg.DataDir)
			// Refuse another member's data before its server runs a
			// single raft message under that member's ID.
			if err := checkMemberRecord(cfg); err != nil {
				return nil, err
			}
			if err := checkDataMembers(cfg); err != nil {
				return nil, err
			}
			if err := n.startServer(cfg.Name+"="+cfg.AdvertisePeerURL, true); err != nil {
				return nil, err
			}
			// Data written before the record existed: check the
			// membership it holds instead.
			if err := n.checkOwnMember(); err != nil {
				n.closeServer()
				return nil, err
			}
			// After an outage the first members restarted wait here for
			// the others: a node giving up would leave no quorum.
			if err := n.awaitRejoined(ctx); err != nil {
				n.closeServer()
				return nil, err
			}
			// Also reach the cluster through the members recorded in the
			// data: when this member was removed while it was down, its
			// own server cannot answer, and the node must learn that from
			// the others to move its data aside and volunteer again,
			// whatever seeds (none, for the bootstrap node) it was given.
			eps = append([]string{cfg.AdvertiseClientURL}, eps...)
			for _, u := range n.recordedClientURLs() {
				if !slices.Contains(eps, u) {
					eps = append(eps, u)
				}
			}
		default:
			bootstrap := len(eps) == 0
			if removed := removedData(cfg.DataDir); bootstrap && len(removed) > 0 {
				return nil, fmt.Errorf("%w: %s holds no member data but %s, the data of a member that left or was removed: "+
					"not bootstrapping a second cluster beside that one; give seeds (client URLs of running members) to join it again, "+
					"or remove %s to bootstrap a new cluster", ErrFormerMember, cfg.DataDir, strings.Join(removed, ", "), strings.Join(removed, ", "))
			}
			if !bootstrap {
				found, err := n.awaitCluster(ctx, eps)
				if err != nil {
					return nil, err
				}
				bootstrap = !found
			}
			if bootstrap {
				if err := n.bootstrap(ctx); err != nil {
					return nil, err
				}
				eps = []string{cfg.AdvertiseClientURL}
			} else {
				eps = slices.DeleteFunc(eps, func(u string) bool { return sameURL(u, cfg.AdvertiseClientURL) })
			}
		}
	} else if _, err := n.awaitCluster(ctx, eps); err != nil {
		return nil, err
	}
	conn, err := etcd2topo.NewConn(etcd2topo.Options{
		Endpoints: eps, LockTTL: cfg.DeciderTTL, NamedLockTTL: cfg.DeciderTTL, Logger: cfg.Logger,
		TLSCAFile: cfg.ClientTLS.TrustedCAFile, TLSCertFile: cfg.ClientTLS.CertFile, TLSKeyFile: cfg.ClientTLS.KeyFile,
		Username: cfg.Username, Password: cfg.Password,
	}, cfg.Prefix)
	if err != nil {
		if id := n.clusterID(); id != 0 && len(cfg.Seeds) > 0 && errors.Is(err, etcd2topo.ErrClusterMismatch) {
			// The seeds changed between runs: they are another cluster's.
			err = fmt.Errorf("%w; this node's data in %s is a member of cluster %x, and seeds %s include members of another cluster: "+
				"give seeds of its own cluster (or none: it reaches its cluster through the members its data records), "+
				"or, to leave its cluster and join the seeds' one as a new member, move %s aside",
				err, cfg.DataDir, id, strings.Join(cfg.Seeds, ","), filepath.Join(cfg.DataDir, "member"))
		}
		n.closeServer()
		return nil, err
	}
	n.conn, n.cli = conn, conn.Client()
	if !cfg.ClientOnly {
		if err := n.checkNameFree(ctx); err != nil {
			conn.Close()
			n.closeServer()
			return nil, err
		}
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	go follow(n.cli, cfg.CheckInterval, n.log, n.eps.opts, nil, nil) // ends when the client closes
	n.wg.Go(n.memberLoop)
	if !cfg.ClientOnly {
		n.wg.Go(n.deciderLoop)
	}
	return n, nil
}

// bootstrap starts a new one-member cluster and waits (bounded by ctx)
// until it serves clients; with Config.BootstrapExpect it stores that as
// the ideal size.
func (n *Node) bootstrap(ctx context.Context) error {
	n.log.Info("bootstrapping a new one-member cluster")
	if err := n.startServer(n.cfg.Name+"="+n.cfg.AdvertisePeerURL, false); err != nil {
		return err
	}
	select {
	case <-n.srv.Server.ReadyNotify():
	case <-ctx.Done():
		n.closeServer()
		return fmt.Errorf("etcdcluster: bootstrapping: %w", ctx.Err())
	}
	if n.cfg.EnableAuth {
		if err := n.enableAuth(ctx); err != nil {
			n.closeServer()
			return err
		}
	}
	if x := n.cfg.BootstrapExpect; x > 0 {
		if err := n.storeSize(ctx, x); err != nil {
			n.closeServer()
			return err
		}
	}
	return nil
}

// storeSize writes the ideal size through the node's own new member,
// unless a size is stored already.
func (n *Node) storeSize(ctx context.Context, size int) error {
	cc, err := n.cfg.clientOptions().config([]string{n.cfg.AdvertiseClientURL}, 5*time.Second)
	if err != nil {
		return err
	}
	c, err := clientv3.New(cc)
	if err != nil {
		return fmt.Errorf("etcdcluster: storing the ideal size: %w", err)
	}
	defer c.Close()
	k := n.k.size()
	if _, err := c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).Then(clientv3.OpPut(k, strconv.Itoa(size))).Commit(); err != nil {
		return fmt.Errorf("etcdcluster: storing the ideal size: %w", err)
	}
	return nil
}

// Run starts a node (see Start), runs it until ctx ends, then leaves the
// cluster gracefully (see Leave) within Config.LeaveTimeout. It returns
// Start's error, or nil after the leave.
func Run(ctx context.Context, cfg Config) error {
	n, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	lctx, cancel := context.WithTimeout(context.Background(), n.cfg.LeaveTimeout)
	defer cancel()
	return n.Leave(lctx)
}

// Client returns the node's etcd client, which follows the member list.
// It is closed by Leave and Close.
func (n *Node) Client() *clientv3.Client { return n.cli }

// Conn returns the node's topokit Conn rooted at Config.Prefix (the one
// its decider elects and locks through). It is closed by Leave and Close.
func (n *Node) Conn() *etcd2topo.Conn { return n.conn }

// IsMember reports whether the node runs an embedded etcd server.
func (n *Node) IsMember() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv != nil
}

// IsDecider reports whether the node currently holds the decider
// leadership.
func (n *Node) IsDecider() bool { return n.deciding.Load() }

// Close stops the node without leaving the cluster: it stops its
// decider candidacy, its embedded server (keeping its data, so that a
// restart rejoins as the same member) and its client. The volunteer key
// is left to expire with its lease (Config.VolunteerTTL), after which a
// decider removes the member unless it came back. Close is idempotent.
func (n *Node) Close() {
	if n.closed.Swap(true) {
		return
	}
	n.cancel()
	n.mu.Lock()
	p := n.part
	n.mu.Unlock()
	if p != nil {
		p.Stop()
	}
	n.wg.Wait()
	// Clients first: the embedded server's Close waits for open client
	// streams (the Conn's lease keepalives and watches) to end.
	n.eps.close()
	n.conn.Close()
	n.closeServer()
	n.stopProbe()
}

// Leave leaves the cluster gracefully: it withdraws the volunteer key;
// when the node is a member with other voters it moves Raft leadership
// away if it holds it and waits (until ctx ends) for the decider -- which
// may be this node -- to remove it; then it stops like Close. The data of
// the remaining members is untouched; this node's member data is moved
// aside once it was removed. The last member of a cluster stops without
// being removed and keeps its data. Leave returns ctx's error when the
// removal did not happen in time (the node is stopped all the same).
func (n *Node) Leave(ctx context.Context) error {
	if n.closed.Load() {
		return nil
	}
	n.leaving.Store(true)
	n.mu.Lock()
	s := n.sess
	n.sess = nil
	srv, id := n.srv, n.srvID
	n.mu.Unlock()
	if s != nil {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if _, err := n.cli.Revoke(rctx, s.Lease()); err != nil {
			n.log.Warn("withdrawing the volunteer key", "err", err)
		}
		cancel()
		s.Orphan()
	}
	n.log.Info("leaving the cluster")
	var err error
	removed := false
	if srv != nil {
		removed, err = n.waitRemoved(ctx, srv, id)
	}
	n.Close()
	if removed {
		n.moveDataAside()
	}
	return err
}

// leavePoll is how often a leaving member reads the member list for its
// removal (CheckInterval when shorter).
const leavePoll = 100 * time.Millisecond

// waitRemoved moves leadership away and waits for the member's removal.
// It reports whether the member was removed (false for the last member).
func (n *Node) waitRemoved(ctx context.Context, srv *embed.Etcd, id uint64) (bool, error) {
	for {
		ml, err := n.cli.MemberList(ctx)
		if err == nil {
			if !containsID(ml.Members, id) {
				return true, nil
			}
			others := 0
			var target uint64
			for _, m := range ml.Members {
				if m.ID != id && !m.IsLearner && m.Name != "" {
					others++
					target = m.ID
				}
			}
			if others == 0 {
				n.log.Info("last member: stopping without removal")
				return false, nil
			}
			if srv.Server.Lead() == id {
				if err := n.moveLeader(ctx, target); err != nil {
					n.log.Warn("moving raft leadership away", "to", fmt.Sprintf("%x", target), "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("etcdcluster: waiting for removal: %w", ctx.Err())
		case <-time.After(min(n.cfg.CheckInterval, leavePoll)):
		}
	}
}

func (n *Node) moveLeader(ctx context.Context, target uint64) error {
	cc, err := n.cfg.clientOptions().config([]string{n.cfg.AdvertiseClientURL}, 2*time.Second)
	if err != nil {
		return err
	}
	c, err := clientv3.New(cc)
	if err != nil {
		return err
	}
	defer c.Close()
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = c.MoveLeader(mctx, target)
	if err == nil {
		n.log.Info("moved raft leadership away", "to", fmt.Sprintf("%x", target))
	}
	return err
}

// memberLoop keeps the node's volunteer key, starts its server when it is
// nominated, and stops it when it was removed.
func (n *Node) memberLoop() {
	t := time.NewTicker(n.cfg.CheckInterval)
	defer t.Stop()
	for {
		n.memberStep()
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (n *Node) memberStep() {
	ctx, cancel := context.WithTimeout(n.ctx, max(2*n.cfg.CheckInterval, 2*time.Second))
	defer cancel()
	ml, err := n.cli.MemberList(ctx)
	if err != nil {
		return
	}
	n.mu.Lock()
	srv, id := n.srv, n.srvID
	n.mu.Unlock()
	if srv != nil {
		if !containsID(ml.Members, id) {
			n.log.Info("this member was removed from the cluster: stopping its server, continuing as a client", "member", fmt.Sprintf("%x", id))
			// Move the client's streams off this server first: its Close
			// waits for open streams to end.
			var eps []string
			for _, m := range ml.Members {
				if m.Name != "" && !m.IsLearner {
					eps = append(eps, m.ClientURLs...)
				}
			}
			if len(eps) > 0 {
				n.cli.SetEndpoints(eps...)
			}
			n.closeServer()
			n.moveDataAside()
			srv = nil
		} else if stopped(srv) {
			n.log.Warn("embedded server stopped; restarting it from its data")
			n.closeServer()
			if err := n.startServer(n.cfg.Name+"="+n.cfg.AdvertisePeerURL, true); err != nil {
				n.log.Error("restarting the embedded server", "err", err)
			}
			return
		}
	}
	if n.cfg.ClientOnly || n.leaving.Load() {
		return
	}
	if i := slices.IndexFunc(ml.Members, func(m *etcdserverpb.Member) bool {
		return m.Name != "" && slices.Contains(m.PeerURLs, n.cfg.AdvertisePeerURL)
	}); srv == nil && i >= 0 {
		// A started member with our peer URL, and no data here: this
		// node's earlier member, whose data is gone. It can never run
		// again, so withdraw the volunteer key until the decider removes
		// it, then volunteer afresh.
		resp, err := n.cli.Delete(ctx, n.k.volunteer(n.cfg.Name))
		if err == nil && resp.Deleted > 0 {
			n.log.Warn("this node's earlier member is still listed but its data is gone: withdrawing until it is removed")
		}
		if m := ml.Members[i]; m.Name != n.cfg.Name && !n.peerTaken.Swap(true) {
			// Or another node's peer URL was given to this one: then
			// it waits for good, so say so.
			n.log.Warn("not volunteering: a member of another name has this node's peer URL; waiting until it is removed (if that node still runs, give this one another peer address)",
				"member", m.Name, "id", fmt.Sprintf("%x", m.ID), "peer", n.cfg.AdvertisePeerURL)
		}
		return
	}
	n.peerTaken.Store(false)
	if srv == nil {
		// Volunteer only while this node could start its server: a
		// nominee that cannot bind its ports would only hold the
		// cluster's one change in flight until its timeout.
		if err := n.portsFree(); err != nil {
			if !n.portsBusy.Swap(true) {
				n.log.Warn("not volunteering: this node cannot bind its ports", "err", err)
			}
			n.withdrawVolunteer(ctx)
			return
		}
		if n.portsBusy.Swap(false) {
			n.log.Info("ports free again: volunteering")
		}
	}
	n.keepVolunteer(ctx, srv != nil)
	if srv != nil {
		return
	}
	n.startProbe()
	// Not a member: start when nominated and added.
	resp, err := n.cli.Get(ctx, n.k.nominee())
	if err != nil || len(resp.Kvs) == 0 {
		return
	}
	var nom Nominee
	if json.Unmarshal(resp.Kvs[0].Value, &nom) != nil || nom.Name != n.cfg.Name || nom.PeerURL != n.cfg.AdvertisePeerURL {
		return
	}
	var initial []string
	added := false
	for _, m := range ml.Members {
		if slices.Contains(m.PeerURLs, n.cfg.AdvertisePeerURL) {
			if m.Name != "" || !m.IsLearner {
				// Started before (and this node has no data): never run it
				// again with empty data; the decider rolls it back.
				return
			}
			added = true
			initial = append(initial, n.cfg.Name+"="+n.cfg.AdvertisePeerURL)
			continue
		}
		if m.Name == "" {
			return // another unstarted member: not ours to start with
		}
		for _, u := range m.PeerURLs {
			initial = append(initial, m.Name+"="+u)
		}
	}
	if !added {
		return
	}
	n.moveDataAside() // stale data of an earlier membership, if any
	n.log.Info("nominated: starting the embedded server as a learner", "initialCluster", strings.Join(initial, ","))
	if err := n.startServer(strings.Join(initial, ","), true); err != nil {
		n.log.Error("starting the embedded server", "err", err)
	}
}

// portsFree returns an error naming the address when the node cannot
// listen on its client or peer address (the peer address is not tried
// while the node's own peer TLS probe holds it).
func (n *Node) portsFree() error {
	n.mu.Lock()
	probing := n.probe != nil
	n.mu.Unlock()
	urls := []string{n.cfg.ClientURL}
	if !probing {
		urls = append(urls, n.cfg.PeerURL)
	}
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", u.Host)
		if err != nil {
			return err
		}
		ln.Close()
	}
	return nil
}

// withdrawVolunteer deletes the node's volunteer key when it is on the
// node's own lease.
func (n *Node) withdrawVolunteer(ctx context.Context) {
	n.mu.Lock()
	s := n.sess
	n.mu.Unlock()
	if s == nil {
		return
	}
	vk := n.k.volunteer(n.cfg.Name)
	_, _ = n.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(vk), "=", s.Lease())).Then(clientv3.OpDelete(vk)).Commit()
}

// checkNameFree returns an error wrapping ErrNameTaken when a live
// volunteer key of the node's name holds other URLs than the node's:
// another node runs under the same name. A key with the node's own URLs
// is this node's earlier run, whose lease expires. When the key cannot
// be read within 2 s the check is skipped: keepVolunteer still never
// overwrites another node's key.
func (n *Node) checkNameFree(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := n.cli.Get(ctx, n.k.volunteer(n.cfg.Name), clientv3.WithSerializable())
	if err != nil || len(resp.Kvs) == 0 {
		return nil
	}
	var v volunteerInfo
	if json.Unmarshal(resp.Kvs[0].Value, &v) != nil {
		return nil
	}
	if v.PeerURL == n.cfg.AdvertisePeerURL && v.ClientURL == n.cfg.AdvertiseClientURL {
		return nil
	}
	return fmt.Errorf("%w: %q is held by a running node with client URL %s and peer URL %s (this node: %s, %s); give this node another --name "+
		"(if that was this node's own earlier run, stopped without leaving and restarted with other addresses, its key expires within %s of its stop: start it again then)",
		ErrNameTaken, n.cfg.Name, v.ClientURL, v.PeerURL, n.cfg.AdvertiseClientURL, n.cfg.AdvertisePeerURL, time.Duration(ttlSeconds(n.cfg.VolunteerTTL))*time.Second)
}

// keepVolunteer makes sure the volunteer key (and, for a member, the
// endpoint key) exists under a live lease.
func (n *Node) keepVolunteer(ctx context.Context, member bool) {
	n.mu.Lock()
	s := n.sess
	n.mu.Unlock()
	if s != nil {
		select {
		case <-s.Done():
			s = nil
		default:
		}
	}
	if s == nil {
		var err error
		s, err = concurrency.NewSession(n.cli, concurrency.WithTTL(int(ttlSeconds(n.cfg.VolunteerTTL))), concurrency.WithContext(n.ctx))
		if err != nil {
			n.log.Debug("volunteer lease", "err", err)
			return
		}
		n.mu.Lock()
		if n.leaving.Load() {
			n.mu.Unlock()
			s.Close()
			return
		}
		n.sess = s
		n.mu.Unlock()
	}
	v, _ := json.Marshal(volunteerInfo{Name: n.cfg.Name, PeerURL: n.cfg.AdvertisePeerURL, ClientURL: n.cfg.AdvertiseClientURL})
	ops := []clientv3.Op{clientv3.OpPut(n.k.volunteer(n.cfg.Name), string(v), clientv3.WithLease(s.Lease()))}
	if member {
		ops = append(ops, clientv3.OpPut(n.k.endpoint(n.cfg.Name), n.cfg.AdvertiseClientURL, clientv3.WithLease(s.Lease())))
	} else {
		ops = append(ops, clientv3.OpDelete(n.k.endpoint(n.cfg.Name)))
	}
	// Put only what is missing, so that the keys' revisions do not
	// churn; and never overwrite a key of another node with this name
	// (other URLs, refused at its start): only a missing key, one on our
	// lease, or our own record (this node's earlier run) is written.
	vk := n.k.volunteer(n.cfg.Name)
	resp, err := n.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.LeaseValue(vk), "=", s.Lease()),
		clientv3.Compare(clientv3.Value(vk), "=", string(v)),
		endpointCompare(n.k.endpoint(n.cfg.Name), member, s.Lease()),
	).Commit()
	if err != nil || resp.Succeeded {
		return
	}
	for _, own := range []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(vk), "=", 0),
		clientv3.Compare(clientv3.LeaseValue(vk), "=", s.Lease()),
		clientv3.Compare(clientv3.Value(vk), "=", string(v)),
	} {
		resp, err = n.cli.Txn(ctx).If(own).Then(ops...).Commit()
		if err != nil {
			return
		}
		if resp.Succeeded {
			n.log.Debug("volunteering", "member", member)
			return
		}
	}
	n.log.Warn("the volunteer key of this name is held by another node: not overwriting it", "key", vk)
}

func endpointCompare(key string, member bool, lease clientv3.LeaseID) clientv3.Cmp {
	if member {
		return clientv3.Compare(clientv3.LeaseValue(key), "=", lease)
	}
	return clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
}

// startServer starts the embedded etcd server.
func (n *Node) startServer(initialCluster string, existing bool) error {
	n.stopProbe()
	cfg := n.cfg
	parse := func(s string) (url.URL, error) {
		u, err := url.Parse(s)
		if err != nil {
			return url.URL{}, err
		}
		return *u, nil
	}
	var us [4]url.URL
	for i, s := range []string{cfg.ClientURL, cfg.AdvertiseClientURL, cfg.PeerURL, cfg.AdvertisePeerURL} {
		u, err := parse(s)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		us[i] = u
	}
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.DataDir
	ec.ListenClientUrls = []url.URL{us[0]}
	ec.AdvertiseClientUrls = []url.URL{us[1]}
	ec.ListenPeerUrls = []url.URL{us[2]}
	ec.AdvertisePeerUrls = []url.URL{us[3]}
	ec.InitialCluster = initialCluster
	if !existing {
		// A token no other bootstrap shares: etcd derives the cluster ID
		// and the first member's ID from it, so a node that lost its data
		// and bootstraps again at its old URLs makes a cluster with
		// another identity, which the old cluster's members and clients
		// refuse, instead of passing for the cluster it was part of.
		tok := make([]byte, 16)
		_, _ = rand.Read(tok)
		ec.InitialClusterToken = "topokit-" + hex.EncodeToString(tok)
	} else {
		ec.InitialClusterToken = "topokit" // unused: the IDs come from the data or the cluster
	}
	if existing {
		ec.ClusterState = embed.ClusterStateFlagExisting
	}
	if cfg.TickMs != 0 {
		ec.TickMs = cfg.TickMs
	}
	if cfg.ElectionMs != 0 {
		ec.ElectionMs = cfg.ElectionMs
	}
	ec.UnsafeNoFsync = cfg.NoFsync
	ec.ClientTLSInfo = cfg.ClientTLS
	ec.PeerTLSInfo = cfg.PeerTLS
	if cfg.BcryptCost != 0 {
		ec.BcryptCost = cfg.BcryptCost
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(cfg.EtcdLogger.WithOptions(zap.WithPanicHook(removalRaceHook{})))
	gate := newRequestGate()
	ec.GRPCAdditionalServerOptions = []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(gate.interceptor()),
		grpc.ChainStreamInterceptor(gate.streamInterceptor()),
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return fmt.Errorf("etcdcluster: starting the embedded etcd server %s: %w", cfg.Name, err)
	}
	gate.attach(e)
	n.mu.Lock()
	n.srv, n.srvID, n.gate = e, uint64(e.Server.MemberID()), gate
	n.mu.Unlock()
	if m := e.Server.Cluster().Member(e.Server.MemberID()); m != nil && slices.Contains(m.PeerURLs, cfg.AdvertisePeerURL) {
		if err := writeMemberRecord(cfg.DataDir, memberRecord{Name: cfg.Name, ID: fmt.Sprintf("%x", n.srvID), PeerURL: cfg.AdvertisePeerURL}); err != nil {
			n.log.Warn("recording the member's identity in its data directory", "err", err)
		}
	}
	n.log.Info("embedded etcd server started", "member", fmt.Sprintf("%x", n.srvID), "client", cfg.AdvertiseClientURL, "peer", cfg.AdvertisePeerURL)
	return nil
}

// memberRecordFile is the file in DataDir/member that records whose
// member data it is (memberRecord as JSON). It moves aside with the data.
const memberRecordFile = "topokit-member.json"

// memberRecord says which node's member the data in DataDir/member is:
// the node's name, the member ID (hex) and the peer URL it was started
// with.
type memberRecord struct {
	Name    string `json:"name"`
	ID      string `json:"id"`
	PeerURL string `json:"peerURL"`
}

func writeMemberRecord(dataDir string, r memberRecord) error {
	p := filepath.Join(dataDir, "member", memberRecordFile)
	if b, err := os.ReadFile(p); err == nil {
		var old memberRecord
		if json.Unmarshal(b, &old) == nil && old == r {
			return nil
		}
	}
	b, _ := json.Marshal(r)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// checkMemberRecord returns an error wrapping ErrForeignData when the
// member data in cfg.DataDir records another peer URL than the node's.
// Data without a record (written by an older topokit) passes; Start then
// checks the membership the started server holds (checkOwnMember).
func checkMemberRecord(cfg Config) error {
	b, err := os.ReadFile(filepath.Join(cfg.DataDir, "member", memberRecordFile))
	if err != nil {
		return nil
	}
	var r memberRecord
	if json.Unmarshal(b, &r) != nil || r.PeerURL == "" || r.PeerURL == cfg.AdvertisePeerURL {
		return nil
	}
	return foreignDataError(cfg, fmt.Sprintf("member %s (ID %s) with peer URL %s", r.Name, r.ID, r.PeerURL), []string{r.PeerURL})
}

// checkDataMembers returns an error wrapping ErrForeignData when the
// membership stored in the member data's backend (read-only, before any
// server runs) lists members none of which has the node's peer URL: the
// data cannot be this node's member's. It checks data without a member
// record (written by an older topokit); data it cannot read passes.
func checkDataMembers(cfg Config) error {
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "member", memberRecordFile)); err == nil {
		return nil
	}
	ms, _ := etcdembed.DataMembers(cfg.DataDir)
	var found, peers []string
	mine := false
	for _, m := range ms {
		mine = mine || slices.Contains(m.PeerURLs, cfg.AdvertisePeerURL)
		peers = append(peers, m.PeerURLs...)
		name := m.Name
		if name == "" {
			name = "(unstarted)"
		}
		found = append(found, name+" "+strings.Join(m.PeerURLs, ","))
	}
	if mine || len(found) == 0 {
		return nil
	}
	slices.Sort(found)
	return foreignDataError(cfg, "a member of a cluster whose members ("+strings.Join(found, "; ")+") have other peer URLs", peers)
}

// checkOwnMember returns an error wrapping ErrForeignData when the
// running server's member, as its data records it, does not have the
// node's peer URL.
func (n *Node) checkOwnMember() error {
	n.mu.Lock()
	e, id := n.srv, n.srvID
	n.mu.Unlock()
	if e == nil {
		return nil
	}
	m := e.Server.Cluster().Member(e.Server.MemberID())
	if m == nil || slices.Contains(m.PeerURLs, n.cfg.AdvertisePeerURL) {
		return nil
	}
	return foreignDataError(n.cfg, fmt.Sprintf("member %s (ID %x) with peer URL %s", m.Name, id, strings.Join(m.PeerURLs, ",")), m.PeerURLs)
}

// foreignDataError says whose data cfg.DataDir holds (whose, a member
// with peer URLs peers), and what to do.
func foreignDataError(cfg Config, whose string, peers []string) error {
	own, err := url.Parse(cfg.AdvertisePeerURL)
	if err == nil && slices.ContainsFunc(peers, func(p string) bool {
		u, err := url.Parse(p)
		return err == nil && u.Host == own.Host && u.Scheme != own.Scheme
	}) {
		return fmt.Errorf("%w: %s holds the data of %s, but this node (%s) has peer URL %s: "+
			"only the scheme differs, so this node was started with other peer TLS settings than its member had; "+
			"start it with the same peer TLS settings (certificate, key and CA: https peer URLs) as before",
			ErrForeignData, cfg.DataDir, whose, cfg.Name, cfg.AdvertisePeerURL)
	}
	return fmt.Errorf("%w: %s holds the data of %s, but this node (%s) has peer URL %s; "+
		"two processes running one member can lose acknowledged writes, so it is not started. "+
		"If the directory is another node's (copied, or given by mistake), give this node its own data directory; "+
		"if this node's peer address changed, start it with its old one, or move %s aside and start it with seeds (client URLs of running members) to join as a new member",
		ErrForeignData, cfg.DataDir, whose, cfg.Name, cfg.AdvertisePeerURL, filepath.Join(cfg.DataDir, "member"))
}

// removalRaceHook is the embedded server's panic hook. etcd v3.7 panics
// (through its logger) when a request handler asks whether the local
// member is a learner while the member's own removal is being applied
// (etcd-io/etcd#21966: Maintenance/Status, the learner interceptors and
// the health handler), which would crash the whole host process on a
// routine removal. For that one message the hook ends only the request's
// goroutine (runtime.Goexit: deferred unlocks run, the request gets no
// answer); every other etcd panic stays a panic.
type removalRaceHook struct{}

func (removalRaceHook) OnWrite(ce *zapcore.CheckedEntry, _ []zapcore.Field) {
	if ce.Message == "failed to find local ID in cluster members" {
		runtime.Goexit()
	}
	panic(ce.Message)
}

// recordedClientURLs returns the client URLs of the other members that
// the running server's data records (its last known membership).
func (n *Node) recordedClientURLs() []string {
	n.mu.Lock()
	e, id := n.srv, n.srvID
	n.mu.Unlock()
	if e == nil {
		return nil
	}
	var urls []string
	for _, m := range e.Server.Cluster().Members() {
		if uint64(m.ID) != id {
			urls = append(urls, m.ClientURLs...)
		}
	}
	slices.Sort(urls)
	return urls
}

// clusterID returns the cluster ID of the running server, 0 when none.
func (n *Node) clusterID() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv == nil {
		return 0
	}
	return uint64(n.srv.Server.Cluster().ID())
}

// awaitRejoined waits until the member restarted from its data serves
// (it rejoined a quorum of its cluster) or its server stopped (e.g. the
// cluster removed it while it was down: the node then finds out through
// the other members), logging after a second, then every waitSayEvery,
// which members it waits for. It returns ctx's error when ctx ends
// first.
func (n *Node) awaitRejoined(ctx context.Context) error {
	n.mu.Lock()
	e := n.srv
	n.mu.Unlock()
	if e == nil {
		return nil
	}
	// First said after a second (a member of a running cluster is ready
	// sooner), then every waitSayEvery.
	t := time.NewTimer(time.Second)
	defer t.Stop()
	for {
		select {
		case <-e.Server.ReadyNotify():
			return nil
		case <-e.Server.StopNotify():
			return nil
		case <-ctx.Done():
			return fmt.Errorf("etcdcluster: waiting for a quorum of the cluster this member's data records (%s): %w", strings.Join(n.recordedPeers(), ", "), ctx.Err())
		case <-t.C:
			t.Reset(waitSayEvery)
			n.log.Warn("waiting for a quorum: this member, restarted from its data, serves once a majority of its cluster's voters runs; start its other members (with their data)",
				"members", strings.Join(n.recordedPeers(), ", "))
		}
	}
}

// recordedPeers describes the other members the running server's data
// records, as "name peerURL".
func (n *Node) recordedPeers() []string {
	n.mu.Lock()
	e, id := n.srv, n.srvID
	n.mu.Unlock()
	if e == nil {
		return nil
	}
	var out []string
	for _, m := range e.Server.Cluster().Members() {
		if uint64(m.ID) != id {
			out = append(out, dashName(m.Name, m.ID.String())+" "+strings.Join(m.PeerURLs, ","))
		}
	}
	slices.Sort(out)
	return out
}

// dashName is a member's name, or for a member never started
// "(unstarted ID)".
func dashName(name, id string) string {
	if name == "" {
		return "(unstarted " + id + ")"
	}
	return name
}

// closeServer stops the embedded server, if any, releasing its ports.
func (n *Node) closeServer() {
	n.mu.Lock()
	e, g := n.srv, n.gate
	n.srv, n.srvID, n.gate = nil, 0, nil
	n.mu.Unlock()
	if e != nil {
		// End the clients' watches and keepalives first: the graceful
		// stop of the gRPC server would wait for them.
		g.endStreams()
		etcdembed.CloseEtcd(e)
	}
}

// moveDataAside renames DataDir/member so that the node can join again
// as a new member.
func (n *Node) moveDataAside() {
	d := filepath.Join(n.cfg.DataDir, "member")
	if _, err := os.Stat(d); err != nil {
		return
	}
	to := fmt.Sprintf("%s.removed-%d", d, time.Now().UnixNano())
	if err := os.Rename(d, to); err != nil {
		n.log.Error("moving removed member data aside", "err", err)
		return
	}
	n.log.Info("moved removed member data aside", "to", to)
}

func stopped(e *embed.Etcd) bool {
	select {
	case <-e.Server.StopNotify():
		return true
	default:
		return false
	}
}

// removedData returns the member data directories that moveDataAside
// left in dir (nil when none).
func removedData(dir string) []string {
	ds, _ := filepath.Glob(filepath.Join(dir, "member.removed-*"))
	return ds
}

func hasMemberData(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "member", "wal"))
	return err == nil && st.IsDir()
}

func containsID(ms []*etcdserverpb.Member, id uint64) bool {
	return slices.ContainsFunc(ms, func(m *etcdserverpb.Member) bool { return m.ID == id })
}

// ttlSeconds rounds d up to whole seconds, at least 1.
func ttlSeconds(d time.Duration) int64 {
	return max(int64((d+time.Second-1)/time.Second), 1)
}

var errNotLeading = errors.New("etcdcluster: no longer the decider")
