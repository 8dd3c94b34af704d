package etcdcluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

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

// ErrInvalidConfig is wrapped by the errors of Start and Run for a Config
// they refuse; nothing is started or written then.
var ErrInvalidConfig = errors.New("etcdcluster: invalid config")

// Config describes one node. Fields left zero take the documented
// defaults.
type Config struct {
	// Name is the node's name and, when it is a member, its etcd member
	// name. It must be unique in the cluster, non-empty, and made of
	// letters, digits, '-', '_' and '.'. Required.
	Name string

	// DataDir holds the node's etcd member data (DataDir/member). A
	// directory that holds member data restarts that member. A member that
	// was removed from the cluster moves its data aside to
	// DataDir/member.removed-<unix nanoseconds>. Required unless
	// ClientOnly.
	DataDir string

	// ClientURL and PeerURL are the URLs the embedded etcd server listens
	// on for clients and peers, e.g. "http://127.0.0.1:2379". Required
	// unless ClientOnly.
	ClientURL, PeerURL string

	// AdvertiseClientURL and AdvertisePeerURL are the URLs other nodes use
	// to reach this one. Default: ClientURL and PeerURL.
	AdvertiseClientURL, AdvertisePeerURL string

	// Seeds are client URLs (or host:port) of running members. Empty with
	// no member data in DataDir bootstraps a new one-member cluster.
	Seeds []string

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
	// timeout in milliseconds. Zero keeps etcd's defaults (100 and 1000).
	TickMs, ElectionMs uint

	// NoFsync disables fsync in the member's storage; it loses data on a
	// machine crash and is meant for tests.
	NoFsync bool

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
		for _, u := range []string{c.ClientURL, c.PeerURL, c.AdvertiseClientURL, c.AdvertisePeerURL} {
			pu, err := url.Parse(u)
			if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
				return bad("URL %q is not http(s)://host:port", u)
			}
		}
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

// normalizeEndpoints turns host:port seeds into URLs and drops blanks.
func normalizeEndpoints(eps []string) []string {
	var out []string
	for _, e := range eps {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		if !strings.Contains(e, "://") {
			e = "http://" + e
		}
		out = append(out, e)
	}
	return out
}
