package etcdtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/topokit/topokit/internal/freeport"
)

// memberConfig describes one member: the JSON line the member program
// (server/main.go) reads.
type memberConfig struct {
	Name, Dir                        string
	ClientURL, PeerURL               string
	AdvertisePeerURL                 string
	InitialCluster, ClusterToken     string
	Existing, NoFsync                bool
	TickMs, ElectionMs, BcryptCost   uint
	CertFile, KeyFile, TrustedCAFile string
	ClientCertAuth                   bool
}

// errAddrInUse is wrapped by startMemberProcess's error when a listen
// address was taken, so that the caller can pick other ports and retry.
var errAddrInUse = errors.New("etcdtest: address already in use")

// stopTimeout bounds a clean stop of a member; it is killed after.
const stopTimeout = 30 * time.Second

// Member is one running etcd member, a process of its own running the
// etcd server version ServerVersion names. Its methods are safe for
// concurrent use.
type Member struct {
	cfg     memberConfig
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	started chan error    // the member program's first line
	ready   chan error    // its second
	exited  chan struct{} // closed once the process has exited
	bcrypt  uint          // the bcrypt cost the member reported

	statusOnce sync.Once
	status     *clientv3.Client // for IsLeader, nil if it cannot dial
	closeOnce  sync.Once
}

// startMemberProcess starts the member program with cfg and returns once
// the member listens (a member of a new cluster cannot be ready before a
// quorum of its peers runs: waitReady waits for that). Its error wraps
// errAddrInUse when a listen address is taken. The caller must Close the
// member.
func startMemberProcess(cfg memberConfig) (*Member, error) {
	if cfg.ClusterToken == "" {
		cfg.ClusterToken = "topokit"
	}
	bin, err := serverBinary()
	if err != nil {
		return nil, err
	}
	line, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: %w", err)
	}
	m := &Member{cfg: cfg, cmd: exec.Command(bin), started: make(chan error, 1), ready: make(chan error, 1), exited: make(chan struct{})}
	m.cmd.Stderr = os.Stderr
	if m.stdin, err = m.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("etcdtest: %w", err)
	}
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("etcdtest: %w", err)
	}
	if err := m.cmd.Start(); err != nil {
		return nil, fmt.Errorf("etcdtest: starting the etcd member program: %w", err)
	}
	go m.follow(bufio.NewReader(stdout))
	if _, err := m.stdin.Write(append(line, '\n')); err != nil {
		m.Close()
		return nil, fmt.Errorf("etcdtest: member %s: %w", cfg.Name, err)
	}
	if err := <-m.started; err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// follow reads the member program's lines ("started", then "ready
// <bcrypt cost>", or "error <message>"), then waits for it to exit.
func (m *Member) follow(out *bufio.Reader) {
	step := func(want string) (string, error) {
		line, err := out.ReadString('\n')
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, want):
			return strings.TrimSpace(strings.TrimPrefix(line, want)), nil
		case strings.HasPrefix(line, "error "):
			msg := strings.TrimPrefix(line, "error ")
			if strings.Contains(msg, "address already in use") {
				return "", fmt.Errorf("%w: member %s: %s", errAddrInUse, m.cfg.Name, msg)
			}
			return "", fmt.Errorf("etcdtest: member %s: %s", m.cfg.Name, msg)
		case err != nil:
			return "", fmt.Errorf("etcdtest: member %s stopped: %w", m.cfg.Name, err)
		default:
			return "", fmt.Errorf("etcdtest: member %s: unexpected %q", m.cfg.Name, line)
		}
	}
	_, err := step("started")
	m.started <- err
	if err == nil {
		var cost string
		cost, err = step("ready")
		if err == nil {
			var n uint64
			n, err = strconv.ParseUint(cost, 10, 32)
			m.bcrypt = uint(n)
		}
		m.ready <- err
	}
	_, _ = io.Copy(io.Discard, out)
	_ = m.cmd.Wait()
	close(m.exited)
}

// waitReady waits until the member serves clients, or ctx ends, or the
// member stops.
func (m *Member) waitReady(ctx context.Context) error {
	select {
	case err := <-m.ready:
		m.ready <- err // for a later caller
		return err
	case <-ctx.Done():
		return fmt.Errorf("etcdtest: member %s not ready: %w", m.cfg.Name, ctx.Err())
	}
}

// ClientAddr returns the member's client address, "127.0.0.1:PORT", the
// form the etcd2 backend takes as its server address.
func (m *Member) ClientAddr() string {
	u, err := url.Parse(m.cfg.ClientURL)
	if err != nil {
		return m.cfg.ClientURL
	}
	return u.Host
}

// BcryptCost returns the bcrypt cost the member hashes user passwords
// with, as the running server reports it.
func (m *Member) BcryptCost() uint { return m.bcrypt }

// IsLeader reports whether the member currently believes it is the Raft
// leader of its cluster (as its Status answer says; false if it does not
// answer within a second, and always for a member serving TLS).
func (m *Member) IsLeader() bool {
	m.statusOnce.Do(func() {
		m.status, _ = clientv3.New(clientv3.Config{Endpoints: []string{m.ClientAddr()}, DialTimeout: time.Second, Logger: zap.NewNop()})
	})
	if m.status == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, err := m.status.Status(ctx, m.ClientAddr())
	return err == nil && st.Header != nil && st.Leader == st.Header.MemberId
}

// Close stops the member cleanly (closing its listeners and client
// streams, keeping its data) and returns once its process has exited; a
// member that does not stop within 30 s is killed. Close is idempotent.
func (m *Member) Close() {
	m.closeOnce.Do(func() {
		_ = m.stdin.Close()
		select {
		case <-m.exited:
		case <-time.After(stopTimeout):
			_ = m.cmd.Process.Kill()
			<-m.exited
		}
		m.statusOnce.Do(func() {})
		if m.status != nil {
			_ = m.status.Close()
		}
	})
}

// clusterConfigs returns the configurations of an n-member cluster on
// free 127.0.0.1 ports, member i named "m<i>" with data directory
// dirs(i). base supplies every other setting.
func clusterConfigs(n int, base memberConfig, dirs func(i int) string) ([]memberConfig, error) {
	addrs, err := freeport.Addrs(2 * n)
	if err != nil {
		return nil, fmt.Errorf("etcdtest: %w", err)
	}
	cfgs := make([]memberConfig, n)
	var initial []string
	for i := range n {
		c := base
		c.Name = fmt.Sprintf("m%d", i)
		c.Dir = dirs(i)
		c.ClientURL = "http://" + addrs[2*i]
		c.PeerURL = "http://" + addrs[2*i+1]
		cfgs[i] = c
		initial = append(initial, c.Name+"="+c.PeerURL)
	}
	for i := range cfgs {
		cfgs[i].InitialCluster = strings.Join(initial, ",")
	}
	return cfgs, nil
}

// startAll starts every member of cfgs and waits until all are ready, or
// ctx ends. On error every started member is closed.
func startAll(ctx context.Context, cfgs []memberConfig) ([]*Member, error) {
	ms := make([]*Member, 0, len(cfgs))
	fail := func(err error) ([]*Member, error) {
		for _, m := range ms {
			m.Close()
		}
		return nil, err
	}
	for _, c := range cfgs {
		m, err := startMemberProcess(c)
		if err != nil {
			return fail(err)
		}
		ms = append(ms, m)
	}
	for _, m := range ms {
		if err := m.waitReady(ctx); err != nil {
			return fail(err)
		}
	}
	return ms, nil
}
