package etcd2topo

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/topokit/topokit/topo/claims"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// clientRetries is how many times clientv3 sends a read a member answers
// Unavailable (its defaultUnaryMaxRetries).
const clientRetries = 100

// restartOutage is how long TestWaiterRidesOutEtcdDown keeps a restarted
// member down: longer than clientv3's retries of a read (clientRetries
// attempts 25 ms apart) would last if each attempt failed at once.
const restartOutage = 3 * time.Second

// stepHold is a waiter Conn's gRPC interceptors for
// TestWaiterRidesOutEtcdDown: the first read match picks is held until
// the outage starts (held closes when it is), or, with pass, let through
// and marked (held closes once it is answered); failed closes at the
// first failure of a read in the outage (within clientv3's retries);
// gaveUp closes when, in the outage, a read fails after another one
// failed clientRetries times (clientv3 gave it up, and the waiter read
// again); rewatched closes when a second watch of headKey is opened (the
// first one ended); headRead closes once a read of headKey is answered (the
// waiter watches it by then).
type stepHold struct {
	mu      sync.Mutex
	match   func(r *pb.RangeRequest) bool
	pass    bool
	taken   bool
	headKey string
	watches int
	outage  bool
	fails   map[*pb.RangeRequest]int // per read (clientv3 resends the same)
	spent   bool                     // a read failed clientRetries times

	held, release, failed, gaveUp, rewatched, headRead chan struct{}
	failOnce, gaveUpOnce, headOnce                     sync.Once
}

func newStepHold() *stepHold {
	return &stepHold{held: make(chan struct{}), release: make(chan struct{}), failed: make(chan struct{}),
		gaveUp: make(chan struct{}), fails: map[*pb.RangeRequest]int{}, rewatched: make(chan struct{}), headRead: make(chan struct{})}
}

// set arms h for the next wait: match picks its read, headKey names the
// entry whose watch is counted.
func (h *stepHold) set(match func(r *pb.RangeRequest) bool, pass bool, headKey string) {
	h.mu.Lock()
	h.match, h.pass, h.headKey = match, pass, headKey
	h.mu.Unlock()
}

// startOutage marks the outage begun and lets a held read go.
func (h *stepHold) startOutage() {
	h.mu.Lock()
	h.outage = true
	h.mu.Unlock()
	close(h.release)
}

func (h *stepHold) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			r, _ := req.(*pb.RangeRequest)
			h.mu.Lock()
			pick := r != nil && h.match != nil && !h.taken && h.match(r)
			h.taken = h.taken || pick
			pass, headKey := h.pass, h.headKey
			h.mu.Unlock()
			if pick && !pass {
				close(h.held)
				<-h.release
			}
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err != nil && r != nil {
				h.mu.Lock()
				if h.outage {
					h.failOnce.Do(func() { close(h.failed) })
					if h.fails[r]++; h.fails[r] == 1 && h.spent {
						h.gaveUpOnce.Do(func() { close(h.gaveUp) })
					}
					h.spent = h.spent || h.fails[r] == clientRetries
				}
				h.mu.Unlock()
			}
			if pick && pass && err == nil {
				close(h.held)
			}
			if err == nil && r != nil && headKey != "" && string(r.Key) == headKey && len(r.RangeEnd) == 0 {
				h.headOnce.Do(func() { close(h.headRead) })
			}
			return err
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			cs, err := streamer(ctx, desc, cc, method, opts...)
			if err != nil {
				return nil, err
			}
			return watchCounting{cs, h}, nil
		}),
	}
}

type watchCounting struct {
	grpc.ClientStream
	h *stepHold
}

func (w watchCounting) SendMsg(m any) error {
	if r, ok := m.(*pb.WatchRequest); ok {
		if cr := r.GetCreateRequest(); cr != nil {
			h := w.h
			h.mu.Lock()
			if h.headKey != "" && string(cr.Key) == h.headKey {
				if h.watches++; h.watches == 2 {
					close(h.rewatched)
				}
			}
			h.mu.Unlock()
		}
	}
	return w.ClientStream.SendMsg(m)
}

