package vitessinterop

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	vtopo "vitess.io/vitess/go/vt/topo"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/inspect"
	"github.com/topokit/topokit/topo/test/faultproxy"
	"github.com/topokit/topokit/topo/zk2topo"
)

// faultStore adds to a store what the fault tests need: topokit Conns
// with short sessions through a fault proxy, a raw way to end a topokit
// holder's session or lease behind its back, and a raw listing of what
// sessions own under a root.
type faultStore struct {
	store
	// addr is the server's client address (the proxy's target).
	addr string
	// short opens a topokit Conn on root through addr with a short
	// session or lease (seconds), closed at the end of t.
	short func(t *testing.T, root, addr string) topo.Conn
	// via opens a topokit Conn on root through addr with the default
	// session or lease (Consul: a session_ttl_min of the test agent's, so
	// that LockWithTTL may ask for seconds), closed at the end of t.
	via func(t *testing.T, root, addr string) topo.Conn
	// kill ends, with a raw client, the session or lease that holds the
	// lock entry of dir under root whose contents are holder. nil where
	// no raw client can (ZooKeeper: ending a session needs its password;
	// a partition outliving the session timeout expires it instead).
	kill func(t *testing.T, root, dir, holder string)
	// owned lists, with a raw client, every key or znode under root that
	// a session or lease owns (lock and queue entries, tail keys, held
	// election keys), as "path (owner)".
	owned func(t *testing.T, root string) []string
	// sessions lists the Consul sessions by id (nil elsewhere), to find
	// those a scenario left behind.
	sessions func(t *testing.T) []string
}

// shortTTL is the session timeout, lease TTL or session TTL of the
// topokit Conns the fault tests partition.
const shortTTL = 2 * time.Second

func faultStores() []faultStore {
	var out []faultStore
	for _, s := range stores() {
		switch s.name {
		case "etcd":
			out = append(out, faultStore{
				store: s,
				addr:  etcdAddr,
				short: func(t *testing.T, root, addr string) topo.Conn {
					c, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{addr}, LockTTL: shortTTL, NamedLockTTL: shortTTL}, root)
					require.NoError(t, err)
					t.Cleanup(c.Close)
					return c
				},
				via: func(t *testing.T, root, addr string) topo.Conn {
					c, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{addr}}, root)
					require.NoError(t, err)
					t.Cleanup(c.Close)
					return c
				},
				kill:  etcdKill,
				owned: etcdOwned,
			})
		case "zk":
			out = append(out, faultStore{
				store: s,
				addr:  zkAddr,
				short: func(t *testing.T, root, addr string) topo.Conn {
					c, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}, SessionTimeout: shortTTL}, root)
					require.NoError(t, err)
					t.Cleanup(c.Close)
					return c
				},
				via: func(t *testing.T, root, addr string) topo.Conn {
					// LockWithTTL's TTL is the session timeout on
					// ZooKeeper: a short one, as the ttl asks.
					c, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{addr}, SessionTimeout: shortTTL}, root)
					require.NoError(t, err)
					t.Cleanup(c.Close)
					return c
				},
				owned: zkOwned,
			})
		case "consul":
			out = append(out, faultStore{
				store: s,
				addr:  consulAddr,
				short: func(t *testing.T, root, addr string) topo.Conn {
					c, err := consultopo.NewConn(consultopo.Options{
						Address:       addr,
						SessionTTL:    shortTTL,
						MinSessionTTL: consultest.SessionTTLMin,
						// Request timeouts shorter than the TTL, so that a
						// partitioned renewal fails and is retried.
						RequestTimeout: shortTTL / 2,
					}, root)
					require.NoError(t, err)
					t.Cleanup(c.Close)
					return c
				},
				via: func(t *testing.T, root, addr string) topo.Conn {
					c, err := consultopo.NewConn(consultopo.Options{
						Address:        addr,
						MinSessionTTL:  consultest.SessionTTLMin,
						RequestTimeout: shortTTL / 2,
					}, root)
					require.NoError(t, err)
					t.Cleanup(c.Close)
					return c
				},
				kill:     consulKill,
				owned:    consulOwned,
				sessions: consulSessions,
			})
		}
	}
	return out
}

func rawEtcd(t *testing.T) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdAddr}, DialTimeout: wait})
	require.NoError(t, err)
	return cli
}

