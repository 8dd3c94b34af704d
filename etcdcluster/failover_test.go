package etcdcluster

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo"
)

// callDeadline is the deadline of each call of the failover test: far
// longer than any failover, so a call that ends with it waited out a
// stalled member, and shorter than the 15 s after which clientv3's
// keepalive gives up on a connection to a stopped member.
const callDeadline = 10 * time.Second

// TestLeaderFailover kills (SIGKILL) or stops (SIGSTOP) the raft leader
// of a 3-member cluster while clients write through OpenConn:
// unconditional updates of one register (with reads), and
// compare-and-set increments of a counter. No call waits out its
// deadline, or etcd's own request timeout, on the lost leader (it fails
// over, or reports an unknown outcome as Unavailable); the register's
// history is linearizable; the counter never moves by two (a
// compare-and-set sent again is applied once) and etcd counts exactly one
// write per increment, the register at most one per call (no write is
// applied twice); in the end (after SIGCONT) every member holds the same
// data.
func TestLeaderFailover(t *testing.T) {
	for _, fault := range []string{"kill", "stop"} {
		t.Run(fault, func(t *testing.T) { testLeaderFailover(t, fault) })
	}
}

func testLeaderFailover(t *testing.T, fault string) {
	h := newHarness(t)
	h.start("a")
	h.start("b", "a")
	h.start("c", "a")
	names := []string{"a", "b", "c"}
	cli := h.client(names...)
	waitVoters(t, cli, bound, names...)
	conn, err := OpenConn(etcd2topo.Options{Endpoints: h.clientURLs(names...)}, "/failover", 200*time.Millisecond)
	require.NoError(t, err)
	defer conn.Close()
	ctx := context.Background()
	_, err = conn.Create(ctx, "reg", []byte("0"))
	require.NoError(t, err)
	ctrVer, err := conn.Create(ctx, "ctr", []byte("0"))
	require.NoError(t, err)

	var (
		timeouts atomic.Int64 // calls that waited out their deadline
		acked    atomic.Int64 // acknowledged register writes
		regCalls atomic.Int64 // register writes called (each may apply once)
		incs     atomic.Int64 // counter increments known done
		wg       sync.WaitGroup
		mu       sync.Mutex
		failure  string
	)
	fail := func(s string) {
		mu.Lock()
		failure = s
		mu.Unlock()
	}
	hist := &history{start: time.Now()}
	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	call := func(f func(context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, callDeadline)
		defer cancel()
		err := f(cctx)
		if topo.IsErrType(err, topo.Timeout) || (err != nil && strings.Contains(err.Error(), "request timed out")) {
			timeouts.Add(1)
		}
		return err
	}
	wg.Go(func() { // register writer
		for i := 1; !stopped(); i++ {
			start := hist.now()
			regCalls.Add(1)
			err := call(func(c context.Context) error {
				_, err := conn.Update(c, "reg", []byte(strconv.Itoa(i)), nil)
				return err
			})
			ret := hist.now()
			if err != nil {
				ret = math.MaxInt64
			} else {
				acked.Add(1)
			}
			hist.add(porcupine.Operation{ClientId: 0, Input: regInput{true, i}, Call: start, Output: regOutput{}, Return: ret})
		}
	})
	wg.Go(func() { // register reader
		for !stopped() {
			start := hist.now()
			var data []byte
			err := call(func(c context.Context) error {
				var err error
				data, _, err = conn.Get(c, "reg")
				return err
			})
			if err != nil {
				continue
			}
			v, _ := strconv.Atoi(string(data))
			hist.add(porcupine.Operation{ClientId: 1, Input: regInput{false, 0}, Call: start, Output: regOutput{v}, Return: hist.now()})
		}
	})
	wg.Go(func() { // counter: compare-and-set increments, the only writer
		n, ver := 0, ctrVer
		for !stopped() {
			v, err := func() (topo.Version, error) {
				var v topo.Version
				err := call(func(c context.Context) error {
					var err error
					v, err = conn.Update(c, "ctr", []byte(strconv.Itoa(n+1)), ver)
					return err
				})
				return v, err
			}()
			if err == nil {
				n, ver = n+1, v
				incs.Store(int64(n))
				continue
			}
			// Unknown outcome (or a compare that failed because it
			// landed): the only writer reads the counter back.
		resolve:
			for !stopped() {
				var data []byte
				if call(func(c context.Context) error {
					var err error
					data, v, err = conn.Get(c, "ctr")
					return err
				}) != nil {
					continue
				}
				switch got, _ := strconv.Atoi(string(data)); got {
				case n + 1:
					n, ver = n+1, v
					incs.Store(int64(n))
				case n:
					ver = v
				default:
					fail("counter at " + string(data) + " after " + strconv.Itoa(n) + " increments")
				}
				break resolve
			}
		}
	})

	eventually(t, bound, "20 acknowledged writes", func() (bool, string) { return acked.Load() >= 20, "" })
	st, desc := statusOf(cli)
	require.NotNil(t, st, desc)
	leader := h.procs[st.Leader]
	require.NotNil(t, leader, "leader %q", st.Leader)
	if fault == "kill" {
		leader.kill()
	} else {
		require.NoError(t, leader.cmd.Process.Signal(syscall.SIGSTOP))
	}
	a0, i0 := acked.Load(), incs.Load()
	eventually(t, bound, "writes and increments go on without the leader", func() (bool, string) {
		return acked.Load() >= a0+50 && incs.Load() >= i0+20, ""
	})
	close(stop)
	wg.Wait()
	if fault == "stop" {
		require.NoError(t, leader.cmd.Process.Signal(syscall.SIGCONT))
	}
	require.Empty(t, failure)
	require.Zero(t, timeouts.Load(), "calls that waited out their %v deadline or etcd's request timeout", callDeadline)
	res, info := porcupine.CheckOperationsVerbose(registerModel, hist.ops, time.Minute)
	require.Equal(t, porcupine.Ok, res, "history of %d operations is not linearizable: %v", len(hist.ops), info)
	ctx2, cancel := context.WithTimeout(ctx, callDeadline)
	defer cancel()
	data, _, err := conn.Get(ctx2, "ctr")
	require.NoError(t, err)
	got, _ := strconv.Atoi(string(data))
	n := int(incs.Load())
	require.True(t, got == n || got == n+1, "counter %d after %d increments", got, n)
	// No write was applied twice: etcd counts a key's writes (its
	// version, 1 at creation). Every write applied to the counter moved
	// it by one, whatever attempt of whichever call applied it; the
	// register took at most one write per call.
	ctr, err := cli.Get(ctx2, "/failover/ctr")
	require.NoError(t, err)
	require.Len(t, ctr.Kvs, 1)
	require.Equal(t, int64(got)+1, ctr.Kvs[0].Version, "counter %d after %d writes applied to it", got, ctr.Kvs[0].Version-1)
	reg, err := cli.Get(ctx2, "/failover/reg")
	require.NoError(t, err)
	require.Len(t, reg.Kvs, 1)
	require.LessOrEqual(t, reg.Kvs[0].Version-1, regCalls.Load(), "register writes applied")
	sameData(t, cli, bound)
	t.Logf("%d register writes and %d increments acknowledged", acked.Load(), n)
}

