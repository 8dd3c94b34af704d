package etcdcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/topo/etcd2topo"
)

// registerModel is a single register written with unconditional updates
// and read with Get.
type regInput struct {
	write bool
	value int
}

type regOutput struct{ value int }

var registerModel = porcupine.Model{
	Init: func() any { return 0 },
	Step: func(state, input, output any) (bool, any) {
		in, st := input.(regInput), state.(int)
		if in.write {
			return true, in.value
		}
		return output.(regOutput).value == st, st
	},
}

// history records register operations from concurrent clients.
type history struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(op porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// watchNominee calls f for each nominee record written from now on, until
// ctx ends.
func watchNominee(ctx context.Context, cli *clientv3.Client, f func(Nominee)) {
	go func() {
		for wr := range cli.Watch(ctx, keys{prefix: DefaultPrefix}.nominee()) {
			for _, ev := range wr.Events {
				var n Nominee
				if ev.Type == clientv3.EventTypePut && json.Unmarshal(ev.Kv.Value, &n) == nil {
					f(n)
				}
			}
		}
	}()
}

// register is a writer and a reader of one register ("reg") through a
// topokit Conn, recording a history for porcupine.
type register struct {
	hist      *history
	stop      chan struct{}
	wg        sync.WaitGroup
	lastAcked atomic.Int64
	acked     atomic.Int64
}

// startRegister creates "reg" and starts the writer (unconditional
// updates of increasing values) and the reader.
func startRegister(t *testing.T, conn topoConn) *register {
	t.Helper()
	ctx := context.Background()
	_, err := conn.Create(ctx, "reg", []byte("0"))
	require.NoError(t, err)
	w := &register{hist: &history{start: time.Now()}, stop: make(chan struct{})}
	w.wg.Go(func() { // writer
		for i := 1; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			call := w.hist.now()
			octx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := conn.Update(octx, "reg", []byte(strconv.Itoa(i)), nil)
			cancel()
			ret := w.hist.now()
			if err != nil {
				ret = math.MaxInt64 // outcome unknown: may take effect any time later
			} else {
				w.lastAcked.Store(int64(i))
				w.acked.Add(1)
			}
			w.hist.add(porcupine.Operation{ClientId: 0, Input: regInput{true, i}, Call: call, Output: regOutput{}, Return: ret})
		}
	})
	w.wg.Go(func() { // reader
		for {
			select {
			case <-w.stop:
				return
			default:
			}
			call := w.hist.now()
			octx, cancel := context.WithTimeout(ctx, 2*time.Second)
			data, _, err := conn.Get(octx, "reg")
			cancel()
			ret := w.hist.now()
			if err != nil {
				continue // a failed read has no effect
			}
			v, err := strconv.Atoi(string(data))
			if err != nil {
				panic(err)
			}
			w.hist.add(porcupine.Operation{ClientId: 1, Input: regInput{false, 0}, Call: call, Output: regOutput{v}, Return: ret})
		}
	})
	t.Cleanup(w.halt)
	return w
}

func (w *register) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// waitAcked waits until n writes were acknowledged.
func (w *register) waitAcked(t *testing.T, n int64) {
	t.Helper()
	eventually(t, bound, fmt.Sprintf("%d acknowledged writes", n), func() (bool, string) {
		return w.acked.Load() >= n, fmt.Sprint(w.acked.Load())
	})
}

// check stops the workload and checks its history: linearizable, and the
// last acknowledged write (or a later one) is read at the end.
func (w *register) check(t *testing.T, conn topoConn) {
	t.Helper()
	w.halt()
	res, info := porcupine.CheckOperationsVerbose(registerModel, w.hist.ops, time.Minute)
	require.Equal(t, porcupine.Ok, res, "history of %d operations is not linearizable: %v", len(w.hist.ops), info)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data, _, err := conn.Get(ctx, "reg")
	require.NoError(t, err)
	final, _ := strconv.Atoi(string(data))
	require.GreaterOrEqual(t, int64(final), w.lastAcked.Load(), "the last acknowledged write is missing")
	t.Logf("register: %d operations, %d acknowledged writes, linearizable", len(w.hist.ops), w.acked.Load())
}

type topoConn = *etcd2topo.Conn