func etcdKill(t *testing.T, root, dir, holder string) {
	cli := rawEtcd(t)
	defer cli.Close()
	ctx := testCtx(t)
	resp, err := cli.Get(ctx, root+"/"+dir+"/locks/", clientv3.WithPrefix())
	require.NoError(t, err)
	for _, kv := range resp.Kvs {
		if string(kv.Value) == holder {
			_, err := cli.Revoke(ctx, clientv3.LeaseID(kv.Lease))
			require.NoError(t, err)
			return
		}
	}
	t.Fatalf("no lock entry of %s holds %q", dir, holder)
}

func etcdOwned(t *testing.T, root string) []string {
	cli := rawEtcd(t)
	defer cli.Close()
	resp, err := cli.Get(testCtx(t), root+"/", clientv3.WithPrefix())
	require.NoError(t, err)
	var out []string
	for _, kv := range resp.Kvs {
		if kv.Lease != 0 {
			out = append(out, fmt.Sprintf("%s (lease %x)", kv.Key, kv.Lease))
		}
	}
	return out
}

func zkOwned(t *testing.T, root string) []string {
	z := rawZK(t)
	defer z.Close()
	return zkOwnedOn(t, z, root)
}

// zkOwnedOn lists, through z, the ephemeral znodes below root, each with
// its session.
func zkOwnedOn(t *testing.T, z *zk.Conn, root string) []string {
	var out []string
	var walk func(p string)
	walk = func(p string) {
		children, _, err := z.Children(p)
		if errors.Is(err, zk.ErrNoNode) {
			return
		}
		require.NoError(t, err)
		for _, c := range children {
			cp := p + "/" + c
			_, st, err := z.Get(cp)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			require.NoError(t, err)
			if st.EphemeralOwner != 0 {
				out = append(out, fmt.Sprintf("%s (session %x)", cp, st.EphemeralOwner))
			}
			walk(cp)
		}
	}
	walk(root)
	return out
}

func rawConsul(t *testing.T) *api.Client {
	cli, err := api.NewClient(&api.Config{Address: consulAddr})
	require.NoError(t, err)
	return cli
}

