package etcdcluster

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/topokit/topokit/topo/etcd2topo"
)

// NewClient opens an etcd client on endpoints (client URLs or host:port of
// any members) that follows the cluster's member list: every interval
// (DefaultCheckInterval when <= 0) it reads the member list and, when it
// changed, points the client at the client URLs of the started voting
// members, so that removing the member the client talks to does not break
// it. The follower stops when the client is closed. It returns an error
// wrapping ErrInvalidConfig when endpoints is empty. It does not wait for
// the cluster.
func NewClient(endpoints []string, interval time.Duration) (*clientv3.Client, error) {
	eps := normalizeEndpoints(endpoints)
	if len(eps) == 0 {
		return nil, fmt.Errorf("%w: no endpoint given", ErrInvalidConfig)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            eps,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdcluster: %w", err)
	}
	go follow(cli, interval, slog.Default())
	return cli, nil
}

// OpenConn opens a topokit etcd2 Conn rooted at root (see
// etcd2topo.NewConn for opts, root and its errors) whose etcd client
// follows the cluster's member list like NewClient's. The follower stops
// when the Conn is closed.
func OpenConn(opts etcd2topo.Options, root string, interval time.Duration) (*etcd2topo.Conn, error) {
	opts.Endpoints = normalizeEndpoints(opts.Endpoints)
	conn, err := etcd2topo.NewConn(opts, root)
	if err != nil {
		return nil, err
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.Default()
	}
	go follow(conn.Client(), interval, lg)
	return conn, nil
}

// follow points cli at the current voting members until cli is closed.
func follow(cli *clientv3.Client, interval time.Duration, lg *slog.Logger) {
	if interval <= 0 {
		interval = DefaultCheckInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-cli.Ctx().Done():
			return
		case <-t.C:
		}
		syncEndpoints(cli, interval, lg)
	}
}

// syncEndpoints sets cli's endpoints to the started voters' client URLs
// when they differ from the current ones.
func syncEndpoints(cli *clientv3.Client, timeout time.Duration, lg *slog.Logger) {
	ctx, cancel := context.WithTimeout(cli.Ctx(), max(timeout, time.Second))
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return
	}
	var eps []string
	for _, m := range resp.Members {
		if m.Name != "" && !m.IsLearner {
			eps = append(eps, m.ClientURLs...)
		}
	}
	if len(eps) == 0 {
		return
	}
	slices.Sort(eps)
	cur := slices.Clone(cli.Endpoints())
	slices.Sort(cur)
	if !slices.Equal(eps, cur) {
		lg.Debug("etcdcluster: following member list", "endpoints", eps)
		cli.SetEndpoints(eps...)
	}
}

// endpointClients are etcd clients bound to one endpoint each, for the
// maintenance calls addressed to one member (Status, HashKV, MoveLeader).
// They are kept apart from a member-list-following client because
// clientv3's per-endpoint dial reads the client's endpoint list without
// its lock, which races with SetEndpoints. Safe for concurrent use.
type endpointClients struct {
	mu sync.Mutex
	m  map[string]*clientv3.Client
}

// get returns the client of endpoint ep, opening it on first use.
func (e *endpointClients) get(ep string) (*clientv3.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.m[ep]; c != nil {
		return c, nil
	}
	c, err := clientv3.New(clientv3.Config{
		Endpoints: []string{ep}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 5 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	if e.m == nil {
		e.m = map[string]*clientv3.Client{}
	}
	e.m[ep] = c
	return c, nil
}

// status asks member endpoint ep for its status.
func (e *endpointClients) status(ctx context.Context, ep string) (*clientv3.StatusResponse, error) {
	c, err := e.get(ep)
	if err != nil {
		return nil, err
	}
	return c.Status(ctx, ep)
}

// close closes every client.
func (e *endpointClients) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.m {
		c.Close()
	}
	e.m = nil
}
