// Package etcdembed runs etcd members inside the current process, on top of
// go.etcd.io/etcd/server/v3/embed. It is used by `topoctl serve` (a
// long-lived local etcd) and etcdcluster. (The etcdtest package runs its
// members out of process, so that tests build with etcd client 3.6 or
// 3.7: see topo/etcd2topo/etcdtest/server.)
//
// The server is etcd 3.6 (the module's go.etcd.io/etcd requirements are
// all v3.6.x, client included, so client and server come from one
// release). etcd 3.7 answers a keys-only range without the keys' Lease
// field (etcd-io/etcd#22209, open and unfixed in every 3.7 release so
// far), which breaks Vitess processes sharing the store: their TryLock
// lists the directory keys-only and tells a held lock by a leased "locks"
// entry, so against 3.7 it waits instead of failing fast.
// TestKeysOnlyRangeCarriesLease checks the server used here. Move to 3.7
// only once a release carries the fix and that test passes on it.
//
// The package is internal: its API may change with the needs of those two
// users.
package etcdembed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/topokit/topokit/internal/freeport"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Config describes one etcd member.
type Config struct {
	// Name is the member's name, unique within its cluster. Default
	// "default".
	Name string

	// Dir is the member's data directory; it is created if missing. A
	// directory that already holds member data restarts that member.
	// Required.
	Dir string

	// ClientURL is the URL the member serves clients on and advertises, e.g.
	// "http://127.0.0.1:2379". Required.
	ClientURL string

	// PeerURL is the URL the member serves its peers on and advertises, e.g.
	// "http://127.0.0.1:2380". Required.
	PeerURL string

	// AdvertiseClientURL, when set, is the client URL the member
	// advertises instead of ClientURL (needed when ClientURL listens on
	// an unspecified address such as 0.0.0.0).
	AdvertiseClientURL string

	// AdvertisePeerURL, when set, is the URL the member tells its peers to
	// reach it at instead of PeerURL: a proxy in front of PeerURL (tests
	// use one to delay the member's Raft messages). InitialCluster must
	// then name this URL for the member.
	AdvertisePeerURL string

	// InitialCluster lists every member of a new cluster as
	// "name=peerURL,name=peerURL". Empty means a single-member cluster made
	// of this member alone.
	InitialCluster string

	// ClusterToken tells clusters apart during bootstrap. Default
	// "topokit".
	ClusterToken string

	// Existing marks a member joining (or rejoining) an existing cluster
	// rather than bootstrapping a new one.
	Existing bool

	// TickMs is the Raft heartbeat interval in milliseconds and ElectionMs
	// the election timeout in milliseconds. Zero keeps etcd's defaults (100
	// and 1000). Tests use 10 and 100 so that members start and elect a
	// leader quickly.
	TickMs, ElectionMs uint

	// NoFsync disables fsync in the member's storage. It loses data on a
	// machine crash; it is meant for tests only.
	NoFsync bool

	// BcryptCost is the bcrypt cost factor the member hashes user
	// passwords with when auth is enabled; zero keeps etcd's default (10).
	// Each authentication costs one hash check, about 2^cost rounds: tests
	// use bcrypt.MinCost (4), 64 times cheaper, since under the race
	// detector one check at 10 takes about a second.
	BcryptCost uint

	// ClientTLS, when its CertFile and KeyFile are set, makes the member
	// serve clients over TLS with that certificate (ClientURL must then be
	// https://...). With TrustedCAFile and ClientCertAuth set it also
	// requires client certificates signed by that CA.
	ClientTLS transport.TLSInfo

	// PeerTLS, when its CertFile and KeyFile are set, makes the member
	// serve and dial its peers over TLS (PeerURL must then be
	// https://...); with TrustedCAFile and ClientCertAuth set, peers must
	// present certificates signed by that CA. Certificates are re-read
	// from disk on each handshake, so rotating them needs no restart.
	PeerTLS transport.TLSInfo

	// Logger receives etcd's own logs. Nil discards them.
	Logger *zap.Logger
}

// Member is one running etcd member. Its methods are safe for concurrent
// use.
type Member struct {
	// Etcd is the embedded server, for callers that need more than this
	// type offers (e.g. Etcd.Server.Leader()).
	Etcd *embed.Etcd

	cfg   Config
	close func() // e.Close, once: a second embed.Etcd.Close panics
}