// TestFailoverRequestKinds: which requests OpenConn's client sends again
// after an attempt was abandoned. A compare-and-set on one key's
// ModRevision that writes that key is sent again (at most one attempt
// can apply it); a create (CreateRevision 0, which a delete brings back),
// a plain put, a delete and a transaction whose failure branch writes
// are not.
func TestFailoverRequestKinds(t *testing.T) {
	k := []byte("k")
	cmpMod := &pb.Compare{Key: k, Target: pb.Compare_MOD, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_ModRevision{ModRevision: 7}}
	cmpCreate := &pb.Compare{Key: k, Target: pb.Compare_CREATE, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 0}}
	put := func(key []byte) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: key}}}
	}
	del := func(key []byte) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestDeleteRange{RequestDeleteRange: &pb.DeleteRangeRequest{Key: key}}}
	}
	get := &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: k}}}
	for _, c := range []struct {
		name string
		req  any
		want requestKind
	}{
		{"get", &pb.RangeRequest{Key: k}, kindRead},
		{"serializable get", &pb.RangeRequest{Key: k, Serializable: true}, kindOther},
		{"put", &pb.PutRequest{Key: k}, kindWrite},
		{"delete", &pb.DeleteRangeRequest{Key: k}, kindWrite},
		{"read-only txn", &pb.TxnRequest{Compare: []*pb.Compare{cmpMod}, Success: []*pb.RequestOp{get}, Failure: []*pb.RequestOp{get}}, kindRead},
		{"cas update", &pb.TxnRequest{Compare: []*pb.Compare{cmpMod}, Success: []*pb.RequestOp{put(k)}, Failure: []*pb.RequestOp{get}}, kindCAS},
		{"cas delete", &pb.TxnRequest{Compare: []*pb.Compare{cmpMod}, Success: []*pb.RequestOp{del(k)}}, kindCAS},
		{"cas on another key", &pb.TxnRequest{Compare: []*pb.Compare{cmpMod}, Success: []*pb.RequestOp{put([]byte("other"))}}, kindWrite},
		{"create", &pb.TxnRequest{Compare: []*pb.Compare{cmpCreate}, Success: []*pb.RequestOp{put(k)}}, kindWrite},
		{"failure branch writes", &pb.TxnRequest{Compare: []*pb.Compare{cmpMod}, Success: []*pb.RequestOp{put(k)}, Failure: []*pb.RequestOp{put(k)}}, kindWrite},
		{"lease grant", &pb.LeaseGrantRequest{TTL: 5}, kindOther},
		{"status", &pb.StatusRequest{}, kindOther},
	} {
		require.Equal(t, c.want, classify(c.req), c.name)
	}
}
