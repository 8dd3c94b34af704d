package topo

import (
	"context"
	"time"
)

// Conn is one connection to one cell's store, rooted at the cell's root.
// All paths are relative to that root; "a/b" and "/a/b" name the same file.
// Every method validates its path with CleanFilePath, CleanDirPath or
// CleanPrefix first and returns InvalidPath (writing nothing) on a bad one;
// every method honours its context, returning Timeout when the deadline
// passes and Interrupted when it is cancelled; after Close every method
// returns Closed. Implementations are safe for concurrent use.
//
// Files hold opaque bytes (at most MaxValueSize) and carry a Version that
// changes on every write. Directories exist implicitly while a file is below
// them.
type Conn interface {
	// ListDir lists the entries directly under dirPath, sorted by name.
	// Intermediate directories appear as TypeDirectory entries, a name that
	// is a file with files below it too. Type and Ephemeral are filled only
	// when full is true; lock and election entries (see Lock,
	// NewLeaderParticipation) are Ephemeral, and so is a directory with
	// only such entries below it (a locked directory's "locks", "elections"
	// and an election's directory while only candidates are below it).
	// It returns NoNode when nothing is under dirPath.
	ListDir(ctx context.Context, dirPath string, full bool) ([]DirEntry, error)

	// Create creates filePath holding contents and returns its version.
	// It returns NodeExists if the file exists. Missing parent directories
	// are created.
	Create(ctx context.Context, filePath string, contents []byte) (Version, error)

	// Update writes contents to filePath. With a nil version the write is
	// unconditional and creates the file if it is absent. With a non-nil
	// version it is a compare-and-set: BadVersion if the file's version
	// differs, NoNode if the file is absent. It returns the new version.
	Update(ctx context.Context, filePath string, contents []byte, version Version) (Version, error)

	// Get returns the contents and version of filePath, or NoNode.
	Get(ctx context.Context, filePath string) ([]byte, Version, error)

	// GetVersion returns the contents filePath held at the given version (a
	// value previously returned as that file's Version, as an int64). It
	// returns NoNode if the file never held that version (or does not exist),
	// Compacted if the store discarded that history, and NoImplementation on
	// stores that keep no history (ZooKeeper, Consul).
	GetVersion(ctx context.Context, filePath string, version int64) ([]byte, error)

	// List returns every file whose canonical path starts with
	// filePathPrefix, a plain string prefix ("a/b" matches "a/b", "a/bc" and
	// "a/b/c"), each with its own version, sorted by path. Lock and election
	// entries are not files and are not listed. It returns NoNode when no file
	// matches.
	List(ctx context.Context, filePathPrefix string) ([]KVInfo, error)

	// Delete deletes filePath. A nil version deletes unconditionally; a
	// non-nil one is a compare-and-set (BadVersion if stale). It returns
	// NoNode if the file is absent. Parent directories left empty disappear
	// from their parents' listings.
	Delete(ctx context.Context, filePath string, version Version) error

	// Lock takes the exclusive lock on dirPath, storing contents (a
	// description of the holder) with it, and blocks until it is held.
	// dirPath must be a directory that holds at least one file (at any
	// depth): it returns InvalidArgument if dirPath is a file with no file
	// below it (lock its directory, or use LockName), and NoNode if it is
	// a directory with no file (LockName locks any name), both worded by
	// backendkit.LockNeedsFiles and identical on every backend; a file
	// that has files below it is also a directory and is locked like one.
	// contents is at most MaxValueSize bytes (InvalidArgument); Consul
	// refuses above about 380 KiB, its transaction body limit
	// (InvalidArgument, nothing written: docs/layout-consul.md).
	// It returns Timeout when ctx's deadline
	// passes and Interrupted when ctx is cancelled first; ctx bounds only the
	// wait: the lock stays held after ctx ends, until Unlock or until the
	// store drops it (session or lease loss). The lock's time to live is the
	// backend's default (see each backend's options).
	Lock(ctx context.Context, dirPath, contents string) (LockDescriptor, error)

	// LockWithTTL is Lock with a time to live: if the holder stops renewing
	// (its process dies or it loses the store), the lock lapses about ttl
	// later. ttl must be positive (InvalidArgument); backends round it up to
	// their minimum (Consul: 10 s); on ZooKeeper it is in effect the
	// session timeout, whatever the ttl (TTL znodes are not used). dirPath is checked as for Lock (InvalidArgument
	// for a file, NoNode for a directory without files).
	LockWithTTL(ctx context.Context, dirPath, contents string, ttl time.Duration) (LockDescriptor, error)

	// LockName takes a named lock at dirPath that, unlike Lock, does not
	// require dirPath to exist. It uses a long time to live, for locks held
	// across long operations.
	LockName(ctx context.Context, dirPath, contents string) (LockDescriptor, error)

	// TryLock takes the lock on dirPath like Lock, but fails fast with
	// NodeExists while another holder has it instead of waiting behind it.
	// dirPath is checked as for Lock (InvalidArgument for a file, NoNode
	// for a directory without files).
	TryLock(ctx context.Context, dirPath, contents string) (LockDescriptor, error)

	// Watch returns the current value of filePath (NoNode if absent, with no
	// channel) and a channel of later changes. A delete sends a WatchData with
	// Err NoNode and closes the channel; cancelling ctx sends Interrupted and
	// closes it; Close on the Conn sends Interrupted and closes it. Rapid
	// changes may be coalesced, but the last value sent is always the latest,
	// and a deletion is never coalesced away: a file deleted and re-created
	// meanwhile (as across a partition) ends the channel with NoNode,
	// not a change to the new file's value.
	// The channel must be drained until it closes.
	Watch(ctx context.Context, filePath string) (current *WatchData, changes <-chan *WatchData, err error)

	// WatchRecursive returns the current value of every file whose path
	// starts with prefix (a plain string prefix, as in List), each with its
	// own version, and a channel of per-file events: a change carries the new
	// contents, a delete carries Err NoNode (the channel stays open). Files
	// created under prefix are reported as changes. Rapid changes of a file
	// may be coalesced, but never away from a deletion: a file deleted and
	// created again is reported deleted, then with its new value.
	// Cancelling ctx, or Close, sends Interrupted and closes the channel.
	// While the watch runs no event is lost: each file's latest value, or
	// its deletion, is sent in time. Events not yet sent when ctx is
	// cancelled or the Conn closes are dropped: Interrupted comes at once.
	WatchRecursive(ctx context.Context, prefix string) ([]*WatchDataRecursive, <-chan *WatchDataRecursive, error)

	// Txn applies a transaction: ops, in order, are conditions (IfVersion,
	// IfAbsent, IfPresent, IfHeld) and writes (CreateOp, UpdateOp,
	// DeleteOp). It is all or nothing: either every condition holds and
	// every write is applied, as one atomic store operation in one round
	// trip, or nothing is written. It returns, for each op, the new
	// version of a CreateOp or UpdateOp and nil for the others.
	//
	// Every condition, and every implied condition of a write, is evaluated
	// against the state before the transaction: an op never sees the
	// writes of the ops before it (so IfPresent(p) after CreateOp(p) fails
	// when p was absent). A condition that does not hold (including the
	// implied conditions of CreateOp, and of UpdateOp and DeleteOp with a
	// version) gives a *TxnError naming the first failing op by index, wrapping a *Error
	// with NodeExists, NoNode, BadVersion or LockLost. Bad input is found
	// before anything is sent: an empty op list, or more ops than the
	// store takes in one transaction (each backend documents its limit),
	// is an InvalidArgument *Error; a malformed op (bad or reserved path,
	// oversized contents, bad or missing version, nil or foreign Fence,
	// two writes of one path) is a *TxnError wrapping InvalidPath or
	// InvalidArgument. Unavailable means the outcome is unknown: the store
	// may have applied the transaction; so do Timeout and Interrupted when
	// ctx ended during the call, and Closed when the Conn was closed during
	// it. ResourceExhausted means the store refused it and nothing was
	// applied, so it is safe to send again (a quota, or zk2topo's Txn
	// losing every attempt to concurrent writers: zk2topo.ErrTxnContention).
	Txn(ctx context.Context, ops ...TxnOp) ([]Version, error)

	// NewLeaderParticipation joins the leader election called name (a single
	// path segment, or a path) as the participant id. It returns
	// InvalidArgument for an empty name or id, or an id larger than
	// MaxValueSize (Consul's WaitForLeadership and Campaign refuse ids
	// above about 380 KiB with InvalidArgument, as Lock's contents).
	// Nothing happens in the store until WaitForLeadership is called.
	NewLeaderParticipation(name, id string) (LeaderParticipation, error)

	// ResumeLeaderParticipation takes back a candidacy that an earlier
	// participation (typically in a process that restarted) described with
	// ResumeInfo, for the election name and participant id it was created
	// with. While that candidacy's session or lease is alive, the returned
	// participation owns its entry from then on: it keeps the entry's place
	// in the queue (and leadership, if it led: WaitForLeadership or
	// Campaign then return at once, with the same term and Token), keeps
	// the session or lease alive, and Stop or Resign remove the entry. It
	// returns LockLost when the session or lease has already ended (the
	// entry is gone), InvalidArgument for info that is malformed or was
	// issued for another election, id or backend, and the errors of
	// NewLeaderParticipation.
	//
	// What is adopted is the whole session or lease, not the entry alone
	// (etcd: the lease; ZooKeeper: the session, which the server moves to
	// this Conn's new client; Consul: the session; memorytopo: the
	// lease). Whatever else the earlier participant's Conn had on it (its
	// Lock and TryLock entries, its other candidacies) stays in the store
	// while the resumed participation lives, so nobody else gets those
	// locks or leads those elections meanwhile. The resumed
	// participation's Stop or Resign end the adopted session or lease
	// (etcd: revoked; ZooKeeper: closed; Consul: destroyed; memorytopo:
	// revoked), and every entry on it goes at once: the locks and
	// elections pass on without waiting for this Conn's Close or for a
	// TTL (Campaign again after Resign campaigns on this Conn's own
	// session). This Conn's Close or the session's expiry end it too.
	//
	// Precondition, checked by nothing: the earlier participation's
	// process must be gone, that is exited (or crashed) without closing
	// its Conn, never to use that Conn again. (A process that closed its
	// Conn ended the session with it: Resume then returns LockLost.) If
	// the earlier process still runs, what happens differs per backend,
	// and is never what you want: memorytopo (and the templatetopo
	// example) take the resumed candidacy from it (its term ends,
	// LockLost); on etcd and Consul nothing tells it, and both it and the
	// resumed participation act as leader of the same term, Check and
	// IfHeld passing for both (two leaders), until the resumed
	// participation's end ends the session; on ZooKeeper its client,
	// reconnecting with the session, takes the session back from this
	// Conn's client, which takes it back in turn. With the earlier process
	// gone, its claims on the session never share a holder: until the
	// end, a backend may still report them held (etcd, Consul: they are
	// in the store on a live session) or already LockLost (memorytopo:
	// the lease is no longer that Conn's); from the end on, Check and
	// Unlock say LockLost and their guarded writes are refused everywhere.
	//
	// Hence: run a candidacy you mean to resume on a Conn of its own, with
	// no locks and no other candidacies; resume it on another Conn than
	// the one that made it, and at most one candidacy per session.
	// etcd, ZooKeeper and Consul refuse a candidacy on a session or lease
	// this Conn holds already (its own, or one it resumed) with
	// NodeExists (etcd: InvalidArgument for a candidacy a participation
	// of this Conn owns); memorytopo and the template resume a second
	// candidacy of one session, and the first's end ends the second's
	// term (LockLost) before the session's entries go. Conformance:
	// LeaderValues/Resume, ResumeEndStop, ResumeEndResign, ResumeEndCut,
	// ResumeEndAfterLoss, ResumeOwnSession, ResumeTwoOnOneSession,
	// ResumeRecampaign, ResumeStopRacesClose.
	ResumeLeaderParticipation(ctx context.Context, name, id string, info []byte) (LeaderParticipation, error)

	// Close releases the connection. Active watches end with Interrupted;
	// locks and leadership held through this Conn are released by their
	// session or lease ending. Later calls return Closed, also those on
	// the locks, terms and participations made through this Conn
	// (Fence.Check, LockDescriptor.Unlock, every LeaderParticipation
	// method but Stop). Close is idempotent.
	Close()
}

