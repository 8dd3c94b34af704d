// Package etcdtest starts real etcd servers for tests of code that talks
// to etcd (the etcd2 backend, topoctl, the election package, examples).
// Members listen on free 127.0.0.1 ports, keep their data in t.TempDir(),
// log nothing, use a 10 ms heartbeat and a 100 ms election timeout so they
// start in well under a second, hash passwords at bcrypt's lowest cost (so
// that authenticating is cheap under the race detector), and are stopped
// by t.Cleanup.
//
// Each member is a process of its own, running etcd's server at the
// version ServerVersion names (v3.6.16 unless TOPOKIT_ETCDTEST_SERVER
// says v3.7.3). The package links etcd's client only: the first member a
// test process starts builds the member program in a module of its own
// (with the go command, into the user's cache directory, once per server
// version), so the client the code under test is built with and the
// server it talks to move independently, and a module whose go.mod
// requires etcd client v3.7 runs these tests as well as one on v3.6.
// A member whose test process dies stops with it.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/crypto/bcrypt"

	"github.com/topokit/topokit/internal/freeport"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// readyTimeout bounds how long a member or cluster may take to start.
const readyTimeout = 30 * time.Second

// startAttempts is how often a start is retried when another process took
// one of the free ports between picking and binding.
const startAttempts = 5

func baseConfig() memberConfig {
	return memberConfig{TickMs: 10, ElectionMs: 100, NoFsync: true, BcryptCost: uint(bcrypt.MinCost)}
}

// singleConfig is the configuration of a single-member etcd ("m0") on two
// free ports, its data in a directory under root of its own for this
// attempt (a retry after a port clash starts afresh).
func singleConfig(root string, attempt int) (memberConfig, error) {
	addrs, err := freeport.Addrs(2)
	if err != nil {
		return memberConfig{}, err
	}
	cfg := baseConfig()
	cfg.Name = "m0"
	cfg.Dir = filepath.Join(root, fmt.Sprintf("member%d", attempt))
	cfg.ClientURL = "http://" + addrs[0]
	cfg.PeerURL = "http://" + addrs[1]
	return cfg, nil
}

// Start starts a single-member etcd and returns its client address,
// "127.0.0.1:PORT", usable as the etcd2 factory's server address. The
// member is stopped when the test ends. Start fails the test (never skips)
// if the member cannot start. Call it from the test's goroutine.
func Start(t testing.TB) string {
	t.Helper()
	m := startMember(t)
	return m.ClientAddr()
}

// Launch starts a single-member etcd like Start, for use in TestMain where
// there is no testing.TB: it returns the client address and a stop
// function that stops the member and removes its data directory. Tests
// of one package can share the member, each using its own root.
func Launch() (addr string, stop func(), err error) {
	root, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		return "", nil, fmt.Errorf("etcdtest: %w", err)
	}
	for attempt := range startAttempts {
		cfg, err := singleConfig(root, attempt)
		if err != nil {
			os.RemoveAll(root)
			return "", nil, fmt.Errorf("etcdtest: %w", err)
		}
		m, err := startMemberProcess(cfg)
		if errors.Is(err, errAddrInUse) {
			continue
		}
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
			err = m.waitReady(ctx)
			cancel()
			if err != nil {
				m.Close()
			}
		}
		if err != nil {
			os.RemoveAll(root)
			return "", nil, fmt.Errorf("etcdtest: %w", err)
		}
		return m.ClientAddr(), func() { m.Close(); os.RemoveAll(root) }, nil
	}
	os.RemoveAll(root)
	return "", nil, fmt.Errorf("etcdtest: no free ports after %d attempts", startAttempts)
}

// StartMember is Start returning the running member itself, for tests that
// need to stop it early (Close) or inspect the server.
func StartMember(t testing.TB) *Member {
	t.Helper()
	return startMember(t)
}

// StartTLS starts a single-member etcd like Start that serves clients
// over TLS only, with the certificate in certFile and its key in keyFile
// (PEM), and requires client certificates signed by the CA in caFile. It
// returns the client address, "127.0.0.1:PORT".
func StartTLS(t testing.TB, certFile, keyFile, caFile string) string {
	t.Helper()
	return startMember(t, func(c *memberConfig) {
		c.ClientURL = "https://" + strings.TrimPrefix(c.ClientURL, "http://")
		c.CertFile, c.KeyFile, c.TrustedCAFile, c.ClientCertAuth = certFile, keyFile, caFile, true
	}).ClientAddr()
}

// startMember starts a single member, its configuration changed by
// tweaks.
func startMember(t testing.TB, tweaks ...func(*memberConfig)) *Member {
	t.Helper()
	root := t.TempDir()
	var lastErr error
	for attempt := range startAttempts {
		cfg, err := singleConfig(root, attempt)
		if err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
		for _, tweak := range tweaks {
			tweak(&cfg)
		}
		m, err := startMemberProcess(cfg)
		if errors.Is(err, errAddrInUse) {
			lastErr = err
			continue
		}
		if err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
		t.Cleanup(m.Close)
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		defer cancel()
		if err := m.waitReady(ctx); err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
		return m
	}
	t.Fatalf("etcdtest: no free ports after %d attempts: %v", startAttempts, lastErr)
	return nil
}