// deciderName returns the name of the current decider.
func deciderName(t testing.TB, cli *clientv3.Client) string {
	t.Helper()
	var name string
	eventually(t, bound, "a decider", func() (bool, string) {
		st, desc := statusOf(cli)
		if st == nil || st.Decider == "" {
			return false, desc
		}
		name, _, _ = strings.Cut(st.Decider, "/")
		return true, ""
	})
	return name
}

// TestKillVoterReplaced kills -9 a voter of a 3-member cluster while a
// spare volunteer runs: the dead member is removed and the volunteer
// promoted; a client-only node seeded with the killed member follows. A writer and a reader run throughout through a topokit Conn
// whose only seed was the killed member; porcupine finds the history
// linearizable and the last acknowledged write is read at the end.
func TestKillVoterReplaced(t *testing.T) {
	h := newHarness(t)
	h.start("a")
	h.start("b", "a")
	h.start("c", "a")
	cli := h.client("a")
	waitVoters(t, cli, bound, "a", "b", "c")
	h.start("d", "a")
	eventually(t, bound, "d volunteers", func() (bool, string) {
		st, desc := statusOf(cli)
		return st != nil && slices.Contains(st.Volunteers, "d"), desc
	})

	conn, err := OpenConn(etcd2topo.Options{Endpoints: []string{h.procs["b"].cfg.ClientURL}, DialTimeout: time.Second}, "/test", 200*time.Millisecond)
	require.NoError(t, err)
	defer conn.Close()
	eventually(t, bound, "the Conn follows the member list", func() (bool, string) {
		eps := conn.Client().Endpoints()
		return len(eps) == 3, fmt.Sprint(eps)
	})
	w := startRegister(t, conn)
	w.waitAcked(t, 20)

	h.startClientOnly("cl", "b")
	eventually(t, bound, "the client-only node follows the member list", func() (bool, string) {
		return h.procs["cl"].logHas("following member list", h.procs["c"].cfg.ClientURL), ""
	})
	h.procs["b"].kill()
	waitVoters(t, cli, bound, "a", "c", "d")
	eventually(t, bound, "the client-only node follows the replacement", func() (bool, string) {
		return h.procs["cl"].logHas("following member list", h.procs["d"].cfg.ClientURL), ""
	})
	require.True(t, h.procs["cl"].running())
	require.False(t, h.procs["cl"].logHas("volunteering"), "a client-only node never volunteers")
	w.waitAcked(t, w.acked.Load()+20)
	w.check(t, conn)
	require.True(t, h.procs["a"].logHas("decision: removed member") || h.procs["c"].logHas("decision: removed member") || h.procs["d"].logHas("decision: removed member"))
	sameData(t, cli, bound)
}

// TestNomineeKilledRolledBack kills a nominee right after the decider
// added it as a learner: the decider removes it again and the cluster
// keeps serving writes.
func TestNomineeKilledRolledBack(t *testing.T) {
	h := newHarness(t)
	h.start("a")
	cli := h.client("a")
	waitVoters(t, cli, bound, "a")

	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	killed := make(chan struct{})
	var once sync.Once
	var b *proc
	started := make(chan struct{})
	watchNominee(wctx, cli, func(n Nominee) {
		<-started
		if n.Name == "b" && n.MemberID != "" {
			once.Do(func() { b.kill(); close(killed) })
		}
	})
	b = h.start("b", "a")
	close(started)
	select {
	case <-killed:
	case <-time.After(bound):
		t.Fatal("b was never nominated")
	}
	waitVoters(t, cli, bound, "a")
	require.True(t, h.procs["a"].logHas("decision: rolled back nominee"))
	ctx, c2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer c2()
	_, err := cli.Put(ctx, "after", "rollback")
	require.NoError(t, err, "the cluster kept its quorum")
}

