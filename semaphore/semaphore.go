// Package semaphore is a counting semaphore over any topo.Conn: up to a
// limit of concurrent holders of one semaphore, across processes, on every
// backend (etcd, ZooKeeper, Consul, memorytopo, or a custom one), built only
// from the Conn's locks and guarded transactions.
//
// # Layout
//
// A semaphore lives in a directory dir of the cell, chosen by the caller
// and used for nothing else:
//
//	dir/holders                   the admission record (JSON): the limit,
//	                              a sequence number, and the holders
//	dir/contenders/<id>/info      one per contender, describing it (JSON)
//	lock on dir/contenders/<id>   held by that contender, on its session
//	lock on dir                   the queue: held by the contender next in
//	                              line for a slot, waited on by the others
//
// Every contender first creates its info file, then queues on the lock of
// dir (the gate) and, once it holds the gate, takes the lock on its own
// contender directory, both with the semaphore's TTL: the contender lock
// lives as long as the contender's session or lease, so it says whether
// the contender is alive. The gate holder alone reads the record: it is
// admitted by one transaction that requires its own lock to be held
// (topo.IfHeld) and the record to be at the version it read
// (compare-and-set), and writes the record with itself added; then it
// releases the gate to the next contender. Two contenders that read the
// same record cannot both be admitted beyond the limit, because only one
// compare-and-set on a version wins.
//
// # Order and cost of a handover
//
// Contenders are admitted in the order they queued on the gate, which is
// the order of the Conn's own lock queue (first come, first served on the
// bundled backends; a custom backend's, as its Lock serves waiters). Only the gate holder waits for a slot (it watches the
// record); the others wait inside the gate's Lock, which wakes one waiter
// per release. So a release wakes one contender, and one handover costs
// the same number of store requests whatever the number of waiters.
// TryAcquire does not queue: it tries to be admitted at once, and may take
// a slot that freed while the gate holder was being woken.
//
// The layout is that of earlier releases plus the gate, which earlier
// releases do not take: their contenders, mixed with this release's, are
// admitted by the same compare-and-set on the same record (so the limit,
// the tokens and the probing below hold for all), but they do not queue,
// so they may be admitted ahead of this release's waiters.
//
// A holder whose session or lease ends (its process crashed, it was cut off
// from the store) keeps its place in the record until the gate holder (or
// a TryAcquire), finding the semaphore full, probes the holders' locks
// with TryLock: a lock that can be taken belongs to a contender whose
// session is gone, so that holder is removed, in the same admission
// transaction. Slots of crashed holders therefore free within their TTL
// (the store's bound on the session) plus one probe interval. A slot is
// never taken from a holder whose lock is held. A contender that crashes
// while it waits leaves the gate's queue with its session; one whose
// session ends while it holds the gate (its own lock may then be on a
// new session) gives up with LockLost, so the contender that heads the
// queue after it is the only one waiting for a slot.
//
// # Invariants
//
//   - The record never lists more holders than its limit, and every
//     contender of one semaphore must use the same limit (InvalidArgument
//     otherwise).
//   - Only an admission (by the contender itself, with its lock held)
//     adds a holder; only the holder's Unlock (once it has released the
//     holder's lock, which ends the holder's fence), or a contender
//     holding the holder's lock after a successful probe (or finding the
//     holder's info file gone, which its Unlock deletes once the record no
//     longer lists it), removes it. So a slot is never given to another
//     contender while its holder's lock, and with it IfHeld(holder), is
//     held.
//   - Each admission increments the record's sequence number, which is the
//     holder's fencing token: strictly greater for every later admission of
//     the same semaphore, for as long as dir/holders is not deleted (this
//     package never deletes it).
//   - The package writes nothing outside dir.
//
// A Semaphore is safe for concurrent use; so are the descriptors it returns.
package semaphore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/topokit/topokit/topo"
)

// DefaultProbeInterval is how often a contender that waits on a full
// semaphore probes the holders' locks when Options.ProbeInterval is zero
// and no TTL is set. With a TTL, the default is a quarter of it.
const DefaultProbeInterval = time.Second

