package etcdcluster

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.uber.org/zap"
)

// DefaultPrefix is the etcd key prefix of the cluster's own keys when
// Config.Prefix is empty.
const DefaultPrefix = "/topokit/cluster"

// DefaultIdealSize is the ideal number of voting members when the cluster
// holds no size key.
const DefaultIdealSize = 3

// Defaults of the Config durations.
const (
	DefaultVolunteerTTL   = 10 * time.Second
	DefaultDeciderTTL     = 10 * time.Second
	DefaultNomineeTimeout = 60 * time.Second
	DefaultCheckInterval  = time.Second
	DefaultLeaveTimeout   = 30 * time.Second
)

// LANTickMs and LANElectionMs are a raft heartbeat interval and election
// timeout, in milliseconds, for members on one machine or one LAN (peer
// round trips of a few milliseconds at most); topoctl serve runs its
// nodes with them by default. etcd's own defaults (100 and 1000, kept by
// a zero Config.TickMs and ElectionMs) suit networks with longer round
// trips. A follower calls an election when it has not heard from the
// leader for a random time between one and two election timeouts, so
// after the leader's death a new one is elected within about 0.5-1 s
// with these, 1-2 s with etcd's. They follow etcd's advice (an election
// timeout of at least ten heartbeats, above the peers' round-trip time).
// What a low election timeout costs is a needless election when the
// leader is starved (CPU or disk) for longer than it: no data is lost,
// writes are refused for about one election.
const (
	LANTickMs     = 50
	LANElectionMs = 500
)

// ErrNameTaken is wrapped by Start's error when another running node
// holds the volunteer key of Config.Name with other URLs; nothing is
// written then.
var ErrNameTaken = errors.New("etcdcluster: node name taken")

// ErrFormerMember is wrapped by Start's error for a node given no seeds
// whose DataDir holds no member data but the data of a member that left
// or was removed (DataDir/member.removed-<ns>): bootstrapping would make
// a second cluster beside the one it was a member of. Give Seeds (client
// URLs of running members) to join that cluster again, or remove the
// moved-aside data to bootstrap a new one. Nothing is started then.
var ErrFormerMember = errors.New("etcdcluster: the data directory is a former member's")

// ErrForeignData is wrapped by Start's error for a node whose DataDir
// holds the data of a member whose peer URL is not the node's
// AdvertisePeerURL: a copy of another node's data directory, another
// node's directory given by mistake, or a node whose peer address
// changed. Running it would make two processes one raft member (the
// leader counting one's acknowledgement for the other's log can lose
// acknowledged writes), so nothing is started: give the node its own
// data directory, or its old peer address; or, to rejoin under the new
// address, move DataDir/member aside and start the node with Seeds.
var ErrForeignData = errors.New("etcdcluster: the data directory holds another member's data")

// ErrInvalidConfig is wrapped by the errors of Start and Run for a Config
// they refuse; nothing is started or written then.
var ErrInvalidConfig = errors.New("etcdcluster: invalid config")