// Cluster is an n-member etcd cluster running in the test process. Its
// methods are safe for concurrent use, but those that fail the test must be
// called from the test's goroutine.
type Cluster struct {
	t testing.TB

	mu      sync.Mutex
	members []*Member
	cfgs    []memberConfig
	stopped []bool
	proxies []*faultproxy.Proxy // with ClusterOptions.PeerProxies
}

// StartCluster starts an n-member cluster (n >= 1) on free 127.0.0.1 ports
// and waits until every member is ready. Every running member is stopped
// when the test ends. It fails the test if the cluster cannot start.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartClusterWith(t, n, ClusterOptions{})
}

// ClusterOptions are the settings of StartClusterWith.
type ClusterOptions struct {
	// TickMs is the Raft heartbeat interval and ElectionMs the election
	// timeout, in milliseconds. Zero keeps the package's 10 and 100.
	TickMs, ElectionMs uint

	// PeerProxies puts a faultproxy.Proxy in front of every member's peer
	// listener and advertises the proxy to the other members, so that a
	// test can delay or cut what a member sends to its peers (see
	// Cluster.PeerProxy). Delays longer than the election timeout cause
	// elections: raise ElectionMs with them.
	PeerProxies bool
}

// StartClusterWith is StartCluster with opts.
func StartClusterWith(t testing.TB, n int, opts ClusterOptions) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("etcdtest: StartCluster needs at least one member, got %d", n)
	}
	base := baseConfig()
	if opts.TickMs != 0 {
		base.TickMs = opts.TickMs
	}
	if opts.ElectionMs != 0 {
		base.ElectionMs = opts.ElectionMs
	}
	root := t.TempDir()
	var lastErr error
	for attempt := range startAttempts {
		cfgs, err := clusterConfigs(n, base, func(i int) string {
			return filepath.Join(root, fmt.Sprintf("try%d-m%d", attempt, i))
		})
		if err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
		var proxies []*faultproxy.Proxy
		if opts.PeerProxies {
			if proxies, err = proxyPeers(cfgs); err != nil {
				t.Fatalf("etcdtest: %v", err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
		ms, err := startAll(ctx, cfgs)
		cancel()
		if err != nil {
			for _, p := range proxies {
				p.Close()
			}
		}
		if errors.Is(err, errAddrInUse) {
			lastErr = err
			continue
		}
		if err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
		c := &Cluster{t: t, members: ms, cfgs: cfgs, stopped: make([]bool, n), proxies: proxies}
		t.Cleanup(c.stopAll)
		return c
	}
	t.Fatalf("etcdtest: no free ports after %d attempts: %v", startAttempts, lastErr)
	return nil
}

// proxyPeers starts a proxy in front of each member's peer listener and
// makes cfgs advertise the proxies.
func proxyPeers(cfgs []memberConfig) ([]*faultproxy.Proxy, error) {
	proxies := make([]*faultproxy.Proxy, len(cfgs))
	initial := make([]string, len(cfgs))
	for i := range cfgs {
		p, err := faultproxy.New(strings.TrimPrefix(cfgs[i].PeerURL, "http://"))
		if err != nil {
			for _, q := range proxies[:i] {
				q.Close()
			}
			return nil, err
		}
		proxies[i] = p
		cfgs[i].AdvertisePeerURL = "http://" + p.Addr()
		initial[i] = cfgs[i].Name + "=" + cfgs[i].AdvertisePeerURL
	}
	for i := range cfgs {
		cfgs[i].InitialCluster = strings.Join(initial, ",")
	}
	return proxies, nil
}

// PeerProxy returns the proxy in front of member i's peer listener: every
// connection a peer opens to member i crosses it, which in etcd carries
// what member i sends to that peer (its Raft stream) and what the peer
// posts to member i when no stream is up. Delaying the leader's proxy
// therefore delays its appends and heartbeats, and its followers apply
// each write that much later than it does. It fails the test unless the
// cluster was started with ClusterOptions.PeerProxies.
func (c *Cluster) PeerProxy(i int) *faultproxy.Proxy {
	c.t.Helper()
	if c.proxies == nil {
		c.t.Fatalf("etcdtest: cluster started without PeerProxies")
	}
	return c.proxies[i]
}

// stopAll stops the followers first, then the leader: a leader stopped
// while its followers are stopping would spend etcd's request timeout (over
// 5 s) trying to hand its leadership over.
func (c *Cluster) stopAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, leaders := range []bool{false, true} {
		var wg sync.WaitGroup
		for i, m := range c.members {
			if !c.stopped[i] && m.IsLeader() == leaders {
				c.stopped[i] = true
				wg.Go(m.Close)
			}
		}
		wg.Wait()
	}
	for i, m := range c.members {
		if !c.stopped[i] {
			c.stopped[i] = true
			m.Close()
		}
	}
	for _, p := range c.proxies {
		p.Close()
	}
}

// Size returns the number of members, running or stopped.
func (c *Cluster) Size() int { return len(c.cfgs) }

// Endpoints returns every member's client address, comma-separated
// ("127.0.0.1:P1,127.0.0.1:P2,..."), usable as the etcd2 factory's server
// address.
func (c *Cluster) Endpoints() string {
	addrs := make([]string, len(c.cfgs))
	for i := range c.cfgs {
		addrs[i] = c.Addr(i)
	}
	return strings.Join(addrs, ",")
}

// Addr returns member i's client address, "127.0.0.1:PORT".
func (c *Cluster) Addr(i int) string {
	return strings.TrimPrefix(c.cfgs[i].ClientURL, "http://")
}

// Member returns member i as it currently runs (or last ran, if stopped).
func (c *Cluster) Member(i int) *Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.members[i]
}