// DirEntryType is the type of a ListDir entry.
type DirEntryType int

const (
	// TypeDirectory is an entry with entries under it.
	TypeDirectory DirEntryType = iota
	// TypeFile is an entry holding a value.
	TypeFile
)

// String returns "directory" or "file".
func (t DirEntryType) String() string {
	if t == TypeFile {
		return "file"
	}
	return "directory"
}

// DirEntry is one entry of a ListDir result.
type DirEntry struct {
	// Name is the entry's name, a single path segment.
	Name string
	// Type is filled only by a full listing.
	Type DirEntryType
	// Ephemeral marks entries that vanish with their owner's session or
	// lease (lock and election entries). Filled only by a full listing.
	Ephemeral bool
}

// KVInfo is one file returned by List.
type KVInfo struct {
	// Path is the file's canonical path relative to the cell root.
	Path    string
	Value   []byte
	Version Version
}

// WatchData is one value or event of a Watch. Exactly one of Contents (with
// Version) or Err is meaningful: an event with a non-nil Err is the last one
// on its channel, except in WatchRecursive where a NoNode Err reports one
// file's deletion.
type WatchData struct {
	Contents []byte
	Version  Version
	Err      error

	// Revision is how far into the store's history the watch has got with
	// this value or event, as a store revision: once it is received, the
	// watch has delivered every change committed at or before Revision to
	// what it watches (the file of a Watch, every file under the prefix of
	// a WatchRecursive), this one included. It is a lower bound, and 0
	// when the backend cannot say (then it promises nothing). Errors that
	// end a channel (Interrupted, Unavailable, ...) carry 0; a deletion
	// carries a Revision where the backend knows one. Along one channel,
	// initial values included, the non-zero ones never decrease. An event
	// that is not the last of one store change or of one answer (a
	// transaction of several files, a Consul listing with several changes)
	// carries the revision of the changes before it, since the rest of its
	// change is still to come. Per backend:
	//
	//   - etcd: the etcd revision. A Watch's initial value, and values
	//     re-read after a compaction, carry the read's header revision; an
	//     event carries its change's ModRevision (for a delete, the
	//     deletion's revision). WatchRecursive's initial values carry the
	//     listing's header revision (the listing reflects every change up to
	//     it, which is more than each file's own ModRevision says); an event
	//     carries its change's revision if it is the last event of that
	//     revision, the revision before it otherwise; after a compacted
	//     history is re-read, the last difference sent carries the read's
	//     header revision.
	//   - Consul: the X-Consul-Index (a raft index) of the read or blocking
	//     query that delivered the value: a read of a key that exists
	//     returns the key's ModifyIndex (of an absent key, the whole KV
	//     table's index), a listing the prefix's (the highest index of its
	//     entries and tombstones); each reflects every change up to it of
	//     what it read.
	//     Of the differences one listing yields, the last carries its index,
	//     the others the index before. An agent that lost its state (a dev
	//     agent restarted) starts its indexes again; the watch keeps
	//     reporting the highest it saw until they pass it.
	//   - memorytopo: the store's counter of versions (every write, a
	//     delete included, takes the next value; a file's Version is the
	//     revision that wrote it). An event carries the counter at its
	//     change when nothing older is still queued for the watch, and the
	//     revision the watch had reached before otherwise (events of one
	//     file are coalesced while the reader is slow).
	//   - ZooKeeper: a Watch's values carry the file's Stat.Mzxid (the zxid
	//     of its last change, read with the value: every change of the file
	//     up to it is in the value); its deletion carries 0 (the client is
	//     not told the deletion's zxid). WatchRecursive carries 0
	//     throughout: it is built from one-shot watches relayed by separate
	//     goroutines, so no event says that the other files' earlier changes
	//     were all delivered.
	Revision int64
}