// ErrAddrInUse is wrapped by Start's error when a listen address was taken,
// so that callers that picked ports themselves can pick again and retry.
var ErrAddrInUse = errors.New("etcdembed: address already in use")

// Start starts the member described by cfg and returns without waiting for
// it to be ready (a member of a new cluster cannot be ready before a quorum
// of its peers runs): call WaitReady next. It returns an error wrapping
// ErrAddrInUse when a listen address is taken. The caller must Close the
// member.
func Start(cfg Config) (*Member, error) {
	if cfg.Dir == "" || cfg.ClientURL == "" || cfg.PeerURL == "" {
		return nil, errors.New("etcdembed: Dir, ClientURL and PeerURL are required")
	}
	if cfg.Name == "" {
		cfg.Name = "default"
	}
	if cfg.ClusterToken == "" {
		cfg.ClusterToken = "topokit"
	}
	cu, err := url.Parse(cfg.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("etcdembed: bad client URL: %w", err)
	}
	pu, err := url.Parse(cfg.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("etcdembed: bad peer URL: %w", err)
	}

	ec := embed.NewConfig()
	// NewConfig leaves this at zero (only etcd's flag parsing sets the
	// default), and a zero threshold makes the member describe every
	// request as slow.
	ec.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	ec.ListenClientUrls = []url.URL{*cu}
	ec.AdvertiseClientUrls = []url.URL{*cu}
	if cfg.AdvertiseClientURL != "" {
		acu, err := url.Parse(cfg.AdvertiseClientURL)
		if err != nil {
			return nil, fmt.Errorf("etcdembed: bad advertised client URL: %w", err)
		}
		ec.AdvertiseClientUrls = []url.URL{*acu}
	}
	ec.ListenPeerUrls = []url.URL{*pu}
	ec.AdvertisePeerUrls = []url.URL{*pu}
	if cfg.AdvertisePeerURL != "" {
		apu, err := url.Parse(cfg.AdvertisePeerURL)
		if err != nil {
			return nil, fmt.Errorf("etcdembed: bad advertised peer URL: %w", err)
		}
		ec.AdvertisePeerUrls = []url.URL{*apu}
	}
	if cfg.InitialCluster != "" {
		ec.InitialCluster = cfg.InitialCluster
	} else {
		ec.InitialCluster = cfg.Name + "=" + cfg.advertisedPeerURL()
	}
	ec.InitialClusterToken = cfg.ClusterToken
	if cfg.Existing {
		ec.ClusterState = embed.ClusterStateFlagExisting
	}
	if cfg.TickMs != 0 {
		ec.TickMs = cfg.TickMs
	}
	if cfg.ElectionMs != 0 {
		ec.ElectionMs = cfg.ElectionMs
	}
	ec.UnsafeNoFsync = cfg.NoFsync
	if cfg.BcryptCost != 0 {
		ec.BcryptCost = cfg.BcryptCost
	}
	ec.ClientTLSInfo = cfg.ClientTLS
	ec.PeerTLSInfo = cfg.PeerTLS
	lg := cfg.Logger
	if lg == nil {
		lg = zap.NewNop()
	}
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)

	e, err := embed.StartEtcd(ec)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use") {
			return nil, fmt.Errorf("%w: %w", ErrAddrInUse, err)
		}
		return nil, fmt.Errorf("etcdembed: starting member %s: %w", cfg.Name, err)
	}
	return &Member{Etcd: e, cfg: cfg, close: sync.OnceFunc(func() { CloseEtcd(e) })}, nil
}

// CloseEtcd closes e (embed.Etcd.Close, once only: a second call
// panics), also when it never became ready: etcd's Close first waits for
// the client servers, which start only once the server is ready or
// stopping, so the Close of a member that never found a quorum waits
// forever. Such a server is stopped first.
func CloseEtcd(e *embed.Etcd) {
	select {
	case <-e.Server.ReadyNotify():
	default:
		e.Server.HardStop()
	}
	e.Close()
}

// advertisedPeerURL is the URL peers reach the member at.
func (cfg Config) advertisedPeerURL() string {
	if cfg.AdvertisePeerURL != "" {
		return cfg.AdvertisePeerURL
	}
	return cfg.PeerURL
}

