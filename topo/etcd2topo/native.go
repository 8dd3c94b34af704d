package etcd2topo

// Native elections: leader elections in etcd's own layout.
//
// NewNativeElection opens an election on an etcd-native prefix, laid out
// as go.etcd.io/etcd/client/v3/concurrency.Election (and `etcdctl elect`,
// which uses it) lays out theirs, so that programs using either and
// topokit take part in one election:
//
//   - the prefix is a raw etcd key, the very string given to
//     concurrency.NewElection or `etcdctl elect NAME`: it is NOT relative
//     to the Conn's root;
//   - a candidate is the key <prefix>/<lease id in lowercase hex, as
//     fmt's %x prints it>, attached to that lease and holding the
//     candidate's value (what Campaign and Proclaim publish);
//   - every key under <prefix>/ is a candidate, whatever its depth and
//     whether or not it is attached to a lease (concurrency.Election
//     counts them all, so topokit must too, or the two could lead at
//     once); the key with the lowest CreateRevision leads, every other
//     candidate waits until no key created before its own is left;
//   - Proclaim rewrites the leader's key in place (same CreateRevision),
//     guarded by a compare of its CreateRevision and of its lease;
//   - Resign deletes the key (compared on its CreateRevision).
//
// The participant's id: concurrency.Election has none, so a native
// candidate is known by its key's name under <prefix>/ (for a candidate
// of concurrency.Election or topokit, its lease id in hex; for a key put
// there by hand, what follows <prefix>/). That name is Leader.ID and what
// GetCurrentLeaderID and WaitForNewLeader report, for topokit's
// candidates and foreign ones alike. The id given to NewNativeElection is
// the value WaitForLeadership publishes (there is no key beside the
// candidate that could hold it, and `etcdctl elect -l` shows the value),
// and ResumeInfo carries it. Campaign publishes its own value instead.
//
// The fencing token of a term (Term, Leader.Token) is the leader key's
// CreateRevision: the leader is the oldest key, so every later term's key
// was created later, whoever campaigned with it.
//
// Leases: a candidate key rests on the Conn's shared lease (Options.LockTTL,
// see lease.go), or on a lease of its own when the shared lease already has
// a key under the prefix (two native participations of one prefix through
// one Conn). Leadership ends, locally, when the lease's proven-until time
// passes (see SafetyMargin), before etcd can expire the lease and let a
// concurrency.Election waiter in, exactly as for the Vitess-layout
// elections.
//
// Prefixes that overlap the Conn's own tree are refused: a prefix whose
// key range <prefix>/ contains the Conn's root (InvalidArgument: every
// file and entry of the Conn would be a candidate), and a prefix inside
// the root whose remainder is a canonical path (InvalidPath: its keys
// would be files of the Conn, or, under a reserved name, lock and
// election entries). A prefix inside the root that no canonical path can
// start with (a leading "/" after the root, an empty segment, ...) and
// every prefix outside the root are accepted. Other Conns' roots are not
// known to the Conn: keep native prefixes out of every topokit tree.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// nativeLayout names the layout in ResumeInfo.
const nativeLayout = "etcd-native"

// resignGrace bounds Resign's removal when it is given an ended context.
const resignGrace = 3 * time.Second

// NewNativeElection joins the election on the etcd-native prefix prefix
// (the raw etcd key given to concurrency.NewElection or `etcdctl elect`,
// not relative to the Conn's root) as a participant that publishes id
// when it joins with WaitForLeadership. The layout is etcd's own: a
// candidate is the key <prefix>/<lease id in hex> on that lease, holding
// the value; every key under <prefix>/ is a candidate and the one with the
// lowest CreateRevision leads; so concurrency.Election campaigners and
// observers, and topokit's, see one leader and one value and never lead
// at once. The returned participation implements the whole
// topo.LeaderParticipation, with these differences from the Vitess
// layout: Leader.ID (and GetCurrentLeaderID, WaitForNewLeader) is the
// leader key's name under <prefix>/ (its lease id in hex), not id;
// WaitForLeadership publishes id as the value (Leader.Value is then id,
// not nil); Token is the key's CreateRevision; ResumeInfo is taken back
// with ResumeNativeElection. The candidate key rests on the Conn's shared
// lease (or one of its own), and leadership ends when the lease can no
// longer be proven alive, as for NewLeaderParticipation.
//
// It returns InvalidArgument for an empty prefix or id, or a prefix whose
// range contains the Conn's root; InvalidPath for a prefix inside the
// root whose remainder is a canonical path (reserved or not: its keys
// would be the Conn's files or lock and election entries); Closed after
// Close. Nothing is written until WaitForLeadership or Campaign. The
// participation is safe for concurrent use.
func (c *Conn) NewNativeElection(prefix, id string) (topo.LeaderParticipation, error) {
	return c.newNative(prefix, id)
}

func (c *Conn) newNative(prefix, id string) (*nativeElection, error) {
	if err := c.checkNativePrefix(prefix); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, backendkit.Wrap(topo.InvalidArgument, prefix, errors.New("etcd2topo: empty participant id"))
	}
	if err := c.closedErr(prefix); err != nil {
		return nil, err
	}
	stopCtx, stop := context.WithCancel(c.ctx)
	rctx, rcancel := context.WithCancel(context.Background())
	return &nativeElection{
		c:         c,
		prefix:    prefix,
		keyPrefix: prefix + "/",
		id:        id,
		stopCtx:   stopCtx,
		stop:      stop,
		sem:       make(chan struct{}, 1),
		resignCtx: rctx,
		resignAll: rcancel,
	}, nil
}