// releaseGrace bounds the clean-up a failed acquisition does after its
// context ended.
const releaseGrace = 5 * time.Second

// Options configure a Semaphore. The zero value is valid.
type Options struct {
	// TTL is each holder's time to live: if its process dies or loses the
	// store, its slot frees about TTL later (plus ProbeInterval). Zero
	// uses the backend's default lock TTL (topo.Conn.Lock); a positive
	// TTL uses topo.Conn.LockWithTTL, which backends round up to their
	// minimum (Consul: 10 s). On ZooKeeper the TTL is in effect the
	// Conn's session timeout, shorter or longer.
	TTL time.Duration

	// ProbeInterval is how often a waiting contender probes the holders'
	// locks to find crashed holders when nothing else changes. Zero means
	// TTL/4, or DefaultProbeInterval without a TTL.
	ProbeInterval time.Duration

	// Description is stored with each holder (and shown by Holders), for
	// example "host-7 pid 1234".
	Description string
}

// Semaphore is one process's handle on a counting semaphore. Create it
// with New.
type Semaphore struct {
	conn  topo.Conn
	dir   string
	limit int
	opts  Options
}

// New returns a handle on the semaphore in dir (a directory path of conn's
// cell, not reserved: see topo.IsReserved) admitting up to limit holders.
// Nothing is written until Acquire or TryAcquire. It returns an
// InvalidArgument *topo.Error when limit is not positive or a duration is
// negative, and InvalidPath for a bad dir.
func New(conn topo.Conn, dir string, limit int, opts Options) (*Semaphore, error) {
	d, err := topo.CleanDirPath(dir)
	if err != nil {
		return nil, err
	}
	if d == "" || topo.IsReserved(d) {
		return nil, &topo.Error{Code: topo.InvalidPath, Path: dir, Err: errors.New("a semaphore needs a directory that is neither the root nor reserved")}
	}
	if limit <= 0 {
		return nil, &topo.Error{Code: topo.InvalidArgument, Path: d, Err: fmt.Errorf("semaphore limit %d: must be positive", limit)}
	}
	if opts.TTL < 0 || opts.ProbeInterval < 0 {
		return nil, &topo.Error{Code: topo.InvalidArgument, Path: d, Err: errors.New("negative semaphore TTL or probe interval")}
	}
	if opts.ProbeInterval == 0 {
		opts.ProbeInterval = DefaultProbeInterval
		if opts.TTL > 0 {
			opts.ProbeInterval = opts.TTL / 4
		}
	}
	return &Semaphore{conn: conn, dir: d, limit: limit, opts: opts}, nil
}

// Holder is one admitted holder of a semaphore, as Holders lists it.
type Holder struct {
	// ID is the holder's contender id (a random name, never reused).
	ID string `json:"id"`
	// Token is the fencing token of its admission.
	Token int64 `json:"token"`
	// Description is the holder's Options.Description.
	Description string `json:"description,omitempty"`
}

// record is the content of dir/holders.
type record struct {
	Limit   int      `json:"limit"`
	Seq     int64    `json:"seq"`
	Holders []Holder `json:"holders"`
}

func (s *Semaphore) recordPath() string            { return s.dir + "/holders" }
func (s *Semaphore) contenderDir(id string) string { return s.dir + "/contenders/" + id }
func (s *Semaphore) infoPath(id string) string     { return s.contenderDir(id) + "/info" }

// read returns the record and its version (nil when it does not exist).
func (s *Semaphore) read(ctx context.Context) (record, topo.Version, error) {
	data, v, err := s.conn.Get(ctx, s.recordPath())
	if topo.IsErrType(err, topo.NoNode) {
		return record{Limit: s.limit}, nil, nil
	}
	if err != nil {
		return record{}, nil, err
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return record{}, nil, &topo.Error{Code: topo.InvalidArgument, Path: s.recordPath(), Err: fmt.Errorf("not a semaphore record: %w", err)}
	}
	if r.Limit != s.limit {
		return record{}, nil, &topo.Error{Code: topo.InvalidArgument, Path: s.recordPath(),
			Err: fmt.Errorf("the semaphore's limit is %d, this handle uses %d: every contender must use the same limit", r.Limit, s.limit)}
	}
	return r, v, nil
}