func consulKill(t *testing.T, root, dir, holder string) {
	cli := rawConsul(t)
	kv, _, err := cli.KV().Get(root+"/"+dir+"/Lock", &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	require.NotNil(t, kv, "no lock key on %s", dir)
	require.Equal(t, holder, string(kv.Value), "the lock key of %s", dir)
	require.NotEmpty(t, kv.Session, "the lock key of %s is not held", dir)
	_, err = cli.Session().Destroy(kv.Session, nil)
	require.NoError(t, err)
}

func consulOwned(t *testing.T, root string) []string {
	cli := rawConsul(t)
	kvs, _, err := cli.KV().List(root+"/", &api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	var out []string
	for _, kv := range kvs {
		// Queue entries and tail keys are owned by their session; a
		// tail key left by a gone session would still be a left-over,
		// so every key under a locks segment is listed.
		if kv.Session != "" || strings.Contains("/"+kv.Key+"/", "/locks/") {
			out = append(out, fmt.Sprintf("%s (session %q)", kv.Key, kv.Session))
		}
	}
	return out
}

func consulSessions(t *testing.T) []string {
	ss, _, err := rawConsul(t).Session().List(&api.QueryOptions{RequireConsistent: true})
	require.NoError(t, err)
	var ids []string
	for _, s := range ss {
		ids = append(ids, s.ID)
	}
	return ids
}

// begin starts a scenario on s: the test's context, a fresh root, and the
// Consul sessions there before it (nil on the other stores), for end.
func (s faultStore) begin(t *testing.T) (context.Context, string, []string) {
	ctx, root := testCtx(t), s.root(t)
	var before []string
	if s.sessions != nil {
		before = s.sessions(t)
	}
	return ctx, root, before
}

// end fails t if anything under root is still owned, closes conns, then
// fails t if a Consul session made since before is left.
func (s faultStore) end(ctx context.Context, t *testing.T, root string, before []string, conns ...topo.Conn) {
	s.requireNothingOwned(ctx, t, root)
	for _, c := range conns {
		c.Close()
	}
	s.requireSessionsGone(ctx, t, before)
}

// requireNothingOwned fails t unless nothing under root is owned by a
// session or lease, polling (a session's keys go some time after the
// session) until ctx ends.
func (s faultStore) requireNothingOwned(ctx context.Context, t *testing.T, root string) {
	t.Helper()
	for {
		got := s.owned(t, root)
		if len(got) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("left under %s: %v", root, got)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// requireSessionsGone fails t unless every Consul session created since
// before (a list of consulSessions) is gone, polling until ctx ends.
func (s faultStore) requireSessionsGone(ctx context.Context, t *testing.T, before []string) {
	t.Helper()
	if s.sessions == nil {
		return
	}
	for {
		var left []string
		for _, id := range s.sessions(t) {
			if !slices.Contains(before, id) {
				left = append(left, id)
			}
		}
		if len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("sessions left: %v", left)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// intervals records when each holder held a lock, as the test sees it: a
// holder's interval starts when its Lock returned and ends when it called
// Unlock or its Done closed. check fails t if two overlap.
type intervals struct {
	mu  sync.Mutex
	all []interval
}

type interval struct {
	who        string
	start, end time.Time
}

func (iv *intervals) add(who string, start, end time.Time) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	iv.all = append(iv.all, interval{who, start, end})
}

func (iv *intervals) check(t *testing.T) {
	t.Helper()
	iv.mu.Lock()
	defer iv.mu.Unlock()
	s := slices.Clone(iv.all)
	slices.SortFunc(s, func(a, b interval) int { return a.start.Compare(b.start) })
	for i := 1; i < len(s); i++ {
		assert.False(t, s[i].start.Before(s[i-1].end), "%s held from %v while %s held until %v", s[i].who, s[i].start, s[i-1].who, s[i-1].end)
	}
}

// doneClosed reports whether f's Done is closed now.
func doneClosed(f topo.Fence) bool {
	select {
	case <-f.Done():
		return true
	default:
		return false
	}
}

// TestPartitionedHolderVitessTakesOver partitions a topokit Conn (short
// session, through a fault proxy) holding a directory's lock while a
// Vitess process waits for it. The Vitess process takes the lock only
// once the store dropped topokit's entry, and by then topokit's holder
// has given the lock up (Done closed, Check LockLost): the two never hold
// at once. After the partition heals, topokit's Unlock says LockLost and
// leaves Vitess's lock alone, its guarded write is refused, and while
// Vitess holds, inspect names Vitess's holder. Nothing is left owned at
// the end.
func TestPartitionedHolderVitessTakesOver(t *testing.T) {
	type kind struct {
		name string
		// conn opens the partitioned Conn.
		conn func(s faultStore, t *testing.T, root, addr string) topo.Conn
		lock func(ctx context.Context, c topo.Conn) (topo.LockDescriptor, error)
	}
	kinds := []kind{
		{"Lock", func(s faultStore, t *testing.T, root, addr string) topo.Conn { return s.short(t, root, addr) },
			func(ctx context.Context, c topo.Conn) (topo.LockDescriptor, error) {
				return c.Lock(ctx, "d", "topokit-holder")
			}},
		// A lock of its own lease or session, shorter than the Conn's.
		{"LockWithTTL", func(s faultStore, t *testing.T, root, addr string) topo.Conn { return s.via(t, root, addr) },
			func(ctx context.Context, c topo.Conn) (topo.LockDescriptor, error) {
				return c.LockWithTTL(ctx, "d", "topokit-holder", shortTTL)
			}},
		// etcd's NamedLockTTL and ZooKeeper's session are short on this
		// Conn; Consul's LockName session lives 24 h (not tested here).
		{"LockName", func(s faultStore, t *testing.T, root, addr string) topo.Conn { return s.short(t, root, addr) },
			func(ctx context.Context, c topo.Conn) (topo.LockDescriptor, error) {
				return c.LockName(ctx, "d", "topokit-holder")
			}},
	}
	for _, s := range faultStores() {
		for _, k := range kinds {
			if k.name == "LockName" && s.name == "consul" {
				continue
			}
			t.Run(s.name+"/"+k.name, func(t *testing.T) {
				ctx, root, before := s.begin(t)
				proxy, err := faultproxy.New(s.addr)
				require.NoError(t, err)
				defer proxy.Close()
				vc, obs := s.vitess(t, root), s.topokit(t, root)
				tc := k.conn(s, t, root, proxy.Addr())
				_, err = obs.Create(ctx, "d/f", []byte("x"))
				require.NoError(t, err)
				var iv intervals

				tld, err := k.lock(ctx, tc)
				require.NoError(t, err)
				tStart := time.Now()
				tEnd := make(chan time.Time, 1)
				go func() {
					<-tld.Done()
					tEnd <- time.Now()
				}()
				h, err := inspect.LockHolder(ctx, obs, "d")
				require.NoError(t, err)
				require.Equal(t, "topokit-holder", h)

				type won struct {
					ld         vtopo.LockDescriptor
					err        error
					at         time.Time
					doneClosed bool
					checkErr   error
				}
				vwon := make(chan won, 1)
				go func() {
					ld, err := vc.Lock(ctx, "d", "vitess-holder")
					w := won{ld: ld, err: err, at: time.Now(), doneClosed: doneClosed(tld)}
					cctx, cancel := context.WithTimeout(ctx, time.Second)
					w.checkErr = tld.Check(cctx)
					cancel()
					vwon <- w
				}()
				s.waitLockers(ctx, t, root, "d", 2)
				proxy.Blackhole()
				w := <-vwon
				require.NoError(t, w.err)
				require.True(t, w.doneClosed, "Vitess took the lock while the partitioned topokit holder's Done was open")
				require.True(t, topo.IsErrType(w.checkErr, topo.LockLost), "the partitioned topokit holder's Check once Vitess holds: %v", w.checkErr)
				iv.add("topokit-holder", tStart, <-tEnd)
				proxy.Heal()

				// Vitess holds: topokit sees it and cannot act on its old lock.
				h, err = inspect.LockHolder(ctx, obs, "d")
				require.NoError(t, err)
				require.Equal(t, "vitess-holder", h, "inspect while Vitess holds")
				_, err = tc.Txn(ctx, topo.IfHeld(tld), topo.UpdateOp("d/f", []byte("stale"), nil))
				require.Error(t, err, "a guarded write on the lost lock")
				err = tld.Unlock(ctx)
				require.True(t, topo.IsErrType(err, topo.LockLost), "Unlock of the lost lock: %v", err)
				require.NoError(t, w.ld.Check(ctx), "Vitess's lock after topokit's stale Unlock")
				_, err = obs.TryLock(ctx, "d", "topokit-try")
				require.True(t, topo.IsErrType(err, topo.NodeExists), "TryLock while Vitess holds: %v", err)
				_, err = tc.TryLock(ctx, "d", "topokit-try")
				require.True(t, topo.IsErrType(err, topo.NodeExists), "TryLock of the healed Conn while Vitess holds: %v", err)
				got, _, err := obs.Get(ctx, "d/f")
				require.NoError(t, err)
				require.Equal(t, "x", string(got))

				// A healed topokit Conn queues behind Vitess and gets it next.
				tgot := make(chan topo.LockDescriptor, 1)
				go func() {
					ld, err := tc.Lock(ctx, "d", "topokit-after")
					assert.NoError(t, err)
					tgot <- ld
				}()
				s.waitLockers(ctx, t, root, "d", 2)
				vEnd := time.Now()
				require.NoError(t, w.ld.Unlock(ctx))
				iv.add("vitess-holder", w.at, vEnd)
				tld2 := <-tgot
				require.NotNil(t, tld2)
				iv.add("topokit-after", time.Now(), time.Now())
				require.NoError(t, tld2.Unlock(ctx))
				iv.check(t)
				s.end(ctx, t, root, before, tc, obs)
			})
		}
	}
}

// TestKilledHolderVitessTakesOver ends a topokit holder's session (Consul:
// destroyed) or lease (etcd: revoked) behind its back, with a raw client,
// while a Vitess process waits. Vitess takes the lock; topokit's holder
// learns the loss (Done closes, Check says LockLost), its guarded write
// is refused and its Unlock says LockLost without touching Vitess's lock.
// topokit's Conn then locks again.
func TestKilledHolderVitessTakesOver(t *testing.T) {
	for _, s := range faultStores() {
		if s.kill == nil {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			ctx, root, before := s.begin(t)
			vc, tc := s.vitess(t, root), s.topokit(t, root)
			_, err := tc.Create(ctx, "d/f", []byte("x"))
			require.NoError(t, err)
			tld, err := tc.Lock(ctx, "d", "topokit-holder")
			require.NoError(t, err)
			vgot := make(chan vtopo.LockDescriptor, 1)
			go func() {
				ld, err := vc.Lock(ctx, "d", "vitess-holder")
				assert.NoError(t, err)
				vgot <- ld
			}()
			s.waitLockers(ctx, t, root, "d", 2)
			s.kill(t, root, "d", "topokit-holder")
			vld := <-vgot
			require.NotNil(t, vld)
			// Check asks the store: LockLost as soon as Vitess holds,
			// whether or not the Conn has heard of the loss yet.
			err = tld.Check(ctx)
			require.True(t, topo.IsErrType(err, topo.LockLost), "Check once Vitess holds: %v", err)
			// The holder learns it (the store dropped it behind its
			// back: Done closes once the Conn hears of it).
			select {
			case <-tld.Done():
			case <-ctx.Done():
				t.Fatal("the killed holder's Done never closed")
			}
			err = tld.Check(ctx)
			require.True(t, topo.IsErrType(err, topo.LockLost), "Check of the killed lock: %v", err)
			_, err = tc.Txn(ctx, topo.IfHeld(tld), topo.UpdateOp("d/f", []byte("stale"), nil))
			require.Error(t, err, "a guarded write on the killed lock")
			err = tld.Unlock(ctx)
			require.True(t, topo.IsErrType(err, topo.LockLost), "Unlock of the killed lock: %v", err)
			require.NoError(t, vld.Check(ctx), "Vitess's lock after topokit's stale Unlock")
			h, err := inspect.LockHolder(ctx, tc, "d")
			require.NoError(t, err)
			require.Equal(t, "vitess-holder", h)

			// The same Conn locks again once Vitess lets go.
			tgot := make(chan topo.LockDescriptor, 1)
			go func() {
				ld, err := tc.Lock(ctx, "d", "topokit-again")
				assert.NoError(t, err)
				tgot <- ld
			}()
			s.waitLockers(ctx, t, root, "d", 2)
			require.NoError(t, vld.Unlock(ctx))
			tld2 := <-tgot
			require.NotNil(t, tld2)
			require.NoError(t, tld2.Check(ctx))
			_, err = tc.Txn(ctx, topo.IfHeld(tld2), topo.UpdateOp("d/f", []byte("fresh"), nil))
			require.NoError(t, err)
			_, err = vc.TryLock(ctx, "d", "vitess-try")
			require.True(t, vtopo.IsErrType(err, vtopo.NodeExists), "Vitess TryLock while topokit holds again: %v", err)
			require.NoError(t, tld2.Unlock(ctx))
			s.end(ctx, t, root, before, tc)
		})
	}
}

// TestPartitionedWaiterBehindVitess partitions a topokit Conn waiting for
// a lock Vitess holds, with another topokit contender queued behind it.
// The partitioned waiter fails (its session or lease is given up) and its
// entry goes with its session; when Vitess releases, the other topokit
// contender gets the lock, and a later Vitess contender gets it after
// that. Nothing is left owned.
func TestPartitionedWaiterBehindVitess(t *testing.T) {
	for _, s := range faultStores() {
		t.Run(s.name, func(t *testing.T) {
			ctx, root, before := s.begin(t)
			proxy, err := faultproxy.New(s.addr)
			require.NoError(t, err)
			defer proxy.Close()
			vc, tc2 := s.vitess(t, root), s.topokit(t, root)
			tc := s.short(t, root, proxy.Addr())
			_, err = tc2.Create(ctx, "d/f", []byte("x"))
			require.NoError(t, err)
			vld, err := vc.Lock(ctx, "d", "vitess-holder")
			require.NoError(t, err)

			wctx, cancelWait := context.WithCancel(ctx)
			defer cancelWait()
			perr := make(chan error, 1)
			go func() {
				ld, err := tc.Lock(wctx, "d", "topokit-partitioned")
				if err == nil {
					t.Errorf("the partitioned waiter got the lock")
					_ = ld.Unlock(ctx)
				}
				perr <- err
			}()
			s.waitLockers(ctx, t, root, "d", 2)
			if s.name == "consul" {
				waitConsulQueue(ctx, t, root, "d", 1)
			}
			t2 := make(chan topo.LockDescriptor, 1)
			go func() {
				ld, err := tc2.Lock(ctx, "d", "topokit-next")
				assert.NoError(t, err)
				t2 <- ld
			}()
			s.waitLockers(ctx, t, root, "d", 3)
			if s.name == "consul" {
				waitConsulQueue(ctx, t, root, "d", 2)
			}
			proxy.Blackhole()
			// The partitioned waiter's session or lease lapses: it fails
			// without the lock (or, on a backend that keeps waiting
			// across a lost session, when the test stops it).
			select {
			case err := <-perr:
				t.Logf("partitioned waiter: %v", err)
			case <-time.After(4 * shortTTL):
				t.Log("the partitioned waiter still waits; cancelling it")
				cancelWait()
				t.Logf("partitioned waiter: %v", <-perr)
			}
			// Its entry goes with the session (the raw count is the
			// holder's and the other waiter's entries).
			s.waitLockers(ctx, t, root, "d", 2)
			if s.name == "consul" {
				waitConsulQueue(ctx, t, root, "d", 1)
			}
			require.NoError(t, vld.Unlock(ctx))
			tld := <-t2
			require.NotNil(t, tld)
			require.NoError(t, tld.Check(ctx))
			vgot := make(chan vtopo.LockDescriptor, 1)
			go func() {
				ld, err := vc.Lock(ctx, "d", "vitess-after")
				assert.NoError(t, err)
				vgot <- ld
			}()
			s.waitLockers(ctx, t, root, "d", 2)
			require.NoError(t, tld.Unlock(ctx))
			vld = <-vgot
			require.NotNil(t, vld)
			require.NoError(t, vld.Unlock(ctx))
			proxy.Heal()
			s.end(ctx, t, root, before, tc, tc2)
		})
	}
}

// waitConsulQueue polls until topokit's Consul queue of dir's lock holds
// n entries.
func waitConsulQueue(ctx context.Context, t *testing.T, root, dir string, n int) {
	t.Helper()
	cli := rawConsul(t)
	for {
		keys, _, err := cli.KV().Keys(path.Join(root, dir, "locks", "queue")+"/", "", &api.QueryOptions{RequireConsistent: true})
		require.NoError(t, err)
		if len(keys) == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the queue of %s never had %d entries (has %v)", dir, n, keys)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestNamedAndTTLLocksAcrossLibraries checks LockName and LockWithTTL of
// each library against the other's, both ways: TryLock and Lock of the
// other library while one holds, inspect's holder while Vitess holds,
// and nothing owned after the releases.
func TestNamedAndTTLLocksAcrossLibraries(t *testing.T) {
	for _, s := range faultStores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			vc, tc := s.vitess(t, root), s.topokit(t, root)
			_, err := tc.Create(ctx, "d/f", []byte("x"))
			require.NoError(t, err)
			type kind struct {
				name    string
				vitess  func(dir, who string) (vtopo.LockDescriptor, error)
				topokit func(ctx context.Context, dir, who string) (topo.LockDescriptor, error)
				dir     string
			}
			kinds := []kind{
				{"LockName", func(dir, who string) (vtopo.LockDescriptor, error) { return vc.LockName(ctx, dir, who) },
					func(ctx context.Context, dir, who string) (topo.LockDescriptor, error) {
						return tc.LockName(ctx, dir, who)
					}, "named/n1"},
				{"LockWithTTL", func(dir, who string) (vtopo.LockDescriptor, error) {
					return vc.LockWithTTL(ctx, dir, who, 10*time.Second)
				},
					func(ctx context.Context, dir, who string) (topo.LockDescriptor, error) {
						return tc.LockWithTTL(ctx, dir, who, 10*time.Second)
					}, "d"},
			}
			for _, k := range kinds {
				vld, err := k.vitess(k.dir, "vitess-"+k.name)
				require.NoError(t, err, k.name)
				_, err = tc.TryLock(ctx, k.dir, "topokit-try")
				if k.name == "LockName" {
					// TryLock needs the directory; LockName's may not
					// exist as a directory of files.
					t.Logf("topokit TryLock of %s while Vitess's LockName holds: %v", k.dir, err)
				} else {
					require.True(t, topo.IsErrType(err, topo.NodeExists), "%s: topokit TryLock while Vitess holds: %v", k.name, err)
				}
				wctx, cancel := context.WithTimeout(ctx, holdFor)
				_, err = k.topokit(wctx, k.dir, "topokit-wait")
				cancel()
				require.True(t, topo.IsErrType(err, topo.Timeout), "%s: topokit's while Vitess holds: %v", k.name, err)
				h, err := inspect.LockHolder(ctx, tc, k.dir)
				require.NoError(t, err, k.name)
				require.Equal(t, "vitess-"+k.name, h, k.name)
				tgot := make(chan topo.LockDescriptor, 1)
				go func() {
					ld, err := k.topokit(ctx, k.dir, "topokit-"+k.name)
					assert.NoError(t, err, k.name)
					tgot <- ld
				}()
				s.waitLockers(ctx, t, root, k.dir, 2)
				require.NoError(t, vld.Unlock(ctx), k.name)
				tld := <-tgot
				require.NotNil(t, tld, k.name)
				h, err = inspect.LockHolder(ctx, tc, k.dir)
				require.NoError(t, err, k.name)
				require.Equal(t, "topokit-"+k.name, h, k.name)
				_, err = vc.TryLock(ctx, k.dir, "vitess-try")
				if k.name != "LockName" {
					require.True(t, vtopo.IsErrType(err, vtopo.NodeExists), "%s: Vitess TryLock while topokit holds: %v", k.name, err)
				} else {
					t.Logf("Vitess TryLock of %s while topokit's LockName holds: %v", k.dir, err)
				}
				vgot := make(chan vtopo.LockDescriptor, 1)
				go func() {
					ld, err := k.vitess(k.dir, "vitess-"+k.name+"-2")
					assert.NoError(t, err, k.name)
					vgot <- ld
				}()
				s.waitLockers(ctx, t, root, k.dir, 2)
				require.NoError(t, tld.Check(ctx), k.name)
				require.NoError(t, tld.Unlock(ctx), k.name)
				vld = <-vgot
				require.NotNil(t, vld, k.name)
				require.NoError(t, vld.Unlock(ctx), k.name)
			}
			s.requireNothingOwned(ctx, t, root)
		})
	}
}

// holders is the test's view of who holds one lock: every contender
// registers when its Lock returns and deregisters before it calls
// Unlock. A contender that registers while another is registered is a
// second holder, unless that other is a topokit holder whose Done is
// already closed (it lost the lock and knows it, though its goroutine has
// not deregistered yet).
type holders struct {
	mu   sync.Mutex
	held map[string]topo.Fence // nil Fence: a Vitess holder
	n    int                   // acquisitions
}

func (h *holders) acquired(t *testing.T, who string, f topo.Fence) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for other, of := range h.held {
		if of == nil || !doneClosed(of) {
			t.Errorf("%s acquired while %s held (Done open)", who, other)
		}
	}
	h.held[who] = f
	h.n++
}

func (h *holders) released(who string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.held, who)
}

func (h *holders) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// TestMixedChurnUnderPartition has a Vitess contender, a topokit
// contender and a topokit contender with a short session behind a fault
// proxy take and release one lock in a loop; twice, while the proxied one
// holds, it is partitioned until another contender takes the lock, then
// healed. Whenever a contender acquires, no other holds the lock, but for
// a topokit holder that already knows it lost it (Done closed). Nothing
// is left owned at the end.
func TestMixedChurnUnderPartition(t *testing.T) {
	for _, s := range faultStores() {
		t.Run(s.name, func(t *testing.T) {
			ctx, root, before := s.begin(t)
			proxy, err := faultproxy.New(s.addr)
			require.NoError(t, err)
			defer proxy.Close()
			vc, tc := s.vitess(t, root), s.topokit(t, root)
			pc := s.short(t, root, proxy.Addr())
			_, err = tc.Create(ctx, "d/f", []byte("x"))
			require.NoError(t, err)
			h := &holders{held: map[string]topo.Fence{}}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			loop := func(who string, lock func() (release func() error, f topo.Fence, err error)) {
				defer wg.Done()
				for k := 0; ; k++ {
					select {
					case <-stop:
						return
					default:
					}
					name := fmt.Sprintf("%s-%d", who, k)
					release, f, err := lock()
					if !assert.NoError(t, err, name) {
						return
					}
					h.acquired(t, name, f)
					h.released(name)
					assert.NoError(t, release(), name)
				}
			}
			wg.Add(2)
			go loop("vitess", func() (func() error, topo.Fence, error) {
				ld, err := vc.Lock(ctx, "d", "vitess")
				if err != nil {
					return nil, nil, err
				}
				return func() error { return ld.Unlock(ctx) }, nil, nil
			})
			go loop("topokit", func() (func() error, topo.Fence, error) {
				ld, err := tc.Lock(ctx, "d", "topokit")
				if err != nil {
					return nil, nil, err
				}
				return func() error { return ld.Unlock(ctx) }, ld, nil
			})
			// The proxied contender holds until told to release or until
			// its Done closes.
			got := make(chan topo.LockDescriptor)
			release := make(chan struct{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; ; k++ {
					name := fmt.Sprintf("proxied-%d", k)
					lctx, cancel := context.WithTimeout(ctx, 4*shortTTL)
					ld, err := pc.Lock(lctx, "d", "proxied")
					cancel()
					select {
					case <-stop:
						if err == nil {
							assert.NoError(t, ld.Unlock(ctx))
						}
						return
					default:
					}
					if err != nil {
						t.Logf("%s: %v", name, err)
						continue
					}
					h.acquired(t, name, ld)
					select {
					case got <- ld:
					case <-stop:
						h.released(name)
						assert.NoError(t, ld.Unlock(ctx))
						return
					}
					select {
					case <-ld.Done():
						h.released(name)
						err := ld.Unlock(ctx)
						assert.True(t, topo.IsErrType(err, topo.LockLost), "%s: Unlock after loss: %v", name, err)
					case <-release:
						h.released(name)
						assert.NoError(t, ld.Unlock(ctx), name)
					}
				}
			}()
			for round := range 4 {
				ld := <-got
				if round%2 == 1 {
					release <- struct{}{}
					continue
				}
				n := h.count()
				proxy.Blackhole()
				<-ld.Done()
				// Another contender takes the lock while the partition lasts.
				for h.count() == n {
					select {
					case <-ctx.Done():
						t.Fatal("nobody took the lock from the partitioned holder")
					case <-time.After(5 * time.Millisecond):
					}
				}
				proxy.Heal()
			}
			close(stop)
			wg.Wait()
			t.Logf("%d acquisitions", h.count())
			s.end(ctx, t, root, before, tc, pc)
		})
	}
}

// TestCrashedVitessHolder ends a Vitess holder's session (Consul) or lease
// (etcd) behind it, as the store does when a Vitess process dies holding
// a lock, while a topokit contender waits: topokit takes the lock, inspect
// names topokit's holder, and nothing is left owned after its release. On
// Consul the lock key is written as Vitess's api.Lock writes it (flags,
// value, a session of "release" behaviour, which leaves the key behind
// without a session), with a short lock-delay so the test need not wait
// Vitess's 15 s.
func TestCrashedVitessHolder(t *testing.T) {
	for _, s := range faultStores() {
		if s.name == "zk" {
			continue // a Vitess session's password is out of reach
		}
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			tc, tc2 := s.topokit(t, root), s.topokit(t, root)
			_, err := tc.Create(ctx, "d/f", []byte("x"))
			require.NoError(t, err)
			var kill func()
			if s.name == "consul" {
				l, err := rawConsul(t).LockOpts(&api.LockOptions{
					Key:         root + "/d/Lock",
					Value:       []byte("vitess-holder"),
					SessionOpts: &api.SessionEntry{Name: api.DefaultLockSessionName, TTL: api.DefaultLockSessionTTL, LockDelay: time.Millisecond},
				})
				require.NoError(t, err)
				_, err = l.Lock(ctx.Done())
				require.NoError(t, err)
				kill = func() { s.kill(t, root, "d", "vitess-holder") }
			} else {
				vc := s.vitess(t, root)
				_, err := vc.Lock(ctx, "d", "vitess-holder")
				require.NoError(t, err)
				kill = func() { s.kill(t, root, "d", "vitess-holder") }
			}
			_, err = tc.TryLock(ctx, "d", "topokit-try")
			require.True(t, topo.IsErrType(err, topo.NodeExists), "TryLock while Vitess holds: %v", err)
			h, err := inspect.LockHolder(ctx, tc, "d")
			require.NoError(t, err)
			require.Equal(t, "vitess-holder", h)
			tgot := make(chan topo.LockDescriptor, 1)
			go func() {
				ld, err := tc.Lock(ctx, "d", "topokit-holder")
				assert.NoError(t, err)
				tgot <- ld
			}()
			s.waitLockers(ctx, t, root, "d", 2)
			if s.name == "consul" {
				waitConsulQueue(ctx, t, root, "d", 1)
			}
			kill()
			tld := <-tgot
			require.NotNil(t, tld)
			h, err = inspect.LockHolder(ctx, tc2, "d")
			require.NoError(t, err)
			require.Equal(t, "topokit-holder", h)
			_, err = tc2.TryLock(ctx, "d", "topokit-try")
			require.True(t, topo.IsErrType(err, topo.NodeExists), "TryLock while topokit holds: %v", err)
			require.NoError(t, tld.Unlock(ctx))
			// Free: a TryLock takes it, then nothing is left owned.
			tld, err = tc2.TryLock(ctx, "d", "topokit-try")
			require.NoError(t, err)
			require.NoError(t, tld.Unlock(ctx))
			_, err = inspect.LockHolder(ctx, tc2, "d")
			require.True(t, topo.IsErrType(err, topo.NoNode), "LockHolder of a free lock: %v", err)
			s.requireNothingOwned(ctx, t, root)
		})
	}
}