// TestWaiterRidesOutEtcdDown: a waiting Lock or Campaign whose etcd goes
// away at one step of its wait, for longer than clientv3's retries of a
// read would last if each attempt failed at once but shorter than its
// lease's TTL, keeps waiting, keeps its entry (same key and token), is
// not granted while the holder holds, and is granted once it lets go.
//
// The outages: Restart stops the only member and starts it again on its
// data after restartOutage (the waiter's read waits for a connection);
// QuorumLost stops two of three members until the waiter has met the
// failure: its read answered "request timed out" (and sent again by
// clientv3), its watch ended by "no leader" and opened again by the
// driver, or a read of its Conn's view of the queue answered "no leader"
// clientRetries times, given up by clientv3, and sent again by the
// driver (a new view).
//
// The steps: the read of the queue (Ahead), the read of the entry ahead
// once its watch is opened, the watch itself, the Conn's view of the
// queue (a second waiter of the Conn), and, the holder gone already, the
// read confirming the waiter's own entry (Held); for a Campaign, the read
// of the queue and the watch (Restart leaves out the reads that wait for
// a connection as the read of the queue does).
//
// The reads ride it out in clientv3 (it sends a read on a ready
// connection only, and sends one answered Unavailable again, up to
// clientRetries times; with its MaxUnaryRetries at 1, the QuorumLost
// reads end the wait "unavailable: d: etcdserver: request timed out"),
// the watches and the view in the driver's WaitGone.
func TestWaiterRidesOutEtcdDown(t *testing.T) {
	type step struct {
		name     string
		election bool
		pass     bool // the request is marked, not held: the outage starts once it is answered
		released bool // the holder lets go before the outage
		crowd    bool // another Lock of the waiter's Conn queues first: the waiter waits in the Conn's view
		// quorumOnly: a read that, in Restart, waits for a connection
		// as QueueRead's does (the restarts take seconds each).
		quorumOnly bool
		match      func(r *pb.RangeRequest, prefix, headKey string) bool
	}
	queueRead := func(r *pb.RangeRequest, prefix, _ string) bool {
		return string(r.Key) == prefix && r.MaxModRevision > 0
	}
	headRead := func(r *pb.RangeRequest, _, headKey string) bool {
		return string(r.Key) == headKey && len(r.RangeEnd) == 0
	}
	steps := []step{
		{name: "QueueRead", match: queueRead},
		{name: "HeadRead", quorumOnly: true, match: headRead},
		{name: "Watching", pass: true, match: headRead},
		{name: "OwnEntryRead", released: true, quorumOnly: true, match: func(r *pb.RangeRequest, prefix, headKey string) bool {
			return string(r.Key) != headKey && strings.HasPrefix(string(r.Key), prefix) && len(r.RangeEnd) == 0
		}},
		{name: "ViewWatching", pass: true, crowd: true, match: func(r *pb.RangeRequest, prefix, _ string) bool {
			return string(r.Key) == prefix && len(r.RangeEnd) > 0 && r.MaxModRevision == 0
		}},
		{name: "CampaignQueueRead", election: true, quorumOnly: true, match: queueRead},
		{name: "CampaignWatching", election: true, pass: true, match: headRead},
	}
	const waitFor = time.Minute
	for _, mode := range []struct {
		name    string
		members int
		stop    []int
	}{
		{"Restart", 1, []int{0}},
		{"QuorumLost", 3, []int{1, 2}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel() // a cluster of its own; its steps in turn
			cl := etcdtest.StartCluster(t, mode.members)
			for _, st := range steps {
				if st.quorumOnly && mode.name == "Restart" {
					continue
				}
				t.Run(st.name, func(t *testing.T) {
					// Both Conns talk to member 0 alone (for QuorumLost, the
					// member that stays).
					opts := Options{Endpoints: []string{cl.Addr(0)}, LockTTL: 30 * time.Second}
					root := newRoot()
					ctx := t.Context()
					holder, err := NewConn(opts, root)
					require.NoError(t, err)
					t.Cleanup(holder.Close)
					h := newStepHold()
					wopts := opts
					wopts.dialOptions = h.dialOptions()
					waiter, err := NewConn(wopts, root)
					require.NoError(t, err)
					t.Cleanup(waiter.Close)
					raw := rawClient(t, cl.Addr(0))

					q := claims.Queue{Path: "d", Election: st.election}
					if st.election {
						q.Path = "e"
					}
					prefix := waiter.queuePrefix(q)
					var release func() error
					var holderLive func() error
					var lctx context.Context
					if st.election {
						p1, err := holder.NewLeaderParticipation("e", "one")
						require.NoError(t, err)
						t.Cleanup(p1.Stop)
						lctx, err = p1.Campaign(ctx, []byte("v1"))
						require.NoError(t, err)
						release = func() error { p1.Stop(); return nil }
						holderLive = lctx.Err
					} else {
						_, err = holder.Create(ctx, "d/f", []byte("x"))
						require.NoError(t, err)
						l, err := holder.Lock(ctx, "d", "holder")
						require.NoError(t, err)
						release = func() error { return l.Unlock(ctx) }
						holderLive = func() error { return l.Check(ctx) }
					}
					resp, err := raw.Get(ctx, prefix, clientv3.WithPrefix())
					require.NoError(t, err)
					require.Len(t, resp.Kvs, 1)
					headKey := string(resp.Kvs[0].Key)
					h.set(func(r *pb.RangeRequest) bool { return st.match(r, prefix, headKey) }, st.pass, headKey)

					type result struct {
						release func() error
						check   func() error
						err     error
					}
					lock := func(who string) <-chan result {
						out := make(chan result, 1)
						go func() {
							l, err := waiter.Lock(ctx, "d", who)
							if err != nil {
								out <- result{err: err}
								return
							}
							out <- result{func() error { return l.Unlock(ctx) }, func() error { return l.Check(ctx) }, nil}
						}()
						return out
					}
					// queued waits until the queue has n entries and returns
					// the newest.
					queued := func(n int) *mvccpb.KeyValue {
						var resp *clientv3.GetResponse
						require.Eventually(t, func() bool {
							resp, err = raw.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend))
							return err == nil && len(resp.Kvs) == n
						}, waitFor, 10*time.Millisecond)
						return resp.Kvs[n-1]
					}
					var first <-chan result
					if st.crowd {
						first = lock("first")
						queued(2)
					}
					var got <-chan result
					if st.election {
						p2, err := waiter.NewLeaderParticipation("e", "two")
						require.NoError(t, err)
						t.Cleanup(p2.Stop)
						out := make(chan result, 1)
						go func() {
							l2, err := p2.Campaign(ctx, []byte("v2"))
							if err != nil {
								out <- result{err: err}
								return
							}
							out <- result{func() error { p2.Stop(); return nil }, l2.Err, nil}
						}()
						got = out
					} else {
						got = lock("waiter")
					}
					// The waiter's entry, as queued.
					var mine *mvccpb.KeyValue
					if st.crowd {
						mine = queued(3)
					} else {
						mine = queued(2)
					}
					if st.released {
						// Once it watches the holder's entry (else it may
						// find itself at the head in its first read).
						select {
						case <-h.headRead:
						case r := <-got:
							t.Fatalf("the waiter returned before the holder let go: %v", r.err)
						}
						require.NoError(t, release())
					}
					select {
					case <-h.held:
					case r := <-got:
						t.Fatalf("the waiter returned before the step: %v", r.err)
					}

					for _, i := range mode.stop {
						cl.StopMember(i)
					}
					h.startOutage()
					var seen <-chan struct{} // the waiter met the outage
					switch {
					case mode.name == "Restart":
						time.Sleep(restartOutage)
					case st.crowd: // clientv3 gave up a read of the view (no leader), and the waiter read again
						seen = h.gaveUp
					case st.pass: // the waiter's watch ended (no leader) and was opened again
						seen = h.rewatched
					default: // the waiter's read failed (request timed out) within clientv3's retries
						seen = h.failed
					}
					if seen != nil {
						select {
						case <-seen:
						case r := <-got:
							t.Fatalf("the waiter returned while etcd was down: %v", r.err)
						case <-time.After(waitFor):
							t.Fatal("the waiter did not meet the outage")
						}
					}
					select {
					case r := <-got:
						t.Fatalf("the waiter returned while etcd was down: %v", r.err)
					default:
					}
					for _, i := range mode.stop {
						cl.RestartMember(i)
					}

					if !st.released {
						require.Eventually(t, func() bool { return holderLive() == nil }, waitFor, 10*time.Millisecond)
						select {
						case r := <-got:
							t.Fatalf("the waiter returned while the holder holds: %v", r.err)
						default:
						}
						require.NoError(t, release())
					}
					if first != nil {
						select {
						case r := <-first:
							require.NoError(t, r.err)
							require.NoError(t, r.release())
						case <-time.After(waitFor):
							t.Fatal("the first waiter was not granted once the holder let go")
						}
					}
					var r result
					select {
					case r = <-got:
					case <-time.After(waitFor):
						t.Fatal("the waiter was not granted once the holder let go")
					}
					require.NoError(t, r.err, "the waiter must keep waiting through the outage")
					require.NoError(t, r.check())
					if lctx != nil {
						require.Error(t, lctx.Err(), "two leaders")
					} else {
						require.Error(t, holderLive(), "two holders")
					}
					now, err := raw.Get(ctx, prefix, clientv3.WithPrefix())
					require.NoError(t, err)
					require.Len(t, now.Kvs, 1)
					require.Equal(t, string(mine.Key), string(now.Kvs[0].Key), "the waiter's entry changed")
					require.Equal(t, mine.ModRevision, now.Kvs[0].ModRevision, "the waiter's entry changed")
					require.NoError(t, r.release())
				})
			}
		})
	}
}