// Holders returns the semaphore's admitted holders, in admission order.
// It may list holders whose session has ended but whose slot no
// contender has reclaimed yet, and a holder whose Unlock has released its
// lock but not yet removed it. It returns the store's errors, and
// InvalidArgument when the record was written with another limit.
func (s *Semaphore) Holders(ctx context.Context) ([]Holder, error) {
	r, _, err := s.read(ctx)
	return r.Holders, err
}

// Acquire blocks until this process holds one of the semaphore's slots, or
// ctx ends (Timeout or Interrupted, leaving nothing behind). Callers are
// admitted in the order they queued (first come, first served, across
// processes); only the caller next in line reads and watches the record,
// the others wait in the queue of dir's lock (see the package doc). The returned
// descriptor's Token is the admission's fencing token; Done closes when the
// slot is released or its lock lost; Unlock releases it; IfHeld(descriptor)
// guards a transaction on the holder's lock. A read of the record that
// fails with Unavailable while the caller waits is tried again after the
// probe interval, as a lock's wait rides such a blip out. Other errors are
// the store's, InvalidArgument when the semaphore's record has another
// limit, and
// LockLost when the contender's own lock, or its place at the head of the
// queue (the lock of dir, on the session its Conn had when it got there),
// was lost while it waited for a slot: a contender never waits on as the
// head beside the one that heads the queue after it (one whose place went
// just as a slot was free may still be admitted at once).
func (s *Semaphore) Acquire(ctx context.Context) (topo.LockDescriptor, error) {
	return s.acquire(ctx, false)
}

// TryAcquire is Acquire without waiting and without queueing: when every
// slot is held by a live holder it returns a NodeExists *topo.Error at once
// (after probing the holders' locks) and leaves nothing behind. It may take
// a slot that a release has just freed for the contender next in line, if
// it gets there first.
func (s *Semaphore) TryAcquire(ctx context.Context) (topo.LockDescriptor, error) {
	return s.acquire(ctx, true)
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Semaphore) acquire(ctx context.Context, try bool) (ld topo.LockDescriptor, err error) {
	if cerr := ctx.Err(); cerr != nil {
		code := topo.Interrupted
		if errors.Is(cerr, context.DeadlineExceeded) {
			code = topo.Timeout
		}
		return nil, &topo.Error{Code: code, Path: s.dir, Err: cerr}
	}
	id := newID()
	info, err := json.Marshal(Holder{ID: id, Description: s.opts.Description})
	if err != nil {
		return nil, err
	}
	// The gate goes once the contender is admitted or gives up. Whatever
	// fails from here on, the contender's info file and lock go too:
	// that includes a Create whose answer was lost or came after ctx ended
	// (Interrupted, Timeout, Unavailable), which the store may have
	// applied. The id is this call's own, so the Delete removes nothing
	// of another contender's.
	var gate, lock topo.LockDescriptor
	defer func() {
		if err == nil && gate == nil {
			return
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseGrace)
		defer cancel()
		if gate != nil {
			// Admitted or not, the next contender in line goes on.
			_ = gate.Unlock(cctx)
		}
		if err == nil {
			return
		}
		if lock != nil {
			_ = lock.Unlock(cctx)
		}
		_ = s.conn.Delete(cctx, s.infoPath(id), nil)
	}()
	if _, err := s.conn.Create(ctx, s.infoPath(id), info); err != nil {
		return nil, err
	}
	desc := "semaphore contender " + id
	if s.opts.Description != "" {
		desc += ": " + s.opts.Description
	}
	if !try {
		// Queue behind the contenders already waiting: only the head of
		// the queue reads and watches the record.
		if gate, err = s.lock(ctx, s.dir, desc); err != nil {
			gate = nil
			return nil, err
		}
	}
	if lock, err = s.lock(ctx, s.contenderDir(id), desc); err != nil {
		lock = nil
		return nil, err
	}
	for {
		r, v, err := s.read(ctx)
		if err != nil {
			if err = s.rideOut(ctx, err, try, lock, gate); err == nil {
				continue
			}
			return nil, err
		}
		holders := r.Holders
		var probes []topo.LockDescriptor
		var infos []string
		if len(holders) >= s.limit {
			holders, infos, probes, err = s.prune(ctx, holders)
			if err != nil {
				if err = s.rideOut(ctx, err, try, lock, gate); err == nil {
					continue
				}
				return nil, err
			}
		}
		if len(holders) < s.limit {
			next := record{Limit: s.limit, Seq: r.Seq + 1}
			next.Holders = append(slices.Clone(holders), Holder{ID: id, Token: next.Seq, Description: s.opts.Description})
			data, err := json.Marshal(next)
			if err != nil {
				releaseProbes(ctx, probes)
				return nil, err
			}
			ops := []topo.TxnOp{topo.IfHeld(lock)}
			if v == nil {
				ops = append(ops, topo.CreateOp(s.recordPath(), data))
			} else {
				ops = append(ops, topo.UpdateOp(s.recordPath(), data, v))
			}
			for _, d := range infos {
				ops = append(ops, topo.DeleteOp(s.infoPath(d), nil))
			}
			_, err = s.conn.Txn(ctx, ops...)
			releaseProbes(ctx, probes)
			var te *topo.TxnError
			switch {
			case err == nil:
				return newPermit(s, id, next.Seq, lock), nil
			case errors.As(err, &te) && te.Index == 1 && (topo.IsErrType(err, topo.BadVersion) || topo.IsErrType(err, topo.NodeExists) || topo.IsErrType(err, topo.NoNode)):
				continue // another contender changed the record first
			case errors.As(err, &te) && te.Index > 1 && topo.IsErrType(err, topo.NoNode):
				continue // a dead holder's info file was already removed
			default:
				return nil, err
			}
		}
		releaseProbes(ctx, probes)
		if try {
			return nil, &topo.Error{Code: topo.NodeExists, Path: s.dir, Err: fmt.Errorf("all %d slots of the semaphore are held", s.limit)}
		}
		if err := s.waitChange(ctx, v, lock, gate); err != nil {
			return nil, err
		}
	}
}