// WaitReady waits until the member serves clients, or ctx ends (then it
// returns ctx's error), or the member stops with an error.
func (m *Member) WaitReady(ctx context.Context) error {
	select {
	case <-m.Etcd.Server.ReadyNotify():
		return nil
	case err := <-m.Etcd.Err():
		if err == nil {
			err = errors.New("stopped")
		}
		return fmt.Errorf("etcdembed: member %s: %w", m.cfg.Name, err)
	case <-ctx.Done():
		return fmt.Errorf("etcdembed: member %s not ready: %w", m.cfg.Name, ctx.Err())
	}
}

// Name returns the member's name.
func (m *Member) Name() string { return m.cfg.Name }

// Config returns the configuration the member was started with (with
// defaults filled in). Restarting a stopped member means calling Start
// again with this Config and Existing set.
func (m *Member) Config() Config { return m.cfg }

// ClientAddr returns the member's advertised client address as
// "host:port", the form the etcd2 backend takes as its server address.
func (m *Member) ClientAddr() string {
	cu := m.cfg.ClientURL
	if m.cfg.AdvertiseClientURL != "" {
		cu = m.cfg.AdvertiseClientURL
	}
	u, err := url.Parse(cu)
	if err != nil {
		return cu
	}
	return u.Host
}

// IsLeader reports whether the member currently believes it is the Raft
// leader of its cluster.
func (m *Member) IsLeader() bool {
	return uint64(m.Etcd.Server.MemberID()) == m.Etcd.Server.Lead()
}

// Close stops the member and releases its listeners. Open client streams
// (watches) are given up to etcd's request timeout to end. Close is
// idempotent.
func (m *Member) Close() {
	m.close()
}

// FreeAddrs returns n distinct "127.0.0.1:PORT" addresses that were free a
// moment ago, outside the kernel's ephemeral port range (see
// internal/freeport), so that a member restarted on its ports does not
// find one taken by an unrelated outgoing connection. Another process may
// take one before it is used; Start then fails with ErrAddrInUse and the
// caller picks again.
func FreeAddrs(n int) ([]string, error) {
	addrs, err := freeport.Addrs(n)
	if err != nil {
		return nil, fmt.Errorf("etcdembed: %w", err)
	}
	return addrs, nil
}

// EnableAuth turns etcd authentication on through cli (a client without
// credentials, while auth is off): it creates the user root with
// rootPassword (or sets that password when root exists), grants it the
// root role and enables auth. When auth is already on it does nothing and
// returns nil; callers check the password by logging in. It returns the
// etcd error of the first call that failed.
func EnableAuth(ctx context.Context, cli *clientv3.Client, rootPassword string) error {
	if rootPassword == "" {
		return errors.New("etcdembed: the root password is empty")
	}
	st, err := cli.AuthStatus(ctx)
	if errors.Is(err, rpctypes.ErrUserEmpty) {
		return nil // only asked for credentials when auth is on
	}
	if err != nil {
		return fmt.Errorf("etcdembed: reading the auth status: %w", err)
	}
	if st.Enabled {
		return nil
	}
	if _, err := cli.UserAdd(ctx, "root", rootPassword); err != nil {
		if !errors.Is(err, rpctypes.ErrUserAlreadyExist) {
			return fmt.Errorf("etcdembed: adding the root user: %w", err)
		}
		if _, err := cli.UserChangePassword(ctx, "root", rootPassword); err != nil {
			return fmt.Errorf("etcdembed: setting the root password: %w", err)
		}
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		return fmt.Errorf("etcdembed: granting root the root role: %w", err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return fmt.Errorf("etcdembed: enabling auth: %w", err)
	}
	return nil
}

// DataMember is a member as the membership stored in a data directory
// records it.
type DataMember struct {
	Name     string   `json:"name"`
	PeerURLs []string `json:"peerURLs"`
}

// DataMembers reads the membership stored in the member data of dir
// (dir/member/snap/db, opened read-only, waiting at most a second for a
// process that holds it) without starting anything. ok is false when
// there is none or it cannot be read. Not for a directory a running
// member of this process uses.
func DataMembers(dir string) (members []DataMember, ok bool) {
	db, err := bolt.Open(filepath.Join(dir, "member", "snap", "db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, false
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("members"))
		if b == nil {
			return errors.New("no members bucket")
		}
		return b.ForEach(func(_, v []byte) error {
			var m DataMember
			if json.Unmarshal(v, &m) == nil {
				members = append(members, m)
			}
			return nil
		})
	})
	return members, err == nil && len(members) > 0
}
