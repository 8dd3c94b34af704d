package claims

import (
	"context"
	"errors"
	"time"
)

// Queue names one queue of entries: the lock of a directory, or an
// election.
type Queue struct {
	// Path is the lock's canonical directory ("" for the root) or the
	// election's canonical name: what errors name.
	Path string
	// Election is true for an election's queue (candidates), false for a
	// lock's.
	Election bool
	// Native marks a queue in a layout variant of the driver's own (etcd:
	// an election under a raw etcd-native prefix, laid out as etcd's
	// client/v3/concurrency lays out its elections, see
	// Engine.Participate). The engine does not interpret it.
	Native bool
}

// Entry is one entry of a queue as the store has it.
type Entry struct {
	// Token is the store's order key of the entry, fixed at its creation:
	// within one queue, every later entry has a greater one. It is the
	// claim's fencing token (topo.Fence.Token), so it must be positive.
	Token int64
	// Key is the driver's name of the entry in the store (etcd: the key;
	// ZooKeeper: the node path), opaque to the engine.
	Key string
	// Session is the store's name of the entry's session or lease, as
	// topo.LockHeldError reports it ("" if the store has none).
	Session string
	// Contents is a lock entry's description, or a candidate's id.
	Contents string
	// Value is a candidate's published value, and ValueRev a number that
	// changes with every change of it (both set only by Driver.Head).
	Value    []byte
	ValueRev int64
	// Created is when the store created the entry, by the store's own
	// clock; zero where the driver does not say. Only Describer.Describe
	// sets it (ZooKeeper: the znode's ctime), for Engine.Inspect; the
	// engine never reads it.
	Created time.Time
	// Granted says that the store has granted the entry already (a
	// driver's Create that took a free store key at once, Acquire,
	// Resume): the engine waits no more for it, and calls no Acquire for
	// it. A driver whose queue order alone grants sets it only when
	// Create's own request showed the new entry heading its queue (etcd:
	// nothing older in it), since no entry can come ahead of it later.
	Granted bool
	// Ref is the driver's own handle on the entry (memorytopo: the entry
	// itself), opaque to the engine, which hands it back unchanged.
	Ref any
}

// CreateOptions say how Driver.Create creates an entry.
type CreateOptions struct {
	// Exclusive asks Create to fail with a *BusyError naming the head, and
	// leave no entry, when the queue has any other entry (TryLock). One
	// atomic request is best (the template); a driver may instead create
	// its entry and delete it again when another is ahead (etcd,
	// ZooKeeper), since an entry that is not first is never granted.
	Exclusive bool
	// RequireFiles asks Create to fail, and create nothing, when no file
	// lies below the lock's directory (Lock, TryLock, LockWithTTL; not
	// LockName), with the error of backendkit.LockNeedsFiles for
	// Queue.Path: InvalidArgument when the directory is itself a file,
	// NoNode otherwise. Only for lock queues.
	RequireFiles bool
	// TTL is LockWithTTL's ttl (0 otherwise): a driver whose store has
	// per-entry leases may bound the entry's life by it.
	TTL time.Duration
	// Value is a candidate's initial published value (Campaign), nil for
	// none; it is published with the entry, in the same request.
	Value []byte
}