// lock takes the lock of dir with the semaphore's TTL.
func (s *Semaphore) lock(ctx context.Context, dir, desc string) (topo.LockDescriptor, error) {
	if s.opts.TTL > 0 {
		return s.conn.LockWithTTL(ctx, dir, desc, s.opts.TTL)
	}
	return s.conn.Lock(ctx, dir, desc)
}

// prune probes the locks of holders and returns the live ones, the ids of
// the dead ones whose info file is to be deleted with their removal from
// the record, and the probe locks taken on those dead ones' contender
// directories (to be released once the record no longer lists them). A
// holder whose contender directory holds no info file is dead too, with
// nothing to delete: it is left out of live and of infos.
func (s *Semaphore) prune(ctx context.Context, holders []Holder) (live []Holder, infos []string, probes []topo.LockDescriptor, err error) {
	for _, h := range holders {
		probe, err := s.conn.TryLock(ctx, s.contenderDir(h.ID), "semaphore probe")
		if topo.IsErrType(err, topo.InvalidArgument) {
			// The contender directory is taken for a file: on ZooKeeper,
			// an empty directory znode that its clean-up has not removed
			// yet (its "locks" container reaped first) reads as an empty
			// file. Without its info file, h is gone (below); else the
			// error stands.
			if _, _, gerr := s.conn.Get(ctx, s.infoPath(h.ID)); topo.IsErrType(gerr, topo.NoNode) {
				err = gerr
			}
		}
		switch {
		case err == nil:
			// Nobody holds h's lock: its session is gone.
			infos = append(infos, h.ID)
			probes = append(probes, probe)
		case topo.IsErrType(err, topo.NodeExists):
			live = append(live, h)
		case topo.IsErrType(err, topo.NoNode):
			// Its info file is gone: a holder's Unlock removes it from
			// the record first (so the admission's compare-and-set on
			// the record fails and the record is read again), and an
			// acquisition that failed after its admission was applied
			// deletes it too. It cannot be alive, and there is nothing
			// to delete: a delete of the absent file would fail every
			// admission.
		default:
			releaseProbes(ctx, probes)
			return nil, nil, nil, err
		}
	}
	return live, infos, probes, nil
}