// checkNativePrefix refuses prefixes that are empty or overlap the Conn's
// own tree (see the package doc of native.go).
func (c *Conn) checkNativePrefix(prefix string) error {
	if prefix == "" {
		return backendkit.Wrap(topo.InvalidArgument, prefix, errors.New("etcd2topo: empty native election prefix"))
	}
	kp, rp := prefix+"/", c.rootPrefix
	if rp != "" && strings.HasPrefix(rp, kp) {
		return backendkit.Wrap(topo.InvalidArgument, prefix,
			fmt.Errorf("etcd2topo: native election prefix %q covers the Conn's root %q", prefix, rp))
	}
	if !strings.HasPrefix(kp, rp) {
		return nil
	}
	rel := prefix[len(rp):]
	if p, err := topo.CleanFilePath(rel); err == nil && p == rel {
		why := "its keys would be files of the Conn"
		if topo.IsReserved(p) {
			why = "its keys would be lock or election entries of the Conn (reserved name)"
		}
		return backendkit.Wrap(topo.InvalidPath, prefix,
			fmt.Errorf("etcd2topo: native election prefix %q is inside the Conn's root %q: %s", prefix, rp, why))
	}
	return nil
}

var _ topo.LeaderParticipation = (*nativeElection)(nil)

// nativeElection is one participant in a native election.
type nativeElection struct {
	c         *Conn
	prefix    string // as given
	keyPrefix string // prefix + "/"
	id        string

	stopCtx context.Context // cancelled by Stop and by the Conn's Close
	stop    context.CancelFunc

	// sem serializes Campaign, WaitForLeadership, Resign and Stop (a
	// channel, so that a waiting Campaign can give up with its ctx).
	sem chan struct{}

	mu        sync.Mutex
	resignCtx context.Context    // cancelled by Resign: ends pending Campaigns
	resignAll context.CancelFunc //
	cand      *nativeCand        // our key, while we have one
	term      *nativeTerm        // our current or last term
}

// nativeCand is our candidate key.
type nativeCand struct {
	key     string
	rev     int64 // its CreateRevision
	lease   *lease
	own     bool   // the lease is this key's alone: removing revokes it
	release func() // frees the key's name in the Conn
	// clusterID is the id of the etcd cluster the key is on.
	clusterID uint64
	// modRev is a ModRevision the key had while it was our candidacy
	// (created at rev, on our lease): that of our last write of it, or of
	// the read that found it ours; 0 when none is known. See rewrite.
	modRev atomic.Int64
}

// saw records that the key was our candidacy at ModRevision r (the
// highest such revision is kept: a later one is the key's current
// ModRevision as long as nobody else writes it).
func (cd *nativeCand) saw(r int64) {
	for {
		old := cd.modRev.Load()
		if r <= old || cd.modRev.CompareAndSwap(old, r) {
			return
		}
	}
}

// ours reports whether kv (a read of the candidate's key) is still our
// candidacy: present, created at rev, on our lease.
func (cd *nativeCand) ours(kv *mvccpb.KeyValue) bool {
	return kv != nil && kv.CreateRevision == cd.rev && kv.Lease == int64(cd.lease.id)
}

// heldCmps are the compares that hold exactly while the candidacy lives
// in the store: its key created at rev and on its lease.
func (cd *nativeCand) heldCmps() []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(cd.key), "=", cd.rev),
		clientv3.Compare(clientv3.LeaseValue(cd.key), "=", cd.lease.id),
	}
}

// acquire takes e.sem, or gives up with ctx.
func (e *nativeElection) acquire(ctx context.Context) error {
	select {
	case e.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return e.ctxErr(ctx)
	}
}

func (e *nativeElection) releaseSem() { <-e.sem }

// ctxErr is the error of a wait that ended with ctx or the Conn.
func (e *nativeElection) ctxErr(ctx context.Context) error {
	if e.c.isClosed() {
		return topo.NewError(topo.Closed, e.prefix)
	}
	if ctx.Err() != nil {
		return backendkit.FromContext(ctx, e.prefix)
	}
	return topo.NewError(topo.Interrupted, e.prefix)
}

// WaitForLeadership is Campaign without a deadline, publishing the id the
// participation was created with (or, for a resumed candidacy, keeping
// the value it had). It returns Interrupted after Stop, Closed after
// Close.
func (e *nativeElection) WaitForLeadership() (context.Context, error) {
	return e.campaign(e.stopCtx, nil, false)
}

// Campaign puts this participant's candidate key, holding value, under
// the prefix (or, if it has one, rewrites its value, guarded on its
// CreateRevision and lease) and waits until no key under the prefix was
// created before it. It returns the leadership context, cancelled when
// the term ends: Resign, Stop, the key deleted or rewritten onto another
// lease, the lease lost (locally: past its proven-until time), or Close.
// While leading it proclaims value and returns the same context. When ctx
// ends first, or Resign is called meanwhile, the key is removed and it
// returns Timeout or Interrupted. Other errors: InvalidArgument for a
// value over MaxValueSize, Interrupted after Stop, Closed after Close,
// LockLost when the key or lease was lost while waiting, NotLeader when a
// Proclaim while leading finds the term over, PermissionDenied and
// Unavailable from etcd.
func (e *nativeElection) Campaign(ctx context.Context, value []byte) (context.Context, error) {
	if err := backendkit.CheckContext(ctx, e.prefix); err != nil {
		return nil, err
	}
	if err := backendkit.CheckValue(e.prefix, value); err != nil {
		return nil, err
	}
	if value == nil {
		value = []byte{}
	}
	return e.campaign(ctx, value, true)
}