// Driver is what one store provides to the engine. Each method is one
// request (or one watch) to the store; none holds engine state. The
// engine calls it from many goroutines at once: it must be safe for
// concurrent use. Every error it returns goes through MapError before the
// engine returns it, except those the engine interprets: *BusyError and
// ErrNotHeld.
type Driver interface {
	// Create adds a new entry to q, on the Conn's current session (opening
	// one when there is none or it ended), in one request, and returns it
	// with that session. The entry's token is greater than every token q
	// had before. With opts.Exclusive it fails with *BusyError naming the
	// head when q has another entry; with opts.RequireFiles, with
	// backendkit.LockNeedsFiles's error when no file is below q.Path (see
	// CreateOptions). Either way it creates nothing then.
	Create(ctx context.Context, q Queue, contents string, opts CreateOptions) (Entry, *Session, error)

	// List returns q's entries, oldest (lowest token) first, in one read.
	List(ctx context.Context, q Queue) ([]Entry, error)

	// WaitGone blocks until the entry e of q is gone from the store (it
	// returns nil at once if it already is), or ctx ends (it returns
	// ctx's error). It watches e alone: no other entry's change wakes it.
	WaitGone(ctx context.Context, q Queue, e Entry) error

	// Delete removes e from q only while its session s still holds it, in
	// one request. It returns ErrNotHeld when e is gone or s ended. The
	// engine calls it for every claim released or given up, but not for
	// one it finds lost as its wait ends (lost as it was granted: the
	// wait returns LockLost without withdrawing it, and such a Lock
	// leaves no descriptor to unlock), nor for a lost lock never
	// unlocked: a driver that tidies up after an entry deleted behind its
	// claim's back (ZooKeeper: the lock's emptied directory) does so when
	// it sees the deletion, not only in Delete.
	Delete(ctx context.Context, q Queue, s *Session, e Entry) error

	// Held reports, in one read, whether e still heads q on its live
	// session s: the check behind Fence.Check.
	Held(ctx context.Context, q Queue, s *Session, e Entry) (bool, error)

	// Head returns q's head with its published value (Entry.Value and
	// ValueRev), ok false when q is empty, in one read. With watch, it
	// also returns a channel closed after the next change of q or of its
	// head's value (Observe); without, changed is nil.
	Head(ctx context.Context, q Queue, watch bool) (head Entry, ok bool, changed <-chan struct{}, err error)

	// SetValue replaces the published value of e, in one request guarded
	// in the store on e still being in q on its live session s. e need
	// not head q: Proclaim calls it for a leader, WaitForLeadership and
	// Campaign for a candidate that keeps its candidacy. It returns
	// ErrNotHeld when the guard fails.
	SetValue(ctx context.Context, q Queue, s *Session, e Entry, value []byte) error

	// ResumeInfo describes e on s, for Resume, as opaque bytes.
	ResumeInfo(q Queue, s *Session, e Entry) ([]byte, error)

	// Resume takes back the candidacy info describes (from ResumeInfo) in
	// election q for id: it adopts its session (this Conn now ends it)
	// and returns the entry and the session as this Conn sees it. The
	// holder it was taken from must be told (Session.LoseEntry). The
	// adopted session ends with the resumed participation: Delete of its
	// entry (Stop, Resign) ends the session in the store too, so that
	// every other entry the earlier holder had on it goes at once
	// (conformance LeaderValues/ResumeEndStop, ResumeEndResign). It
	// returns ErrNotHeld when the session or the entry is gone, and an
	// InvalidArgument *topo.Error for info that is malformed or names
	// another store, election or id. A candidacy on the Conn's own live
	// session adopts nothing: its Delete removes the entry alone and
	// leaves the session and the Conn's other claims on it (conformance
	// LeaderValues/ResumeOwnSession).
	Resume(ctx context.Context, q Queue, id string, info []byte) (Entry, *Session, error)

	// MapError maps a store error for path onto a *topo.Error (see
	// backendkit.MapError; ctx may be nil).
	MapError(ctx context.Context, err error, path string) error
}

// Acquirer is an optional step of a Driver whose store decides who holds
// by something besides the queue (Consul: one key per lock, which Vitess
// acquires too, without queueing). When the Driver implements it, the
// engine calls Acquire once the claim's entry heads its queue, before it
// grants: Acquire blocks until the store grants e on its session s (or
// ctx ends: ctx's error), removes e from the queue (so the next entry
// heads it), and returns the granted entry, Granted set. That entry is the
// claim's from then on: its Token is the fencing token, and Delete, Held,
// SetValue, ResumeInfo and Monitor get it. ErrNotHeld means e or s is
// gone (the claim is then lost).
//
// ctx ends when the caller's context does, when the claim ends (Stop,
// Resign, a Lock given up; lost) and when the engine closes. A driver
// that sends its taking request detached from ctx (consultopo) checks
// ctx right before each send, and once it has ended sends nothing and
// returns ctx's error: sent then, the request would take the store's key
// for a claim nobody holds any more.
type Acquirer interface {
	Acquire(ctx context.Context, q Queue, s *Session, e Entry) (Entry, error)
}

// Monitor is an optional part of a Driver whose store can take a granted
// entry away while its session lives (Consul: a key deleted or written by
// another client). The engine calls Monitor once per claim: for a term
// at its leader's first look (a method of its leadership context, Term,
// Proclaim), after a Held read that finds it still held, or when it is
// resumed; for a lock on the first call of its Done. Monitor returns at once; until done closes it watches e in the
// background and, when the store shows e no longer held, ends the claim
// with s.LoseEntry(e.Key, e.Token).
type Monitor interface {
	Monitor(q Queue, s *Session, e Entry, done <-chan struct{})
}

// ErrNotHeld is what Delete, SetValue and Resume (and Acquire) return when
// the entry is gone or its session ended. The engine finds it with
// errors.Is, so a driver may wrap it; it does not go through MapError.
var ErrNotHeld = errors.New("claims: the entry is gone or its session ended")

// BusyError is what Create with Exclusive returns when the queue is not
// empty: Head is its head, the holder TryLock names. The engine finds it
// with errors.As, so a driver may wrap it; it does not go through
// MapError.
type BusyError struct{ Head Entry }

// Error implements error.
func (e *BusyError) Error() string { return "claims: the queue is not empty" }