// TestTakenPortNoVolunteer starts a node whose client port is taken: it
// does not volunteer (so it is never nominated) and says why; once the
// port is free it volunteers and joins.
func TestTakenPortNoVolunteer(t *testing.T) {
	h := newHarness(t)
	h.base.NomineeTimeout = 3 * time.Second
	h.start("a")
	cli := h.client("a")
	waitVoters(t, cli, bound, "a")
	require.NoError(t, SetSize(context.Background(), cli, "", 2))

	// Reserve b's client port before b starts.
	bp := h.prepare("b", "a")
	l, err := net.Listen("tcp", strings.TrimPrefix(bp.cfg.ClientURL, "http://"))
	require.NoError(t, err)
	defer l.Close()
	bp.run()
	eventually(t, bound, "b says it cannot bind its ports", func() (bool, string) {
		return bp.logHas("not volunteering: this node cannot bind its ports", "address already in use"), ""
	})
	// The port was taken before b started: b never volunteered, and was
	// never nominated.
	st, desc := statusOf(cli)
	require.NotNil(t, st, desc)
	require.Equal(t, []string{"a"}, st.Volunteers, desc)
	require.False(t, h.procs["a"].logHas("added volunteer as a learner", "member=b"), "b was nominated with its port taken")
	l.Close()
	waitVoters(t, cli, bound, "a", "b")
}

// TestFailedNomineePassedOver: a volunteer that never starts (a volunteer
// key with no node behind it, first in name order) is rolled back after
// NomineeTimeout and then passed over: the next volunteer is nominated
// and joins instead of the failed one being nominated again and again.
func TestFailedNomineePassedOver(t *testing.T) {
	h := newHarness(t)
	h.base.NomineeTimeout = 3 * time.Second
	a := h.start("a")
	cli := h.client("a")
	waitVoters(t, cli, bound, "a")
	ctx := context.Background()
	require.NoError(t, SetSize(ctx, cli, "", 2))

	dead, err := etcdembed.FreeAddrs(2)
	require.NoError(t, err)
	v, _ := json.Marshal(volunteerInfo{Name: "aaa", PeerURL: "http://" + dead[0], ClientURL: "http://" + dead[1]})
	_, err = cli.Put(ctx, keys{prefix: DefaultPrefix}.volunteer("aaa"), string(v))
	require.NoError(t, err)
	eventually(t, bound, "aaa nominated", func() (bool, string) {
		return a.logHas("added volunteer as a learner", "member=aaa"), ""
	})
	h.start("b", "a")
	waitVoters(t, cli, bound, "a", "b")
	require.True(t, a.logHas("passing over a nominee that failed", "member=aaa"))
	require.Equal(t, 1, a.logCount("added volunteer as a learner", "member=aaa"), "aaa nominated again before b")
}

// TestDeciderKilledMidChange kills -9 the decider right after it added a
// learner: a successor finishes or rolls back the change, removes the dead
// decider, and the cluster converges with the volunteer as a voter.
func TestDeciderKilledMidChange(t *testing.T) {
	h := newHarness(t)
	h.start("a")
	h.start("b", "a")
	h.start("c", "a")
	cli := h.client("a", "b", "c")
	waitVoters(t, cli, bound, "a", "b", "c")
	dec := deciderName(t, cli)
	require.NoError(t, SetSize(context.Background(), cli, "", 4))

	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	killed := make(chan struct{})
	var once sync.Once
	victim := h.procs[dec]
	watchNominee(wctx, cli, func(n Nominee) {
		if n.Name == "d" && n.MemberID != "" {
			once.Do(func() { victim.kill(); close(killed) })
		}
	})
	h.start("d", "a", "b", "c")
	select {
	case <-killed:
	case <-time.After(bound):
		t.Fatal("d was never nominated")
	}
	var alive []string
	for _, n := range []string{"a", "b", "c", "d"} {
		if n != dec {
			alive = append(alive, n)
		}
	}
	waitVoters(t, cli, bound, alive...)
	require.NotEqual(t, dec, deciderName(t, cli))
	// Under load the decider role may move again after the first
	// successor acted: look for the decisions in every survivor's log.
	finished, removed := false, false
	for _, n := range alive {
		p := h.procs[n]
		finished = finished || p.logHas("promoted learner to voter", "member=d") || p.logHas("rolled back nominee", "member=d")
		removed = removed || p.logHas("decision: removed member", "member="+dec)
	}
	require.True(t, finished, "a successor finished or rolled back the change on d")
	require.True(t, removed, "a successor removed the dead decider")
	sameData(t, cli, bound)
}