func (e *nativeElection) campaign(ctx context.Context, value []byte, setValue bool) (context.Context, error) {
	if err := e.c.closedErr(e.prefix); err != nil {
		return nil, err
	}
	e.mu.Lock()
	rctx := e.resignCtx
	e.mu.Unlock()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.stopCtx, cancel)()
	defer context.AfterFunc(rctx, cancel)()
	if err := e.acquire(wctx); err != nil {
		return nil, e.campaignErr(ctx, err)
	}
	defer e.releaseSem()
	if e.stopCtx.Err() != nil {
		return nil, e.ctxErr(e.stopCtx)
	}
	e.mu.Lock()
	t, cd := e.term, e.cand
	e.mu.Unlock()
	if t != nil && t.ctx.Err() == nil {
		if setValue {
			if err := e.Proclaim(ctx, value); err != nil {
				return nil, err
			}
		}
		return t.ctx, nil
	}
	if t != nil {
		// The last term ended: its key is gone or going; make sure.
		e.mu.Lock()
		e.term = nil
		e.cand = nil
		e.mu.Unlock()
		if cd != nil {
			e.remove(context.Background(), cd, true)
			cd = nil
		}
	}
	if !setValue {
		value = []byte(e.id)
	}
	var err error
	if cd == nil {
		if cd, err = e.put(wctx, value); err != nil {
			return nil, e.campaignErr(ctx, err)
		}
		e.mu.Lock()
		e.cand = cd
		e.mu.Unlock()
	} else if setValue {
		// A resumed candidacy: publish value with it.
		if err := e.rewrite(wctx, cd, value); err != nil {
			e.dropCand(cd)
			return nil, e.campaignErr(ctx, err)
		}
	}
	if err := e.waitTurn(wctx, cd); err != nil {
		e.dropCand(cd)
		return nil, e.campaignErr(ctx, err)
	}
	// A child of the lease's lostCtx, as a topokit election's leadership
	// context (see join): the lease's loss cancels it at once.
	lctx, end := context.WithCancel(cd.lease.lostCtx)
	t = &nativeTerm{e: e, cd: cd, ctx: lctx, end: end}
	e.mu.Lock()
	e.term = t
	e.mu.Unlock()
	go t.monitor()
	return lctx, nil
}

// campaignErr maps the error of a campaign step whose wait context ended
// (ctx: the caller's, or Stop, Resign, Close) onto Timeout, Interrupted or
// Closed; other errors pass.
func (e *nativeElection) campaignErr(ctx context.Context, err error) error {
	if e.c.isClosed() {
		return backendkit.Wrap(topo.Closed, e.prefix, err)
	}
	if ctx.Err() != nil {
		return backendkit.FromContext(ctx, e.prefix)
	}
	if e.stopCtx.Err() != nil {
		return backendkit.Wrap(topo.Interrupted, e.prefix, err)
	}
	var te *topo.Error
	if errors.As(err, &te) && (te.Code == topo.Interrupted || te.Code == topo.Timeout) {
		// Ended by Resign.
		return backendkit.Wrap(topo.Interrupted, e.prefix, err)
	}
	return err
}

// dropCand forgets cd (if it is still ours) and removes its key in the
// background.
func (e *nativeElection) dropCand(cd *nativeCand) {
	e.mu.Lock()
	if e.cand == cd {
		e.cand = nil
	}
	e.mu.Unlock()
	e.remove(context.Background(), cd, true)
}

// takeName marks key as used by one entry of this Conn, setting *release
// to the function that frees it; false if it is in use.
func (c *Conn) takeName(key string, release *func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, used := c.keysInUse[key]; used {
		return false
	}
	c.keysInUse[key] = struct{}{}
	var once sync.Once
	*release = func() {
		once.Do(func() {
			c.mu.Lock()
			delete(c.keysInUse, key)
			c.mu.Unlock()
		})
	}
	return true
}

// put creates our candidate key holding value: on the shared lease, or on
// a lease of its own when the shared lease's name is taken. The put is a
// transaction that creates the key only if it does not exist.
func (e *nativeElection) put(ctx context.Context, value []byte) (*nativeCand, error) {
	c := e.c
	own := false
	for attempt := 0; attempt < 4; attempt++ {
		var l *lease
		var err error
		if own {
			l, err = c.grant(ctx, ttlSeconds(c.opts.LockTTL), e.prefix)
		} else {
			l, err = c.sharedLease(ctx, e.prefix)
		}
		if err != nil {
			return nil, err
		}
		var release func()
		key := fmt.Sprintf("%s%x", e.keyPrefix, int64(l.id))
		if !c.takeName(key, &release) {
			if own {
				c.dropLeaseAsync(l, true)
				return nil, backendkit.Wrap(topo.Unavailable, e.prefix, errKeyBusy)
			}
			own = true
			continue
		}
		cd := &nativeCand{key: key, lease: l, own: own, release: release}
		bctx, bcancel := l.bind(ctx)
		resp, err := c.cli.Txn(bctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, string(value), clientv3.WithLease(l.id))).
			Else(clientv3.OpGet(key)).
			Commit()
		bcancel()
		if err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) && !own {
				// Gone behind the keepalive's back: a new one.
				release()
				c.dropLease(l)
				continue
			}
			if isPermanent(err) {
				release()
			} else {
				// The put may have landed: remove whatever holds our name.
				e.remove(context.Background(), cd, true)
			}
			if own {
				c.dropLeaseAsync(l, true)
			}
			if l.lost() && ctx.Err() == nil {
				return nil, c.ownEntryGone(e.prefix)
			}
			return nil, c.convertError(ctx, err, e.prefix)
		}
		if !resp.Succeeded {
			// A key of our name exists: a late put of an earlier attempt
			// (on our lease; remove it and try again) or someone else's.
			release()
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 1 && kvs[0].Lease == int64(l.id) {
				if _, err := c.cli.Txn(ctx).
					If(clientv3.Compare(clientv3.CreateRevision(key), "=", kvs[0].CreateRevision)).
					Then(clientv3.OpDelete(key)).Commit(); err != nil {
					return nil, c.convertError(ctx, err, e.prefix)
				}
				continue
			}
			if own {
				c.dropLeaseAsync(l, true)
			}
			own = true
			continue
		}
		cd.rev, cd.clusterID = resp.Header.Revision, resp.Header.ClusterId
		cd.saw(cd.rev)
		return cd, nil
	}
	return nil, backendkit.Wrap(topo.Unavailable, e.prefix, errKeyBusy)
}