// Config describes one node. Fields left zero take the documented
// defaults.
type Config struct {
	// Name is the node's name and, when it is a member, its etcd member
	// name. It must be unique in the cluster, non-empty, and made of
	// letters, digits, '-', '_' and '.'. Required. Start refuses a name
	// whose volunteer key a running node holds with other URLs
	// (ErrNameTaken), and a node never overwrites another node's
	// volunteer key.
	Name string

	// DataDir holds the node's etcd member data (DataDir/member). A
	// directory that holds member data restarts that member, unless that
	// member's peer URL is not AdvertisePeerURL (ErrForeignData). A member that
	// was removed from the cluster moves its data aside to
	// DataDir/member.removed-<unix nanoseconds>; with such data and no
	// member data, a node given no Seeds does not bootstrap
	// (ErrFormerMember). Required unless ClientOnly.
	DataDir string

	// ClientURL and PeerURL are the URLs the embedded etcd server listens
	// on for clients and peers, e.g. "http://127.0.0.1:2379". Required
	// unless ClientOnly.
	ClientURL, PeerURL string

	// AdvertiseClientURL and AdvertisePeerURL are the URLs other nodes use
	// to reach this one. Default: ClientURL and PeerURL.
	AdvertiseClientURL, AdvertisePeerURL string

	// Seeds are client URLs (or host:port) of running members, or, for a
	// symmetric start, of every node of a new cluster (this node's own
	// URL may be among them). Empty with no member data in DataDir
	// bootstraps a new one-member cluster. With seeds and no member data
	// Start waits (bounded by its ctx, logging a warning every 5 s of what it waits
	// for) until an etcd member answers at a seed, then joins as a
	// volunteer; see BootstrapExpect for a cluster that does not exist
	// yet.
	Seeds []string

	// BootstrapExpect, when > 0, lets a node with Seeds and no member
	// data form a new cluster: while no etcd member answers at any seed,
	// the node announces itself on its client address, and once
	// BootstrapExpect nodes with the same BootstrapExpect see each other
	// through their seeds, exactly one of them (endorsed by
	// BootstrapExpect of them: the lowest name they saw) bootstraps a
	// one-member cluster, storing BootstrapExpect as its ideal size, and
	// the others join it as volunteers. Start every node of a new cluster
	// with the same Seeds and the same BootstrapExpect, fewer than
	// 2*BootstrapExpect nodes at a time. 0 (the default) never
	// bootstraps from seeds. Not with ClientOnly; at most MaxVoters.
	BootstrapExpect int

	// ClientOnly makes the node a client of the cluster that never
	// volunteers, never becomes a member and never decides. It requires
	// Seeds.
	ClientOnly bool

	// Prefix is the etcd key prefix of the cluster's own keys (size,
	// volunteers, endpoints, nominee, decider election and membership
	// lock). Default DefaultPrefix.
	Prefix string

	// VolunteerTTL is the TTL of the lease that holds the node's volunteer
	// and endpoint keys (rounded up to whole seconds): how long after the
	// node's death the decider removes it. Default 10 s.
	VolunteerTTL time.Duration

	// DeciderTTL is the lease TTL of the decider candidacy and of the
	// membership lock: how long a dead decider blocks its successor.
	// Default 10 s.
	DeciderTTL time.Duration

	// NomineeTimeout bounds the time a nominee has to start its server and
	// catch up with the leader before the decider removes it again.
	// Default 60 s.
	NomineeTimeout time.Duration

	// CheckInterval is the period of the node's and the decider's checks
	// (membership, nominations, learner catch-up, endpoint sync).
	// Default 1 s.
	CheckInterval time.Duration

	// LeaveTimeout bounds a graceful leave's wait for the decider to
	// remove the member. Default 30 s.
	LeaveTimeout time.Duration

	// TickMs and ElectionMs are etcd's Raft heartbeat interval and election
	// timeout in milliseconds. Zero keeps etcd's defaults (100 and 1000);
	// LANTickMs and LANElectionMs fail over faster on one machine or a
	// LAN. Start refuses (ErrInvalidConfig) an election timeout below 5
	// heartbeats or above 50000 ms, as etcd does. Give every member the
	// same values.
	TickMs, ElectionMs uint

	// NoFsync disables fsync in the member's storage; it loses data on a
	// machine crash and is meant for tests.
	NoFsync bool

	// ClientTLS is the TLS of the client URLs, with etcd's meanings:
	// CertFile and KeyFile are the server certificate (the client URLs
	// must then be https); TrustedCAFile with ClientCertAuth requires
	// every client to present a certificate signed by that CA (etcd
	// requires one whenever TrustedCAFile is set). The node is also a
	// client of the cluster (volunteering, deciding, following the
	// member list) and presents the same CertFile and KeyFile as its
	// client certificate and verifies the members' certificates against
	// TrustedCAFile (the system roots when empty), so in a cluster with
	// client-certificate auth only nodes holding a certificate of the
	// cluster's CA can read, write or volunteer. A ClientOnly node uses
	// them as its client credentials only. Certificates are re-read on
	// each TLS handshake: rotating the files needs no restart.
	ClientTLS transport.TLSInfo

	// PeerTLS is the TLS of the peer URLs, with etcd's meanings: CertFile
	// and KeyFile are the peer certificate (peer URLs must then be
	// https), used both to serve and to dial peers; TrustedCAFile with
	// ClientCertAuth requires peers to present a certificate signed by
	// that CA. While such a node is not a member, it answers TLS
	// handshakes on its peer address with the same settings, and a
	// decider nominates a volunteer only after a handshake with it
	// succeeded with the decider's own peer TLS settings: a volunteer
	// without the cluster's peer credentials never becomes a learner.
	PeerTLS transport.TLSInfo

	// Username and Password are the etcd credentials the node logs in
	// with when etcd authentication is on. Membership changes need the
	// root role, so the nodes of a cluster with auth use the root user.
	Username, Password string

	// EnableAuth makes a node that bootstraps a new cluster create the
	// etcd user root with Password, grant it the root role and enable
	// etcd authentication before it writes anything else; the node then
	// logs in as root. It requires Password, and Username empty or
	// "root". Nodes joining or restarting log in with Username and
	// Password and do not change the cluster's auth.
	EnableAuth bool

	// BcryptCost is the bcrypt cost the member hashes passwords with
	// (zero: etcd's default, 10). Tests lower it.
	BcryptCost uint

	// Logger receives the node's logs, each membership decision with its
	// reason. Nil means slog.Default().
	Logger *slog.Logger

	// EtcdLogger receives the embedded etcd server's own logs. Nil
	// discards them.
	EtcdLogger *zap.Logger
}