// TestWholeClusterRestart kills every member of a 3-member cluster and
// restarts them from their data directories: same members (same IDs),
// same data.
func TestWholeClusterRestart(t *testing.T) {
	h := newHarness(t)
	h.start("a")
	h.start("b", "a")
	h.start("c", "a")
	cli := h.client("a", "b", "c")
	before := waitVoters(t, cli, bound, "a", "b", "c")
	put(t, h, []string{"a"}, map[string]string{"k": "v"})
	for _, n := range []string{"a", "b", "c"} {
		h.procs[n].kill()
	}
	for _, n := range []string{"a", "b", "c"} {
		h.start(n)
	}
	after := waitVoters(t, cli, bound, "a", "b", "c")
	ids := func(st *ClusterStatus) []string {
		var out []string
		for _, m := range st.Members {
			out = append(out, m.Name+"="+m.ID)
		}
		return out
	}
	require.Equal(t, ids(before), ids(after))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "k")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, "v", string(resp.Kvs[0].Value))
	sameData(t, cli, bound)
}

// TestGracefulLeave stops the decider (also the Raft leader) with SIGTERM
// while a spare volunteer runs: it moves leadership away, removes itself,
// exits cleanly, and the volunteer replaces it.
func TestGracefulLeave(t *testing.T) {
	h := newHarness(t)
	h.start("a")
	h.start("b", "a")
	h.start("c", "a")
	cli := h.client("a", "b", "c")
	waitVoters(t, cli, bound, "a", "b", "c")
	// d knows every member, so the decider's leave cannot cut it off
	// before its client has synced the member list.
	h.start("d", "a", "b", "c")
	eventually(t, bound, "d volunteers", func() (bool, string) {
		st, desc := statusOf(cli)
		return st != nil && slices.Contains(st.Volunteers, "d"), desc
	})
	// Read who decides and leads right before the leave: under load an
	// election may have moved either since the cluster formed.
	st := waitVoters(t, cli, bound, "a", "b", "c")
	dec := deciderName(t, cli)
	if !slices.Contains([]string{"a", "b", "c"}, dec) && st.Leader != "" {
		// Under load the spare volunteer can win the decider election
		// (any node may decide). It is not a member, so its leave
		// removes nothing: stop the Raft leader instead, a member the
		// spare (deciding) must remove and replace.
		t.Logf("the spare %s decides: stopping the leader %s", dec, st.Leader)
		dec = st.Leader
	}
	wasLeader := st.Leader == dec
	t.Logf("SIGTERM %s at %s", dec, time.Now().UTC().Format("15:04:05.000"))
	require.NoError(t, h.procs[dec].term(bound))
	t.Logf("exited at %s", time.Now().UTC().Format("15:04:05.000"))
	var rest []string
	for _, n := range []string{"a", "b", "c", "d"} {
		if n != dec {
			rest = append(rest, n)
		}
	}
	waitVoters(t, cli, bound, rest...)
	if wasLeader {
		require.True(t, h.procs[dec].logHas("moved raft leadership away"))
	}
	// The leaving decider removes itself, unless etcd defers the removal
	// (it refuses member changes for 5 s after one) past the moment its
	// withdrawal hands the decider role on: then the successor removes it.
	removedBy := ""
	for n, p := range h.procs {
		if p.logHas("decision: removed member", "member="+dec+" ") {
			removedBy = n
		}
	}
	require.NotEmpty(t, removedBy, "a decider removed the leaving member %s", dec)
	t.Logf("%s was removed by %s", dec, removedBy)
	require.True(t, h.procs[dec].logHas("node ended cleanly"))
	require.False(t, hasMemberData(h.procs[dec].cfg.DataDir), "the removed member's data was moved aside")
}