// rewrite replaces cd's value, guarded on cd still being ours. When a
// ModRevision the key had as our candidacy is known (cd.modRev), the
// guard is first the one compare ModRevision = that revision: the key
// unchanged since then is still created at cd.rev and on our lease (a put
// or a delete of it by anyone moves its ModRevision; a re-creation
// gets a later one), as concurrency.Election's Proclaim guards with one
// compare. When that compare fails (a concurrent rewrite of ours moved
// the ModRevision, or the candidacy is gone), nothing was written, and
// the write is sent again guarded by heldCmps, which decides.
func (e *nativeElection) rewrite(ctx context.Context, cd *nativeCand, value []byte) error {
	bctx, cancel := cd.lease.bind(ctx)
	defer cancel()
	put := clientv3.OpPut(cd.key, string(value), clientv3.WithLease(cd.lease.id))
	if r := cd.modRev.Load(); r > 0 {
		resp, err := e.c.cli.Txn(bctx).If(clientv3.Compare(clientv3.ModRevision(cd.key), "=", r)).Then(put).Commit()
		if err != nil {
			return e.rewriteErr(ctx, cd, err)
		}
		if resp.Succeeded {
			cd.saw(resp.Header.Revision)
			return nil
		}
	}
	resp, err := e.c.cli.Txn(bctx).If(cd.heldCmps()...).Then(put).Commit()
	if err != nil {
		return e.rewriteErr(ctx, cd, err)
	}
	if !resp.Succeeded {
		return topo.NewError(topo.LockLost, e.prefix)
	}
	cd.saw(resp.Header.Revision)
	return nil
}

// rewriteErr is rewrite's error for err, the failure of its request.
func (e *nativeElection) rewriteErr(ctx context.Context, cd *nativeCand, err error) error {
	if cd.lease.lost() && ctx.Err() == nil {
		return e.c.ownEntryGone(e.prefix)
	}
	return e.c.convertError(ctx, err, e.prefix)
}

// remove deletes cd's key if it is still the one we created (compared on
// its CreateRevision, as concurrency.Election's Resign does), or revokes
// its lease if the lease is its own, then frees the name. With async it
// returns at once; otherwise it tries once within ctx and, on failure,
// keeps trying in the background and returns the error.
func (e *nativeElection) remove(ctx context.Context, cd *nativeCand, async bool) error {
	c := e.c
	if cd.own {
		c.dropLeaseAsync(cd.lease, async)
		cd.release()
		return nil
	}
	del := func(ctx context.Context) error {
		_, err := c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(cd.key), "=", cd.rev)).
			Then(clientv3.OpDelete(cd.key)).Commit()
		return err
	}
	if async || cd.rev == 0 {
		if cd.rev == 0 {
			// Outcome of the put unknown: delete whatever of our name is
			// on our lease.
			del = func(ctx context.Context) error {
				_, err := c.cli.Txn(ctx).
					If(clientv3.Compare(clientv3.LeaseValue(cd.key), "=", cd.lease.id)).
					Then(clientv3.OpDelete(cd.key)).Commit()
				return err
			}
		}
		c.untilDone("deleting "+cd.key, true, del, cd.release)
		return nil
	}
	if err := del(ctx); err != nil {
		c.untilDone("deleting "+cd.key, true, del, cd.release)
		return c.convertError(ctx, err, e.prefix)
	}
	cd.release()
	return nil
}

