package etcdcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

func TestConfigRefused(t *testing.T) {
	ctx := context.Background()
	for name, cfg := range map[string]Config{
		"no name":             {DataDir: "/x", ClientURL: "http://127.0.0.1:1", PeerURL: "http://127.0.0.1:2"},
		"bad name":            {Name: "a/b", DataDir: "/x", ClientURL: "http://127.0.0.1:1", PeerURL: "http://127.0.0.1:2"},
		"no data dir":         {Name: "a", ClientURL: "http://127.0.0.1:1", PeerURL: "http://127.0.0.1:2"},
		"bad url":             {Name: "a", DataDir: "/x", ClientURL: "127.0.0.1:1", PeerURL: "http://127.0.0.1:2"},
		"client-only no seed": {Name: "a", ClientOnly: true},
		"root prefix":         {Name: "a", ClientOnly: true, Seeds: []string{"127.0.0.1:1"}, Prefix: "/"},
		"http with client TLS": {Name: "a", DataDir: "/x", ClientURL: "http://127.0.0.1:1", PeerURL: "http://127.0.0.1:2",
			ClientTLS: transport.TLSInfo{CertFile: "c.pem", KeyFile: "k.pem"}},
		"https without peer TLS": {Name: "a", DataDir: "/x", ClientURL: "http://127.0.0.1:1", PeerURL: "https://127.0.0.1:2"},
		"cert without key": {Name: "a", DataDir: "/x", ClientURL: "https://127.0.0.1:1", PeerURL: "http://127.0.0.1:2",
			ClientTLS: transport.TLSInfo{CertFile: "c.pem"}},
		"cert auth without CA": {Name: "a", DataDir: "/x", ClientURL: "http://127.0.0.1:1", PeerURL: "https://127.0.0.1:2",
			PeerTLS: transport.TLSInfo{CertFile: "c.pem", KeyFile: "k.pem", ClientCertAuth: true}},
		"auth without password": {Name: "a", DataDir: "/x", ClientURL: "http://127.0.0.1:1", PeerURL: "http://127.0.0.1:2", EnableAuth: true},
		"auth as another user": {Name: "a", DataDir: "/x", ClientURL: "http://127.0.0.1:1", PeerURL: "http://127.0.0.1:2",
			EnableAuth: true, Username: "bob", Password: "p"},
		"election timeout below 5 heartbeats": {Name: "a", DataDir: "/x", ClientURL: "http://127.0.0.1:1", PeerURL: "http://127.0.0.1:2",
			TickMs: 100, ElectionMs: 400},
		"election timeout below 5 default heartbeats": {Name: "a", DataDir: "/x", ClientURL: "http://127.0.0.1:1", PeerURL: "http://127.0.0.1:2",
			ElectionMs: 499},
		"election timeout above 50 s": {Name: "a", DataDir: "/x", ClientURL: "http://127.0.0.1:1", PeerURL: "http://127.0.0.1:2",
			TickMs: 1000, ElectionMs: 50001},
		"missing client cert file": {Name: "a", ClientOnly: true, Seeds: []string{"127.0.0.1:1"},
			ClientTLS: transport.TLSInfo{CertFile: "/nonexistent/c.pem", KeyFile: "/nonexistent/k.pem"}},
	} {
		_, err := Start(ctx, cfg)
		require.ErrorIs(t, err, ErrInvalidConfig, name)
	}
	_, err := NewClient(nil, 0)
	require.ErrorIs(t, err, ErrInvalidConfig)
}

// startLocal starts an in-process node that bootstraps a one-member
// cluster.
func startLocal(t *testing.T, name string) *Node {
	t.Helper()
	return startCfg(t, localConfig(t, name))
}

func localConfig(t *testing.T, name string) Config {
	addrs, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	return Config{
		Name: name, DataDir: t.TempDir(), ClientURL: "http://" + addrs[0], PeerURL: "http://" + addrs[1],
		TickMs: 10, ElectionMs: 100, NoFsync: true, CheckInterval: 100 * time.Millisecond,
		VolunteerTTL: 2 * time.Second, DeciderTTL: 2 * time.Second,
	}
}

func startCfg(t *testing.T, cfg Config) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(n.Close)
	return n
}

// TestRestartInSameProcess closes a node and starts it again in the same
// process with the same configuration: the server binds the same ports
// again and keeps its data. A second node on ports in use is refused with
// an "address already in use" error.
func TestRestartInSameProcess(t *testing.T) {
	cfg := localConfig(t, "r")
	n := startCfg(t, cfg)
	ctx := context.Background()
	_, err := n.Client().Put(ctx, "k", "v")
	require.NoError(t, err)

	other := cfg
	other.Name, other.DataDir = "other", t.TempDir()
	_, err = Start(ctx, other)
	require.ErrorContains(t, err, "address already in use")

	n.Close()
	n = startCfg(t, cfg)
	eventually(t, bound, "the restarted member serves", func() (bool, string) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		resp, err := n.Client().Get(cctx, "k")
		if err != nil {
			return false, err.Error()
		}
		return len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == "v", fmt.Sprint(resp.Kvs)
	})
	require.True(t, n.IsMember())
}