// TestRemovedMemberUnderRequests removes two members while every member
// is asked for its status and for the volunteer keys (a serializable
// read) in
// tight loops, and keeps asking until each removed node has stopped its
// server. etcd panics on a status request racing the member's own
// removal (etcd-io/etcd#21966), and a removed member closes its backend
// while its gRPC server still takes requests: a read then panics inside
// etcd while holding the backend's read lock, and every later read, and
// the server's Close waiting for them, hangs forever. Each removed node
// must stop its server, move its data aside, keep running as a client
// and exit cleanly on SIGTERM.
func TestRemovedMemberUnderRequests(t *testing.T) {
	h := newHarness(t)
	h.start("a")
	h.start("b", "a")
	h.start("c", "a")
	cli := h.client("a", "b", "c")
	waitVoters(t, cli, bound, "a", "b", "c")

	// The volunteer keys were written long ago: reading them reaches the
	// backend's transaction (a missing key is answered from etcd's
	// in-memory index, a key of the current batch from its buffer).
	vols := DefaultPrefix + "/volunteers/"
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, n := range []string{"a", "b", "c"} {
		ep := h.procs[n].cfg.ClientURL
		for i := range 4 {
			wg.Go(func() {
				var ecs endpointClients
				defer ecs.close()
				for ctx.Err() == nil {
					sctx, c := context.WithTimeout(ctx, 200*time.Millisecond)
					if i%2 == 0 {
						_, _ = ecs.status(sctx, ep)
					} else if ec, err := ecs.get(ep); err == nil {
						_, _ = ec.Get(sctx, vols, clientv3.WithPrefix(), clientv3.WithSerializable())
					}
					c()
				}
			})
		}
	}
	require.NoError(t, SetSize(context.Background(), cli, "", 1))
	names := voterNames(t, cli, 1)
	for _, n := range []string{"a", "b", "c"} {
		if n != names[0] {
			eventually(t, bound, n+" stops its removed member's server", func() (bool, string) {
				return h.procs[n].logHas("moved removed member data aside"), ""
			})
		}
		require.True(t, h.procs[n].running(), "%s still runs", n)
	}
	cancel()
	for _, n := range []string{"a", "b", "c"} {
		if n != names[0] {
			require.NoError(t, h.procs[n].term(bound))
		}
	}
}

// TestLostDataRejoins restarts a killed voter with an empty data
// directory (same name and URLs): its old member, which can never run
// again, is removed and the node joins afresh as a new member.
func TestLostDataRejoins(t *testing.T) {
	h := newHarness(t)
	h.start("a")
	h.start("b", "a")
	h.start("c", "a")
	cli := h.client("a", "b")
	before := waitVoters(t, cli, bound, "a", "b", "c")
	c := h.procs["c"]
	c.kill()
	require.NoError(t, os.RemoveAll(c.cfg.DataDir))
	c.cfg.Seeds = []string{h.procs["a"].cfg.ClientURL}
	c.run()
	after := waitVoters(t, cli, bound, "a", "b", "c")
	id := func(st *ClusterStatus) string {
		for _, m := range st.Members {
			if m.Name == "c" {
				return m.ID
			}
		}
		return ""
	}
	require.NotEqual(t, id(before), id(after), "c joined as a new member")
	sameData(t, cli, bound)
}

// TestRemovedWhileDownRejoins kills a voter, lets the decider remove it,
// and restarts it from its (now stale) data directory: it finds itself
// removed, moves its data aside and joins afresh.
func TestRemovedWhileDownRejoins(t *testing.T) {
	h := newHarness(t)
	h.start("a")
	h.start("b", "a")
	h.start("c", "a")
	cli := h.client("a", "b")
	waitVoters(t, cli, bound, "a", "b", "c")
	c := h.procs["c"]
	c.kill()
	waitVoters(t, cli, bound, "a", "b")
	c.cfg.Seeds = []string{h.procs["a"].cfg.ClientURL}
	c.run()
	waitVoters(t, cli, bound, "a", "b", "c")
	require.True(t, c.logHas("restarting the member from its data"))
	require.True(t, c.logHas("moved removed member data aside"))
	sameData(t, cli, bound)
}

// TestRemovedBootstrapNodeRejoins kills the node that bootstrapped the
// cluster, lets the decider remove it, and restarts it as it was first
// started -- with its data and no seeds: it reaches the cluster through
// the members its data records, finds itself removed, moves its data
// aside and joins afresh, instead of restarting its old member alone.
func TestRemovedBootstrapNodeRejoins(t *testing.T) {
	h := newHarness(t)
	a := h.start("a")
	h.start("b", "a")
	h.start("c", "a")
	cli := h.client("b", "c")
	waitVoters(t, cli, bound, "a", "b", "c")
	a.kill()
	waitVoters(t, cli, bound, "b", "c")
	require.Empty(t, a.cfg.Seeds)
	a.run()
	waitVoters(t, cli, bound, "a", "b", "c")
	require.True(t, a.logHas("restarting the member from its data"))
	require.True(t, a.logHas("moved removed member data aside"))
	sameData(t, cli, bound)
}