func releaseProbes(ctx context.Context, probes []topo.LockDescriptor) {
	if len(probes) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseGrace)
	defer cancel()
	for _, p := range probes {
		_ = p.Unlock(cctx)
	}
}

// rideOut decides whether Acquire's wait goes on after err, a read's
// error: an Unavailable one (the store out of reach for a moment), while
// the contender waits (not for TryAcquire), is ridden out as a lock's
// wait rides such a blip out: rideOut waits the probe interval and
// returns nil (read again). It returns err itself for any other error,
// and ctx's error, or LockLost, when ctx ends or the contender's lock or
// its place at the head of the queue is lost meanwhile.
func (s *Semaphore) rideOut(ctx context.Context, err error, try bool, lock, gate topo.LockDescriptor) error {
	if try || !topo.IsErrType(err, topo.Unavailable) || ctx.Err() != nil {
		return err
	}
	var gateDone <-chan struct{}
	if gate != nil {
		gateDone = gate.Done()
	}
	t := time.NewTimer(s.opts.ProbeInterval)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx, s.dir)
	case <-lock.Done():
		return topo.NewError(topo.LockLost, s.dir)
	case <-gateDone:
		return errQueueLost(s.dir)
	}
}

// waitChange returns when the record's version differs from v or after
// the probe interval; it returns ctx's error when ctx ends, and LockLost
// when lock (the waiting contender's own) or gate (its place at the head
// of the queue; nil for TryAcquire, which does not queue) is lost.
func (s *Semaphore) waitChange(ctx context.Context, v topo.Version, lock, gate topo.LockDescriptor) error {
	wctx, cancel := context.WithTimeout(ctx, s.opts.ProbeInterval)
	defer cancel()
	cur, changes, err := s.conn.Watch(wctx, s.recordPath())
	if err != nil {
		if ctx.Err() != nil {
			return ctxErr(ctx, s.dir)
		}
		if topo.IsErrType(err, topo.NoNode) || topo.IsErrType(err, topo.Timeout) || topo.IsErrType(err, topo.Interrupted) {
			return nil
		}
		return s.rideOut(ctx, err, false, lock, gate)
	}
	defer func() {
		cancel()
		for range changes {
		}
	}()
	if v == nil || cur.Version.String() != v.String() {
		return nil
	}
	// The gate's Done is asked for only here, where the contender waits:
	// an admission at once costs nothing more (etcd watches a lock's
	// entry from the first call of its Done). The session that held the
	// gate may have ended before the contender's own lock, which then
	// went on a new session: the next contender heads the queue, and
	// this one must not wait on as a second head.
	var gateDone <-chan struct{} // nil: never
	if gate != nil {
		gateDone = gate.Done()
	}
	select {
	case <-changes:
	case <-wctx.Done():
	case <-lock.Done():
		return topo.NewError(topo.LockLost, s.dir)
	case <-gateDone:
		return errQueueLost(s.dir)
	}
	if ctx.Err() != nil {
		return ctxErr(ctx, s.dir)
	}
	return nil
}

// errQueueLost is Acquire's LockLost when the contender lost its place
// at the head of the queue (the lock of dir) while it waited for a slot.
func errQueueLost(dir string) error {
	return &topo.Error{Code: topo.LockLost, Path: dir, Err: errors.New("the contender's place at the head of the semaphore's queue was lost (its session ended) while it waited for a slot")}
}

func ctxErr(ctx context.Context, path string) error {
	code := topo.Interrupted
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		code = topo.Timeout
	}
	return &topo.Error{Code: code, Path: path, Err: ctx.Err()}
}

// permit is a held slot.
type permit struct {
	s     *Semaphore
	id    string
	token int64
	lock  topo.LockDescriptor

	mu       sync.Mutex
	released bool
	done     chan struct{}
	doneOnce sync.Once
	// lockDone is lock.Done() (nil: never closes), which Done also reads
	// itself: the goroutine that closes done when it closes may run later
	// than a contender admitted to the freed slot.
	lockDone <-chan struct{}
}