// Running reports whether member i is running.
func (c *Cluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.stopped[i]
}

// StopMember stops member i (closing its listeners and client streams) and
// returns once it is down. Stopping a stopped member does nothing.
func (c *Cluster) StopMember(i int) {
	c.mu.Lock()
	if c.stopped[i] {
		c.mu.Unlock()
		return
	}
	c.stopped[i] = true
	m := c.members[i]
	c.mu.Unlock()
	m.Close()
}

// RestartMember restarts stopped member i from its data directory on the
// same ports and waits until it is ready. It fails the test if the member
// cannot restart (for example, another process took its port).
func (c *Cluster) RestartMember(i int) {
	c.t.Helper()
	c.mu.Lock()
	if !c.stopped[i] {
		c.mu.Unlock()
		return
	}
	cfg := c.cfgs[i]
	cfg.Existing = true
	m, err := startMemberProcess(cfg)
	if err != nil {
		c.mu.Unlock()
		c.t.Fatalf("etcdtest: restarting member %d: %v", i, err)
	}
	c.members[i] = m
	c.stopped[i] = false
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := m.waitReady(ctx); err != nil {
		c.t.Fatalf("etcdtest: %v", err)
	}
}

// LeaderIndex waits (up to 30 s) until a running member is the Raft leader
// and returns its index. It fails the test if no leader emerges.
func (c *Cluster) LeaderIndex() int {
	c.t.Helper()
	deadline := time.Now().Add(readyTimeout)
	for {
		c.mu.Lock()
		for i, m := range c.members {
			if !c.stopped[i] && m.IsLeader() {
				c.mu.Unlock()
				return i
			}
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			c.t.Fatalf("etcdtest: no leader among the running members after %v", readyTimeout)
			return -1
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// User is an etcd user's name and password.
type User struct{ Name, Password string }

// AuthMember is a single-member etcd with auth enabled, started by
// StartWithAuth.
type AuthMember struct {
	// Addr is the member's client address, "127.0.0.1:PORT".
	Addr string
	// Root holds the root role: it may do anything.
	Root User
	// Reader may read every key (its role grants read on the whole key
	// space) and write none.
	Reader User
	// Nobody is a user with no role: every key read or write is refused.
	Nobody User
}

// StartWithAuth starts a single-member etcd like Start, creates the users
// of AuthMember (root with the root role, a read-only reader, and a user
// with no role), then enables auth. The member is stopped when the test
// ends. It fails the test if any step fails. Call it from the test's
// goroutine.
func StartWithAuth(t testing.TB) *AuthMember {
	t.Helper()
	m := startMember(t)
	am := &AuthMember{
		Addr:   m.ClientAddr(),
		Root:   User{"root", "root-secret"},
		Reader: User{"reader", "reader-secret"},
		Nobody: User{"nobody", "nobody-secret"},
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{am.Addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	steps := []struct {
		what string
		do   func() error
	}{
		{"adding role root", func() error { _, err := cli.RoleAdd(ctx, "root"); return err }},
		{"adding user root", func() error { _, err := cli.UserAdd(ctx, am.Root.Name, am.Root.Password); return err }},
		{"granting root", func() error { _, err := cli.UserGrantRole(ctx, am.Root.Name, "root"); return err }},
		{"adding role reader", func() error { _, err := cli.RoleAdd(ctx, "reader"); return err }},
		{"granting read on every key", func() error {
			// From the lowest key to the end of the key space.
			_, err := cli.RoleGrantPermission(ctx, "reader", "\x00", "\x00", clientv3.PermissionType(clientv3.PermRead))
			return err
		}},
		{"adding user reader", func() error { _, err := cli.UserAdd(ctx, am.Reader.Name, am.Reader.Password); return err }},
		{"granting reader", func() error { _, err := cli.UserGrantRole(ctx, am.Reader.Name, "reader"); return err }},
		{"adding user nobody", func() error { _, err := cli.UserAdd(ctx, am.Nobody.Name, am.Nobody.Password); return err }},
		{"enabling auth", func() error { _, err := cli.AuthEnable(ctx); return err }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("etcdtest: %s: %v", s.what, err)
		}
	}
	return am
}