// TestLastMemberLeave: the last member leaves without being removed and
// keeps its data, so that it can be started again.
func TestLastMemberLeave(t *testing.T) {
	cfg := localConfig(t, "last")
	n := startCfg(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, n.Leave(ctx))
	require.True(t, hasMemberData(cfg.DataDir))
	n = startCfg(t, cfg)
	require.True(t, n.IsMember())
}

// TestStatusAndSetSize: a bootstrapped node is the only voter, the
// leader and the decider; SetSize stores the size and refuses < 1; the
// status marshals to JSON.
func TestStatusAndSetSize(t *testing.T) {
	n := startLocal(t, "solo")
	cli := n.Client()
	ctx := context.Background()
	eventually(t, bound, "solo decides", func() (bool, string) { return n.IsDecider(), "" })
	st, desc := statusOf(cli)
	require.NotNil(t, st, desc)
	require.Equal(t, []string{"solo"}, st.Voters())
	require.Equal(t, "solo", st.Leader)
	require.Equal(t, DefaultIdealSize, st.IdealSize)
	require.Equal(t, []string{"solo"}, st.Volunteers)
	require.True(t, st.Healthy)
	require.Contains(t, st.Decider, "solo/")
	require.NotZero(t, st.Members[0].RaftTerm)
	require.NotZero(t, st.Members[0].RaftIndex)

	require.ErrorIs(t, SetSize(ctx, cli, "", 0), ErrInvalidSize)
	st, _ = statusOf(cli)
	require.Equal(t, DefaultIdealSize, st.IdealSize, "a refused size writes nothing")
	require.ErrorIs(t, SetSize(ctx, cli, "", MaxVoters+1), ErrSizeTooLarge)
	st, _ = statusOf(cli)
	require.Equal(t, DefaultIdealSize, st.IdealSize, "a refused size writes nothing")
	require.Equal(t, "the ideal size is 3 voters but only 1 node volunteers (1 voter now): start 2 more nodes or lower the size", st.Shortfall,
		"one volunteer for an ideal size of 3")
	require.NoError(t, SetSize(ctx, cli, "", 5))
	st, _ = statusOf(cli)
	require.Equal(t, 5, st.IdealSize)
	b, err := json.Marshal(st)
	require.NoError(t, err)
	var back ClusterStatus
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, st.Voters(), back.Voters())

	// The last member is never removed, even with an ideal size of 1 and
	// no volunteer key.
	require.NoError(t, SetSize(ctx, cli, "", 1))
	require.True(t, n.IsMember())
}

// TestStaleDeciderFenced: a decider whose candidate key is gone (a
// successor may lead) makes no change: the guard refuses before the
// member API call and before writing the nominee record.
func TestStaleDeciderFenced(t *testing.T) {
	// A plain etcd member, and a client-only node on it: no decider runs.
	addr := etcdtest.Start(t)
	ctx := context.Background()
	n, err := Start(ctx, Config{Name: "c", ClientOnly: true, Seeds: []string{"http://" + addr}})
	require.NoError(t, err)
	defer n.Close()
	cli := n.Client()
	// A volunteer that a live decider would add as a learner.
	v, _ := json.Marshal(volunteerInfo{Name: "z", PeerURL: "http://127.0.0.1:1", ClientURL: "http://127.0.0.1:2"})
	_, err = cli.Put(ctx, n.k.volunteer("z"), string(v))
	require.NoError(t, err)

	lead, cancel := context.WithCancel(ctx)
	defer cancel()
	d := &decider{n: n, lead: lead, key: n.k.deciderPrefix() + "stale", rev: 1, seen: map[uint64]time.Time{}}
	lock, err := n.conn.LockName(ctx, "fence-test", "x")
	require.NoError(t, err)
	defer lock.Unlock(ctx)
	err = d.step(ctx, &guard{d: d, lock: lock})
	require.ErrorIs(t, err, errNotLeading)
	ml, err := cli.MemberList(ctx)
	require.NoError(t, err)
	require.Len(t, ml.Members, 1, "no learner was added")
	resp, err := cli.Get(ctx, n.k.nominee())
	require.NoError(t, err)
	require.Empty(t, resp.Kvs, "no nominee record was written")

	// A cancelled leadership context is refused too.
	cancel()
	require.True(t, errors.Is((&guard{d: d, lock: lock}).check(ctx), errNotLeading))
}