func (c Config) withDefaults() (Config, error) {
	bad := func(format string, args ...any) (Config, error) {
		return c, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if c.Name == "" {
		return bad("Name is required")
	}
	for _, r := range c.Name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return bad("Name %q has a character other than letters, digits, '-', '_' and '.'", c.Name)
		}
	}
	if c.BootstrapExpect < 0 || c.BootstrapExpect > MaxVoters {
		return bad("BootstrapExpect %d is not between 0 and %d", c.BootstrapExpect, MaxVoters)
	}
	if c.BootstrapExpect > 0 && (c.ClientOnly || len(c.Seeds) == 0) {
		return bad("BootstrapExpect needs Seeds and a node that is not ClientOnly")
	}
	if c.ClientOnly {
		if len(c.Seeds) == 0 {
			return bad("ClientOnly requires Seeds")
		}
	} else {
		if c.DataDir == "" || c.ClientURL == "" || c.PeerURL == "" {
			return bad("DataDir, ClientURL and PeerURL are required")
		}
		if c.AdvertiseClientURL == "" {
			c.AdvertiseClientURL = c.ClientURL
		}
		if c.AdvertisePeerURL == "" {
			c.AdvertisePeerURL = c.PeerURL
		}
		for _, u := range []struct {
			url string
			tls bool
			of  string
		}{
			{c.ClientURL, serverTLSOn(c.ClientTLS), "client"}, {c.AdvertiseClientURL, serverTLSOn(c.ClientTLS), "client"},
			{c.PeerURL, serverTLSOn(c.PeerTLS), "peer"}, {c.AdvertisePeerURL, serverTLSOn(c.PeerTLS), "peer"},
		} {
			pu, err := url.Parse(u.url)
			if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				return bad("URL %q is not http(s)://host:port", u.url)
			}
			if u.tls != (pu.Scheme == "https") {
				if u.tls {
					return bad("%s URL %q must be https: %s TLS is on", u.of, u.url, u.of)
				}
				return bad("%s URL %q is https but %s TLS has no certificate and key", u.of, u.url, u.of)
			}
		}
	}
	for _, t := range []struct {
		info transport.TLSInfo
		of   string
	}{{c.ClientTLS, "client"}, {c.PeerTLS, "peer"}} {
		if (t.info.CertFile == "") != (t.info.KeyFile == "") {
			return bad("%s TLS needs both a certificate and a key file", t.of)
		}
		if t.info.ClientCertAuth && t.info.TrustedCAFile == "" {
			return bad("%s certificate auth needs a trusted CA file", t.of)
		}
	}
	if c.EnableAuth {
		if c.Password == "" {
			return bad("EnableAuth requires the root Password")
		}
		if c.Username != "" && c.Username != "root" {
			return bad("EnableAuth logs in as root, not %q", c.Username)
		}
		c.Username = "root"
	}
	if err := CheckRaftTiming(cmp.Or(c.TickMs, 100), cmp.Or(c.ElectionMs, 1000)); err != nil {
		return bad("%v", err)
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	c.Prefix = "/" + strings.Trim(c.Prefix, "/")
	if c.Prefix == "/" {
		return bad("Prefix must not be the root")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.VolunteerTTL, DefaultVolunteerTTL)
	def(&c.DeciderTTL, DefaultDeciderTTL)
	def(&c.NomineeTimeout, DefaultNomineeTimeout)
	def(&c.CheckInterval, DefaultCheckInterval)
	def(&c.LeaveTimeout, DefaultLeaveTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.Logger = c.Logger.With("node", c.Name)
	if c.EtcdLogger == nil {
		c.EtcdLogger = zap.NewNop()
	}
	return c, nil
}

// CheckRaftTiming returns an error, naming the values, when etcd refuses a
// heartbeat interval of tickMs and an election timeout of electionMs
// (milliseconds): a zero heartbeat, an election timeout below 5
// heartbeats or above 50000 ms. It does not wrap ErrInvalidConfig, so
// that callers (topoctl serve) can word it for their own flags.
func CheckRaftTiming(tickMs, electionMs uint) error {
	switch {
	case tickMs == 0:
		return errors.New("the heartbeat interval must be at least 1 ms")
	case electionMs < 5*tickMs:
		return fmt.Errorf("the election timeout (%d ms) must be at least 5 heartbeat intervals (%d ms); etcd advises 10", electionMs, 5*tickMs)
	case electionMs > 50000:
		return fmt.Errorf("the election timeout (%d ms) must be at most 50000 ms", electionMs)
	}
	return nil
}

// keys are the etcd keys of one cluster, under its prefix.
type keys struct {
	prefix string
}

func (k keys) size() string              { return k.prefix + "/size" }
func (k keys) nominee() string           { return k.prefix + "/nominee" }
func (k keys) volunteers() string        { return k.prefix + "/volunteers/" }
func (k keys) volunteer(n string) string { return k.volunteers() + n }
func (k keys) endpoints() string         { return k.prefix + "/endpoints/" }
func (k keys) endpoint(n string) string  { return k.endpoints() + n }

// deciderElection is the topokit election name of the decider, under the
// Conn rooted at the prefix: keys <prefix>/elections/decider/...
const deciderElection = "decider"

// membershipLock is the directory of the membership lock, under the Conn
// rooted at the prefix: keys <prefix>/membership/locks/...
const membershipLock = "membership"

func (k keys) deciderPrefix() string { return k.prefix + "/elections/" + deciderElection + "/" }

// serverTLSOn reports whether i configures a server certificate.
func serverTLSOn(i transport.TLSInfo) bool { return i.CertFile != "" }

// clientTLSConfig returns the TLS configuration the node uses as a client
// of the cluster, or nil for plaintext: the certificate, key and CA of
// ClientTLS. The certificate is re-read on each handshake.
func (c Config) clientTLSConfig() (*tls.Config, error) {
	return ClientOptions{CertFile: c.ClientTLS.CertFile, KeyFile: c.ClientTLS.KeyFile, CAFile: c.ClientTLS.TrustedCAFile}.tlsConfig()
}

// peerDialTLS returns the TLS configuration the decider checks a
// volunteer's peer address with, or nil when peer TLS is off.
func (c Config) peerDialTLS() (*tls.Config, error) {
	if !serverTLSOn(c.PeerTLS) {
		return nil, nil
	}
	return ClientOptions{CertFile: c.PeerTLS.CertFile, KeyFile: c.PeerTLS.KeyFile, CAFile: c.PeerTLS.TrustedCAFile}.tlsConfig()
}

// clientOptions are the node's own client credentials.
func (c Config) clientOptions() ClientOptions {
	return ClientOptions{CertFile: c.ClientTLS.CertFile, KeyFile: c.ClientTLS.KeyFile, CAFile: c.ClientTLS.TrustedCAFile,
		Username: c.Username, Password: c.Password}
}

// normalizeEndpoints turns host:port seeds into URLs (https when secure)
// and drops blanks.
func normalizeEndpoints(eps []string, secure bool) []string {
	scheme := "http://"
	if secure {
		scheme = "https://"
	}
	var out []string
	for _, e := range eps {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if !strings.Contains(e, "://") {
			e = scheme + e
		}
		out = append(out, e)
	}
	return out
}