// WatchDataRecursive is one value or event of WatchRecursive, for Path (the
// file's canonical path relative to the cell root).
type WatchDataRecursive struct {
	Path string
	WatchData
}

// LockDescriptor is a held lock: a Fence (fencing token, Done, Check)
// that its holder can release. Its methods are safe for concurrent use.
type LockDescriptor interface {
	Fence

	// Unlock releases the lock and closes Done. A second Unlock returns
	// Interrupted (the lock is no longer held); releasing a lock the store
	// already dropped returns LockLost. After the Conn's Close, which
	// released the lock, every Unlock (the first too) returns Closed on
	// every backend: Close released the lock, so there is nothing to undo.
	Unlock(ctx context.Context) error
}

// LeaderParticipation is one participant in a leader election. Its methods
// are safe for concurrent use. After the Conn's Close (which withdrew the
// candidacy) every method that returns an error returns Closed, on every
// backend, once its arguments passed their checks; the channels of
// Observe and WaitForNewLeader that were open close; Stop still returns.
type LeaderParticipation interface {
	// WaitForLeadership blocks until this participant leads, then returns a
	// context that is cancelled when leadership is lost or Stop is called.
	// After Stop it returns Interrupted. Calling it again while leading
	// returns the same context. On etcd and Consul, whose stores can take
	// a term away while its session lives (its key deleted or written by
	// another client), the leader's watch of its key starts at its first
	// look (a method of the context, Term or Proclaim), after one read of
	// the key that makes that look see a term already taken away ended; it
	// waits for that read (at most 2 s). A term its leader never looks at
	// costs no watch.
	WaitForLeadership() (context.Context, error)

	// Term returns the participant's current leadership term as a Fence:
	// its Token is the term's fencing token (strictly greater for every
	// later term of the same election, whoever leads it), its Done closes
	// when the term ends, and IfHeld(term) guards a transaction on it. It
	// returns a NotLeader *Error when the participant does not lead (it
	// never did, or WaitForLeadership has not returned, or the term ended
	// and no new one began).
	Term() (Fence, error)

	// Campaign joins the election with value published beside the
	// candidacy (at most MaxValueSize bytes; see each backend's layout for
	// where it lives: never where Vitess reads the id), and blocks until
	// this participant leads or ctx ends. It returns the leadership
	// context, as WaitForLeadership does. When ctx ends first, the
	// candidacy is withdrawn and Campaign returns Timeout or Interrupted,
	// once its entry is gone from the store (a request creating it that is
	// in flight is first let finish, for at most a few seconds).
	// While already leading it publishes value as Proclaim does and
	// returns the same context. After Resign it joins again; after Stop it
	// returns Interrupted. InvalidArgument for an oversized value.
	Campaign(ctx context.Context, value []byte) (context.Context, error)

	// Proclaim replaces the value this participant publishes as leader,
	// without a new election: observers see the new value with the same
	// Token. It is guarded in the store on the current term, so a leader
	// whose session or lease ended cannot proclaim. It returns a NotLeader
	// *Error when this participant does not lead (any more), and
	// InvalidArgument for an oversized value.
	Proclaim(ctx context.Context, value []byte) error

	// Resign withdraws this participant's candidacy, giving up leadership
	// if held (the leadership context is cancelled before it returns), and
	// returns once its entry is gone. It works with an already-cancelled
	// ctx: the removal is then attempted for a bounded grace (a few
	// seconds) and Resign returns Interrupted or Timeout if it did not
	// finish. A candidacy a concurrent WaitForLeadership or Campaign is
	// still creating (its request in flight) is withdrawn too: Resign waits
	// for that request (at most a few seconds), removes the entry, and the
	// call returns Interrupted. Unlike Stop, the participant may Campaign
	// again. It returns nil when there is nothing to resign.
	Resign(ctx context.Context) error

	// Leader returns the election's current leader with its published
	// value and its term's fencing token, or a NoLeader *Error when nobody
	// leads. It works whether or not this participant campaigns.
	Leader(ctx context.Context) (Leader, error)

	// Observe returns a channel of the election's leaders: first the one
	// current at the time of the call (a Leader with ID "" when nobody
	// leads), then every change of leader, every Proclaim, and every time
	// nobody leads any more. Rapid changes may be coalesced, but the last
	// value sent is always the current state, and a leader that resigned
	// or lost its term is never sent as current. The channel survives
	// reconnections to the store and closes when ctx ends or the Conn is
	// closed; it must be drained until then.
	Observe(ctx context.Context) (<-chan Leader, error)

	// ResumeInfo returns opaque bytes describing this participant's
	// current candidacy (its entry and the session or lease it lives on).
	// A process that restarts can pass them, with the same election name
	// and id, to Conn.ResumeLeaderParticipation to take the candidacy
	// back, in its place in the queue, while the session or lease is still
	// alive, instead of waiting for it to expire (the resuming Conn adopts
	// the whole session: see ResumeLeaderParticipation). Store them
	// durably. It returns a NoNode *Error when the participant has no
	// entry (it is not campaigning); on consultopo also while it waits,
	// not yet leading (there only the leader holds a resumable entry, the
	// election key: a waiting candidate's place in the queue is not
	// resumed).
	ResumeInfo() ([]byte, error)

	// Stop withdraws from the election, giving up leadership if held. It is
	// idempotent and returns once the participant's entry is removed (or the
	// store cannot be reached).
	Stop()

	// GetCurrentLeaderID returns the id of the current leader, or "" with a
	// nil error when nobody leads.
	GetCurrentLeaderID(ctx context.Context) (string, error)

	// WaitForNewLeader returns a channel of leader ids: the current leader
	// first (if any), then the leader of each new term as leadership
	// changes. Every new term is sent, so a participant that leads again
	// after another term (or after it resigned) is sent again although its
	// id did not change; a Proclaim is not a new term and is not sent, nor
	// is "nobody leads". Rapid changes may be coalesced as in Observe. The
	// channel closes when ctx ends or the Conn is closed.
	WaitForNewLeader(ctx context.Context) (<-chan string, error)
}