// TestCanRemoveKeepsQuorum: a removal must leave a quorum of reachable
// voters in the new configuration and never removes the last voter.
func TestCanRemoveKeepsQuorum(t *testing.T) {
	m := func(id uint64) *etcdserverpb.Member {
		return &etcdserverpb.Member{ID: id, Name: string(rune('a' + id))}
	}
	d := &decider{}
	v := &view{voters: []*etcdserverpb.Member{m(1), m(2), m(3)}}
	// 1 dead, 2 leaving: removing 2 first would leave {1 dead, 3}: 1 of 2.
	health := map[uint64]bool{1: false, 2: true, 3: true}
	ok, _ := d.canRemove(v, m(2), health)
	require.False(t, ok)
	ok, _ = d.canRemove(v, m(1), health)
	require.True(t, ok)
	// Two dead of three: nothing can be removed safely.
	health = map[uint64]bool{1: false, 2: false, 3: true}
	ok, _ = d.canRemove(v, m(1), health)
	require.False(t, ok)
	// The last voter.
	ok, _ = d.canRemove(&view{voters: []*etcdserverpb.Member{m(1)}}, m(1), map[uint64]bool{1: true})
	require.False(t, ok)
}

// TestRegisterModelFindsAnomalies: the porcupine model the cluster tests
// use rejects a stale read and a lost acknowledged write, and accepts an
// ambiguous write that took effect.
func TestRegisterModelFindsAnomalies(t *testing.T) {
	w := func(v int, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: 0, Input: regInput{true, v}, Call: call, Output: regOutput{}, Return: ret}
	}
	r := func(v int, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: 1, Input: regInput{false, 0}, Call: call, Output: regOutput{v}, Return: ret}
	}
	require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(registerModel,
		[]porcupine.Operation{w(1, 0, 1), w(2, 2, 3), r(1, 4, 5)}, time.Second), "stale read")
	require.Equal(t, porcupine.Illegal, porcupine.CheckOperationsTimeout(registerModel,
		[]porcupine.Operation{w(1, 0, 1), r(0, 2, 3)}, time.Second), "lost write")
	require.Equal(t, porcupine.Ok, porcupine.CheckOperationsTimeout(registerModel,
		[]porcupine.Operation{w(1, 0, math.MaxInt64), r(0, 1, 2), r(1, 3, 4)}, time.Second), "ambiguous write")
}

// stoppedAnswer is a Cluster whose MemberRemove answers "server stopped",
// after passing the call on when apply is set: what a removed member's
// server may answer although it applied the removal (etcd's configure
// selects between the applied result and its stopping channel).
type stoppedAnswer struct {
	clientv3.Cluster
	apply bool
}

func (s stoppedAnswer) MemberRemove(ctx context.Context, id uint64) (*clientv3.MemberRemoveResponse, error) {
	if s.apply {
		if _, err := s.Cluster.MemberRemove(ctx, id); err != nil {
			return nil, err
		}
	}
	return nil, rpctypes.ErrStopped
}

// TestRemovalAnsweredStopped: a removal that etcd applied but answered
// with "server stopped" is reported as the decision it was (a leaving
// decider that removes itself gets that answer from its own server); one
// that did not happen stays a failure, with nothing logged as decided.
func TestRemovalAnsweredStopped(t *testing.T) {
	addr := etcdtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{addr}}, "/fence")
	require.NoError(t, err)
	defer conn.Close()
	cli := conn.Client()
	// The decider's fence: its candidate key and the membership lock.
	put, err := cli.Put(ctx, "candidate", "x")
	require.NoError(t, err)
	lock, err := conn.LockName(ctx, "membership", "x")
	require.NoError(t, err)
	defer lock.Unlock(ctx)

	for i, apply := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", apply), func(t *testing.T) {
			// A learner that never starts (its own peer URL: etcd
			// refuses to add one again just after its removal).
			added, err := cli.MemberAddAsLearner(ctx, []string{fmt.Sprintf("http://127.0.0.1:%d", i+1)})
			require.NoError(t, err)
			rc, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second})
			require.NoError(t, err)
			defer rc.Close()
			rc.Cluster = stoppedAnswer{Cluster: rc.Cluster, apply: apply}
			var logs bytes.Buffer
			n := &Node{cli: rc, log: slog.New(slog.NewTextHandler(&logs, nil))}
			d := &decider{n: n, lead: ctx, key: "candidate", rev: put.Header.Revision, seen: map[uint64]time.Time{}}

			err = d.remove(ctx, &guard{d: d, lock: lock}, added.Member, "test")
			ml, lerr := cli.MemberList(ctx)
			require.NoError(t, lerr)
			if apply {
				require.NoError(t, err, "the removal took effect")
				require.False(t, containsID(ml.Members, added.Member.ID))
				require.Contains(t, logs.String(), "decision: removed member")
				require.Contains(t, logs.String(), "server stopped", "the answer is logged beside the decision")
				return
			}
			require.ErrorIs(t, err, rpctypes.ErrStopped)
			require.True(t, containsID(ml.Members, added.Member.ID), "nothing was removed")
			require.NotContains(t, logs.String(), "decision:")
			_, err = cli.MemberRemove(ctx, added.Member.ID)
			require.NoError(t, err)
		})
	}
}