// waitTurn waits until no key under the prefix has a CreateRevision below
// cd's, the rule of concurrency.Election. Like a lock's wait (see
// claim.wait) it watches only cd's key and its predecessor, the key with
// the greatest CreateRevision below cd's, so that a leader's resignation
// wakes one candidate whatever their number. It opens a watch on our key
// at the current revision first; then, for each predecessor in turn, a
// watch on the predecessor's key, then reads (in one transaction) that
// key and ours, and waits for the predecessor's deletion after the read
// (a rewrite keeps a key's CreateRevision: it still blocks). Once the
// predecessor is gone it reads (in one transaction) the newest key
// created before ours and our own: that key is the next predecessor;
// with none, we lead. Events at or below a read's revision are history
// the read reflects and skipped. It returns LockLost when our key is
// deleted or moves to another lease, or our lease is lost; the context's
// error otherwise.
func (e *nativeElection) waitTurn(ctx context.Context, cd *nativeCand) error {
	backoff := 20 * time.Millisecond
	for {
		err := e.waitOnce(ctx, cd)
		if !errors.Is(err, errRewatch) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return backendkit.FromContext(ctx, e.prefix)
		case <-e.c.ctx.Done():
			t.Stop()
			return topo.NewError(topo.Closed, e.prefix)
		case <-cd.lease.done:
			t.Stop()
			return e.c.ownEntryGone(e.prefix)
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (e *nativeElection) waitOnce(callerCtx context.Context, cd *nativeCand) error {
	c := e.c
	ctx, bcancel := cd.lease.bind(callerCtx)
	defer bcancel()
	err := e.waitBound(ctx, cd)
	if err != nil && cd.lease.lost() && callerCtx.Err() == nil {
		return c.ownEntryGone(e.prefix)
	}
	return err
}

func (e *nativeElection) waitBound(ctx context.Context, cd *nativeCand) error {
	c := e.c
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	defer context.AfterFunc(c.ctx, cancel)()
	own := c.cli.Watch(wctx, cd.key, clientv3.WithCreatedNotify())
	if err := c.watchCreated(ctx, own, e.prefix); err != nil {
		return err
	}
	for {
		resp, err := c.cli.Txn(ctx).Then(
			clientv3.OpGet(e.keyPrefix, clientv3.WithPrefix(), clientv3.WithMaxCreateRev(cd.rev-1),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1),
				clientv3.WithKeysOnly()),
			clientv3.OpGet(cd.key),
		).Commit()
		if err != nil {
			return c.convertError(ctx, err, e.prefix)
		}
		if own := resp.Responses[1].GetResponseRange().Kvs; len(own) != 1 || !cd.ours(own[0]) {
			return c.ownEntryGone(e.prefix)
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 || kvs[0].CreateRevision >= cd.rev {
			break
		}
		pctx, pcancel := context.WithCancel(wctx)
		err = e.waitGone(ctx, cd, own, c.cli.Watch(pctx, string(kvs[0].Key), clientv3.WithCreatedNotify()), kvs[0])
		pcancel()
		if err != nil {
			return err
		}
	}
	if cd.lease.lost() {
		return c.ownEntryGone(e.prefix)
	}
	return nil
}

// waitGone waits, through pch (a watch on pred's key, just opened) and
// own (the watch on our key), until pred, a key created before ours, is
// deleted. It returns nil then, and the errors of waitTurn.
func (e *nativeElection) waitGone(ctx context.Context, cd *nativeCand, own, pch clientv3.WatchChan, pred *mvccpb.KeyValue) error {
	c := e.c
	if err := c.watchCreated(ctx, pch, e.prefix); err != nil {
		return err
	}
	resp, err := c.cli.Txn(ctx).Then(clientv3.OpGet(string(pred.Key), clientv3.WithKeysOnly()), clientv3.OpGet(cd.key)).Commit()
	if err != nil {
		return c.convertError(ctx, err, e.prefix)
	}
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) != 1 || !cd.ours(kvs[0]) {
		return c.ownEntryGone(e.prefix)
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) != 1 || kvs[0].CreateRevision != pred.CreateRevision {
		return nil // gone already
	}
	readRev := resp.Header.Revision
	for {
		var wr clientv3.WatchResponse
		var ok, mine bool
		select {
		case wr, ok = <-pch:
		case wr, ok = <-own:
			mine = true
		case <-cd.lease.done:
			return c.ownEntryGone(e.prefix)
		}
		if !ok || wr.Canceled || wr.Err() != nil {
			return c.watchEnded(ctx, wr.Err(), e.prefix)
		}
		for _, ev := range wr.Events {
			if ev.Kv.ModRevision <= readRev {
				continue // history the read already reflects
			}
			if mine {
				if ev.Type == mvccpb.DELETE || !cd.ours(ev.Kv) {
					return c.ownEntryGone(e.prefix)
				}
				continue
			}
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
}

// nativeTerm is one leadership term of a native participant: a
// topo.Fence whose token is the key's CreateRevision.
type nativeTerm struct {
	e   *nativeElection
	cd  *nativeCand
	ctx context.Context // the leadership context
	end context.CancelFunc

	mu       sync.Mutex
	released bool // by Resign or Stop
}

// monitor ends the term when the Conn closes or a watch shows the key
// deleted, recreated or moved to another lease; rewrites on our lease
// (Proclaim) keep it. The lease's loss ends the term without help: the
// term's context is a child of the lease's lostCtx.
func (t *nativeTerm) monitor() {
	defer t.end()
	c, cd := t.e.c, t.cd
	go func() {
		select {
		case <-c.ctx.Done():
			t.end()
		case <-t.ctx.Done():
		}
	}()
	backoff := 20 * time.Millisecond
	for t.ctx.Err() == nil {
		s, err := c.newStream(t.ctx, cd.key, false, t.e.prefix)
		if err != nil {
			if errors.Is(err, topo.PermissionDenied) {
				return
			}
			tm := time.NewTimer(backoff)
			select {
			case <-tm.C:
			case <-t.ctx.Done():
				tm.Stop()
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		ok := t.follow(s)
		s.close()
		if !ok {
			return
		}
	}
}

// follow reads our key and follows it through s: false once it is no
// longer ours, true when it must be watched anew.
func (t *nativeTerm) follow(s *stream) bool {
	c, cd := t.e.c, t.cd
	get := func() (*clientv3.GetResponse, error) { return c.cli.Get(t.ctx, cd.key) }
	resp, err := s.read(get)
	if err != nil || len(resp.Kvs) != 1 || !cd.ours(resp.Kvs[0]) {
		return false
	}
	s.rev = resp.Header.Revision
	for {
		evs, err := s.next()
		if errors.Is(err, errCompacted) {
			resp, err := s.read(get)
			if err != nil || len(resp.Kvs) != 1 || !cd.ours(resp.Kvs[0]) {
				return false
			}
			s.reopen(resp.Header.Revision)
			continue
		}
		if err != nil {
			return false
		}
		for _, ev := range evs {
			if ev.Type == mvccpb.DELETE || !cd.ours(ev.Kv) {
				return false
			}
		}
	}
}

// Token returns the term's fencing token: the leader key's CreateRevision.
func (t *nativeTerm) Token() int64 { return t.cd.rev }

// Done is closed once the term ends (see Campaign).
func (t *nativeTerm) Done() <-chan struct{} { return t.ctx.Done() }

// Check returns nil while the term is provably held: the lease within
// its proven-until time (before and after the read) and a linearizable
// read showing the key created at the term's token, on our lease.
// Interrupted after Resign or Stop, LockLost once the key or lease is
// gone, Closed after Close, the read's error when etcd cannot answer.
func (t *nativeTerm) Check(ctx context.Context) error {
	c, cd := t.e.c, t.cd
	if c.isClosed() {
		return c.check(ctx, t.e.prefix) // Closed, whatever happened before
	}
	t.mu.Lock()
	released := t.released
	t.mu.Unlock()
	if released {
		return topo.NewError(topo.Interrupted, t.e.prefix)
	}
	if err := c.check(ctx, t.e.prefix); err != nil {
		return err
	}
	if cd.lease.lost() || t.ctx.Err() != nil {
		return c.ownEntryGone(t.e.prefix)
	}
	resp, err := c.cli.Get(ctx, cd.key)
	if err != nil {
		return c.convertError(ctx, err, t.e.prefix)
	}
	if len(resp.Kvs) != 1 || !cd.ours(resp.Kvs[0]) || cd.lease.lost() {
		return c.ownEntryGone(t.e.prefix)
	}
	return nil
}

// nativeHeld is what Conn.Txn needs from a native term to compile
// IfHeld: the Vitess-layout claims (*claim) are compared on their
// ModRevision, which Proclaim moves on a native key, so a native term
// gives its own guard instead. Txn finds it with
// backendkit.FenceAs[nativeHeld] when FenceAs[etcdFence] finds nothing.
type nativeHeld interface {
	topo.Fence
	nativeGuard() nativeGuard
}

// nativeGuard is how Conn.Txn compiles IfHeld on a native term.
type nativeGuard struct {
	// conn is the Conn that issued the term, clusterID the etcd cluster
	// its key was put on (for Txn's same-cluster check of a Fence of
	// another Conn).
	conn      *Conn
	clusterID uint64
	// key is the candidate key: Txn's failure branch reads it WITH its
	// value (etcd 3.7 leaves the lease out of keys-only reads).
	key string
	// cmps hold exactly while the term is held in the store.
	cmps []clientv3.Cmp
	// gone reports whether the failure read of key (nil: absent) shows
	// the term gone: the IfHeld op then fails with LockLost.
	gone func(kv *mvccpb.KeyValue) bool
	// held is false when the term is known to have ended here (Resign,
	// Stop, Done closed, lease lost or past its proven-until time): Txn
	// then fails the op with LockLost without relying on the store.
	held bool
}

var _ nativeHeld = (*nativeTerm)(nil)

// nativeGuard implements nativeHeld.
func (t *nativeTerm) nativeGuard() nativeGuard {
	t.mu.Lock()
	released := t.released
	t.mu.Unlock()
	cd := t.cd
	return nativeGuard{
		conn:      t.e.c,
		clusterID: cd.clusterID,
		key:       cd.key,
		cmps:      cd.heldCmps(),
		gone:      func(kv *mvccpb.KeyValue) bool { return !cd.ours(kv) },
		held:      !released && t.ctx.Err() == nil && !cd.lease.lost(),
	}
}

// Term returns the current term (see nativeTerm), or NotLeader; Closed
// after the Conn's Close.
func (e *nativeElection) Term() (topo.Fence, error) {
	if err := e.c.closedErr(e.prefix); err != nil {
		return nil, err
	}
	e.mu.Lock()
	t := e.term
	e.mu.Unlock()
	if t == nil || t.ctx.Err() != nil {
		return nil, topo.NewError(topo.NotLeader, e.prefix)
	}
	return t, nil
}

// liveTerm returns the current term if it has not ended.
func (e *nativeElection) liveTerm() *nativeTerm {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.term == nil || e.term.ctx.Err() != nil {
		return nil
	}
	return e.term
}

// Proclaim rewrites the leader key's value in one transaction guarded on
// the key still being this term's: its ModRevision equal to that of our
// last write of it (one compare, as concurrency.Election's Proclaim has
// one, on the CreateRevision), or, when that does not hold (a concurrent
// Proclaim of ours), in a second one comparing the key's CreateRevision
// with the term's token and its lease with ours (see rewrite). It
// returns NotLeader when this participant does not lead, its term ended,
// or the compare fails (the term is then ended); InvalidArgument for a
// value over MaxValueSize; Closed after Close; etcd's errors (Timeout,
// Unavailable: the value may have been written).
func (e *nativeElection) Proclaim(ctx context.Context, value []byte) error {
	if err := backendkit.CheckContext(ctx, e.prefix); err != nil {
		return err
	}
	if err := backendkit.CheckValue(e.prefix, value); err != nil {
		return err
	}
	if err := e.c.closedErr(e.prefix); err != nil {
		return err
	}
	t := e.liveTerm()
	if t == nil || t.cd.lease.lost() {
		return topo.NewError(topo.NotLeader, e.prefix)
	}
	err := e.rewrite(ctx, t.cd, value)
	if errors.Is(err, topo.LockLost) {
		t.end()
		return backendkit.Wrap(topo.NotLeader, e.prefix, err)
	}
	return err
}

// Resign ends a pending Campaign (it returns Interrupted), cancels the
// leadership context, and deletes the candidate key (compared on its
// CreateRevision), or revokes its lease when the lease is the key's own
// (or was resumed). With an ended ctx it tries for resignGrace (3 s). It
// returns nil when there is nothing to resign; the ctx's error (Timeout,
// Interrupted) or etcd's when the delete did not finish (it is then
// retried in the background while the Conn is open); Closed after the
// Conn's Close (which revoked the lease).
func (e *nativeElection) Resign(ctx context.Context) error {
	gctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		gctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), resignGrace)
		defer cancel()
	}
	e.mu.Lock()
	e.resignAll()
	e.resignCtx, e.resignAll = context.WithCancel(context.Background())
	e.mu.Unlock()
	if err := e.acquire(gctx); err != nil {
		return err
	}
	defer e.releaseSem()
	err := e.resignLocked(gctx)
	if cerr := e.c.closedErr(e.prefix); cerr != nil {
		return cerr
	}
	return err
}

func (e *nativeElection) resignLocked(ctx context.Context) error {
	e.mu.Lock()
	t, cd := e.term, e.cand
	e.term, e.cand = nil, nil
	e.mu.Unlock()
	if t != nil {
		t.mu.Lock()
		t.released = true
		t.mu.Unlock()
		t.end()
	}
	if cd == nil {
		return nil
	}
	if err := e.c.closedErr(e.prefix); err != nil {
		cd.release()
		return nil // Close revoked the lease
	}
	return e.remove(ctx, cd, false)
}

// Stop withdraws for good: pending Campaigns and WaitForLeadership return
// Interrupted, the leadership context is cancelled and the key removed
// (within 2 s; retried in the background after that). Later Campaigns
// return Interrupted. It is idempotent.
func (e *nativeElection) Stop() {
	e.stop()
	ctx, cancel := context.WithTimeout(context.Background(), defaultCleanupTimeout)
	defer cancel()
	if err := e.acquire(ctx); err != nil {
		return
	}
	defer e.releaseSem()
	_ = e.resignLocked(ctx)
}

// leaderOfKV turns the first-created key under the prefix into a Leader.
func (e *nativeElection) leaderOfKV(kv *mvccpb.KeyValue) topo.Leader {
	l := topo.Leader{ID: string(kv.Key[len(e.keyPrefix):]), Token: kv.CreateRevision}
	if len(kv.Value) > 0 {
		l.Value = bytes.Clone(kv.Value)
	}
	return l
}

// Leader returns the key under the prefix with the lowest CreateRevision
// (one linearizable read, as concurrency.Election's Leader): its name
// under the prefix as ID, its value (nil when empty) and CreateRevision
// as Token. NoLeader when the prefix holds no key; Closed after Close;
// Timeout, Interrupted, Unavailable, PermissionDenied from the read.
func (e *nativeElection) Leader(ctx context.Context) (topo.Leader, error) {
	if err := e.c.check(ctx, e.prefix); err != nil {
		return topo.Leader{}, err
	}
	resp, err := e.c.cli.Get(ctx, e.keyPrefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return topo.Leader{}, e.c.convertError(ctx, err, e.prefix)
	}
	if len(resp.Kvs) == 0 {
		return topo.Leader{}, topo.NewError(topo.NoLeader, e.prefix)
	}
	return e.leaderOfKV(resp.Kvs[0]), nil
}

// GetCurrentLeaderID returns Leader's ID, or "" when nobody leads.
func (e *nativeElection) GetCurrentLeaderID(ctx context.Context) (string, error) {
	l, err := e.Leader(ctx)
	if errors.Is(err, topo.NoLeader) {
		return "", nil
	}
	return l.ID, err
}

// Observe returns a channel that gets the current leader (Leader{} when
// the prefix holds no key) and then, from one watch of the prefix
// (resumed after transient failures from the last revision it saw,
// re-read after a compaction), the leader after every change that
// changes it or its value. Each value sent is the state at one revision
// of etcd, so a deleted (resigned, expired) key is never sent as the
// leader after its deletion was seen. The channel closes when ctx ends,
// the Conn closes, or etcd refuses the watch (PermissionDenied).
func (e *nativeElection) Observe(ctx context.Context) (<-chan topo.Leader, error) {
	c := e.c
	if err := c.check(ctx, e.prefix); err != nil {
		return nil, err
	}
	s, err := c.newStream(ctx, e.keyPrefix, true, e.prefix)
	if err != nil {
		return nil, err
	}
	get := func() (*clientv3.GetResponse, error) { return c.cli.Get(ctx, e.keyPrefix, clientv3.WithPrefix()) }
	resp, err := get()
	if err != nil {
		s.close()
		return nil, c.convertError(ctx, err, e.prefix)
	}
	s.rev = resp.Header.Revision
	keys := map[string]*mvccpb.KeyValue{}
	load := func(kvs []*mvccpb.KeyValue) {
		clear(keys)
		for _, kv := range kvs {
			keys[string(kv.Key)] = kv
		}
	}
	current := func() topo.Leader {
		var best *mvccpb.KeyValue
		for _, kv := range keys {
			if best == nil || kv.CreateRevision < best.CreateRevision {
				best = kv
			}
		}
		if best == nil {
			return topo.Leader{}
		}
		return e.leaderOfKV(best)
	}
	load(resp.Kvs)
	out := make(chan topo.Leader, watchBuffer)
	last := current()
	out <- last
	go func() {
		defer close(out)
		defer s.close()
		for {
			evs, err := s.next()
			if errors.Is(err, errCompacted) {
				resp, err := s.read(get)
				if err != nil {
					return
				}
				load(resp.Kvs)
				s.reopen(resp.Header.Revision)
			} else if err != nil {
				return
			} else {
				for _, ev := range evs {
					if ev.Type == mvccpb.DELETE {
						delete(keys, string(ev.Kv.Key))
					} else {
						keys[string(ev.Kv.Key)] = ev.Kv
					}
				}
			}
			l := current()
			if l.ID == last.ID && l.Token == last.Token && bytes.Equal(l.Value, last.Value) {
				continue
			}
			last = l
			select {
			case out <- l:
			case <-ctx.Done():
				return
			case <-c.ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// WaitForNewLeader is a view of Observe: the ID of the current leader (if
// any) and of every new term (a new key leading), without values and
// without "nobody leads".
func (e *nativeElection) WaitForNewLeader(ctx context.Context) (<-chan string, error) {
	obs, err := e.Observe(ctx)
	if err != nil {
		return nil, err
	}
	return leaderIDs(ctx, obs), nil
}

// nativeResume is what ResumeInfo returns, as JSON.
type nativeResume struct {
	Backend string `json:"backend"`
	Layout  string `json:"layout"`
	Prefix  string `json:"prefix"`
	ID      string `json:"id"`
	Key     string `json:"key"`
	Lease   int64  `json:"lease"`
	Rev     int64  `json:"create_revision"`
}

// ResumeInfo returns JSON naming the backend, the layout ("etcd-native"),
// the prefix, the id, the candidate key, its lease id and its
// CreateRevision, for ResumeNativeElection. NoNode when there is no
// candidate key, Closed after the Conn's Close.
func (e *nativeElection) ResumeInfo() ([]byte, error) {
	if err := e.c.closedErr(e.prefix); err != nil {
		return nil, err
	}
	e.mu.Lock()
	cd := e.cand
	e.mu.Unlock()
	if cd == nil {
		return nil, topo.NewError(topo.NoNode, e.prefix)
	}
	return json.Marshal(nativeResume{
		Backend: FactoryName, Layout: nativeLayout, Prefix: e.prefix, ID: e.id,
		Key: cd.key, Lease: int64(cd.lease.id), Rev: cd.rev,
	})
}

// isNativeResumeInfo reports whether info is a native election's
// ResumeInfo, for Conn.ResumeLeaderParticipation to route it here.
func isNativeResumeInfo(info []byte) bool {
	var r nativeResume
	return json.Unmarshal(info, &r) == nil && r.Backend == FactoryName && r.Layout == nativeLayout
}

// ResumeNativeElection takes back, through this Conn, the candidacy that a
// native participation (of prefix and id, typically in a process that
// restarted) described with ResumeInfo, like concurrency.ResumeElection:
// it renews the candidacy's lease once (and from then on keeps it alive
// from this Conn), checks that the key still exists with the same
// CreateRevision on that lease, and returns a participation that owns the
// key: WaitForLeadership and Campaign wait from the key's place (or
// return at once, with the same term token, if it leads), Resign and
// Stop revoke the lease (everything else the old process had on that
// lease goes with it; until then this Conn keeps all of it alive). It
// returns LockLost when the lease or key is gone; InvalidArgument for
// info that is malformed or was issued for another prefix, id, backend
// or layout, or whose key another participation of this Conn owns; the
// errors of NewNativeElection; Timeout, Interrupted, Unavailable,
// PermissionDenied from etcd.
func (c *Conn) ResumeNativeElection(ctx context.Context, prefix, id string, info []byte) (topo.LeaderParticipation, error) {
	e, err := c.newNative(prefix, id)
	if err != nil {
		return nil, err
	}
	bad := func(why string) error {
		return backendkit.Wrap(topo.InvalidArgument, prefix, errors.New("etcd2topo: resume info: "+why))
	}
	var r nativeResume
	if err := json.Unmarshal(info, &r); err != nil {
		return nil, bad(err.Error())
	}
	switch {
	case r.Backend != FactoryName || r.Layout != nativeLayout:
		return nil, bad("not a native etcd election's")
	case r.Prefix != prefix || r.ID != id:
		return nil, bad("issued for another prefix or id")
	case r.Lease <= 0 || r.Rev <= 0 || r.Key != fmt.Sprintf("%s%x", e.keyPrefix, r.Lease):
		return nil, bad("malformed key, lease or revision")
	}
	if err := c.check(ctx, prefix); err != nil {
		return nil, err
	}
	var release func()
	if !c.takeName(r.Key, &release) {
		return nil, bad("the candidacy is owned by a participation of this Conn")
	}
	l, err := c.adoptLease(ctx, clientv3.LeaseID(r.Lease), prefix)
	if err != nil {
		release()
		return nil, err
	}
	cd := &nativeCand{key: r.Key, rev: r.Rev, lease: l, own: true, release: release}
	resp, err := c.cli.Get(ctx, r.Key)
	if err != nil {
		release()
		l.markLost()
		return nil, c.convertError(ctx, err, prefix)
	}
	if len(resp.Kvs) != 1 || !cd.ours(resp.Kvs[0]) {
		release()
		l.markLost()
		return nil, topo.NewError(topo.LockLost, prefix)
	}
	cd.clusterID = resp.Header.ClusterId
	cd.saw(resp.Kvs[0].ModRevision)
	c.mu.Lock()
	if c.isClosed() {
		c.mu.Unlock()
		release()
		l.markLost()
		return nil, topo.NewError(topo.Closed, prefix)
	}
	c.leases[l] = struct{}{}
	c.mu.Unlock()
	go c.keepAlive(l)
	e.cand = cd
	return e, nil
}