func newPermit(s *Semaphore, id string, token int64, lock topo.LockDescriptor) *permit {
	p := &permit{s: s, id: id, token: token, lock: lock, done: make(chan struct{})}
	if ld := lock.Done(); ld != nil {
		p.lockDone = ld
		go func() {
			select {
			case <-ld:
				p.closeDone()
			case <-p.done:
			}
		}()
	}
	return p
}

func (p *permit) closeDone() { p.doneOnce.Do(func() { close(p.done) }) }

// Token returns the admission's fencing token.
func (p *permit) Token() int64 { return p.token }

// Done closes when the slot is released or its holder's lock is lost. A
// call after the lock's own Done closed returns a closed channel.
func (p *permit) Done() <-chan struct{} {
	select {
	case <-p.lockDone:
		p.closeDone()
	default:
	}
	return p.done
}

// Unwrap returns the holder's own lock, so that IfHeld(permit) guards a
// transaction on it.
func (p *permit) Unwrap() topo.Fence { return p.lock }

// Check returns nil while the slot is held: the holder's lock is held and
// the record lists it. Interrupted after Unlock; LockLost once the lock was
// lost or the holder removed.
func (p *permit) Check(ctx context.Context) error {
	p.mu.Lock()
	released := p.released
	p.mu.Unlock()
	if released {
		return topo.NewError(topo.Interrupted, p.s.dir)
	}
	if err := p.lock.Check(ctx); err != nil {
		return err
	}
	r, _, err := p.s.read(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(r.Holders, func(h Holder) bool { return h.ID == p.id }) {
		p.closeDone()
		return topo.NewError(topo.LockLost, p.s.dir)
	}
	return nil
}

// Unlock releases the slot: it releases the holder's lock, which ends the
// holder's fence (IfHeld(descriptor) fails from then on), then removes the
// holder from the record and deletes its info file. The lock goes first
// so that no contender is admitted to the slot while a write guarded by
// this holder could still be applied. A second Unlock returns
// Interrupted; LockLost when the holder's lock had been lost (the slot is
// freed anyway when it is still listed). When ctx has ended (also before
// the call) or the store fails while releasing the lock, Unlock returns
// that error (Interrupted, Timeout, Unavailable, ...) after trying the
// release again within a few seconds' grace, and leaves the record alone:
// the slot then frees when a contender's probe finds the lock free, as for
// a crashed holder (see the package doc), since no second Unlock can try
// again. When the store fails after the lock was released, Unlock returns
// that error and the slot frees the same way. Closed when the Conn was
// closed (which released the lock).
func (p *permit) Unlock(ctx context.Context) error {
	p.mu.Lock()
	if p.released {
		p.mu.Unlock()
		return topo.NewError(topo.Interrupted, p.s.dir)
	}
	p.released = true
	p.mu.Unlock()
	defer p.closeDone()
	s := p.s
	var lost bool
	switch err := p.lock.Unlock(ctx); {
	case err == nil:
	case topo.IsErrType(err, topo.LockLost):
		lost = true // the store dropped the lock: free the slot if listed
	case topo.IsErrType(err, topo.Closed):
		return err
	default:
		// The release may not have happened: try again within a grace
		// (Interrupted when the first attempt did release it), and leave
		// the slot to a probe, which finds it once the lock is free.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseGrace)
		defer cancel()
		_ = p.lock.Unlock(cctx)
		return err
	}
	for {
		r, v, err := s.read(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(r.Holders, func(h Holder) bool { return h.ID == p.id })
		if i < 0 {
			// A contender's probe found the lock free (ours released, or
			// lost) and removed us, with the info file.
			break
		}
		r.Holders = slices.Delete(slices.Clone(r.Holders), i, i+1)
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = s.conn.Txn(ctx, topo.UpdateOp(s.recordPath(), data, v))
		if topo.IsErrType(err, topo.BadVersion) {
			continue
		}
		if err != nil {
			return err
		}
		break
	}
	if err := s.conn.Delete(ctx, s.infoPath(p.id), nil); err != nil && !topo.IsErrType(err, topo.NoNode) {
		return err
	}
	if lost {
		return topo.NewError(topo.LockLost, s.dir)
	}
	return nil
}
