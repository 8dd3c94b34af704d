// Package claims is the claims engine: ONE implementation of everything a
// topo.Conn promises about locks and elections -- who holds, in what
// order contenders are served, TryLock's holder error, fencing tokens,
// IfHeld guards, leader values, resume information, argument checks, and
// the rule that a lost session ends every claim on it -- over a small
// per-store Driver. A backend implements the Driver (a queue of entries
// bound to sessions, in its store's own primitives) and forwards its
// Conn's claim methods to an Engine; it writes no claims logic itself.
//
// One concept per file:
//   - driver.go: the Driver interface, Queue, Entry, CreateOptions, the
//     errors a driver returns (BusyError, ErrNotHeld), and the optional
//     steps Acquirer (the head takes the store's own key before it is
//     granted: Consul, whose key Vitess acquires too) and Monitor (the
//     driver watches a granted entry the store can take away);
//   - session.go: Session, the engine's view of a store session, and
//     Session.Lost, which ends every claim on it before it returns;
//   - claim.go: a claim (a lock descriptor or a leadership term) as a
//     topo.Fence, and Guard, what a backend's Txn checks for IfHeld;
//   - queue.go: joining a queue and waiting for the head, one predecessor
//     at a time, and the optional driver steps of that wait, Aheader and
//     GoneSignaler (a waiter parks on the store's own channel, with no
//     goroutine per wait: in process) and TurnSignaler (a lock's waiter
//     parks on its own entry's channel, closed by the release that hands
//     it the lock);
//   - lock.go: Lock, TryLock, LockWithTTL, LockName and the descriptor,
//     and the optional driver step Roomer (the driver allocates the
//     descriptor's room with its entry: one allocation per lock, in
//     process);
//   - election.go: LeaderParticipation (WaitForLeadership, Campaign, Term,
//     Proclaim, Resign, Stop);
//   - observe.go: Leader, GetCurrentLeaderID, Observe, WaitForNewLeader;
//   - resume.go: ResumeInfo and Conn.ResumeLeaderParticipation;
//   - inspect.go: Engine.Inspect, a queue's holder and waiters for
//     topo/inspect, and Describer, the driver step behind it where List
//     leaves out other clients' entries (ZooKeeper);
//   - hooks.go: Hooks, what a backend sees of each call before the driver
//     does (memorytopo: call counters and test faults);
//   - grace.go: the context that bounds a withdrawal's removal, whose
//     timer starts only when the driver waits on it;
//   - defect.go: deliberate defects, for the mutation kit only.
//
// # The model
//
// A lock on a directory, or an election, is a Queue of entries. Each entry
// is created by the store on a session and carries a token, the store's
// order key: the queue is ordered by token, the oldest entry holds the
// lock (leads), and every later entry has a greater token. An entry is
// removed by its own claim (Unlock, Resign, Stop, a waiter giving up) or
// with its session, never by anyone else.
//
// A waiter waits for ONE entry: the one just ahead of it. Only when that
// one goes does it list the queue again; if it then heads the queue it
// holds, otherwise it waits for its new predecessor. So one handover wakes
// one waiter (no herd), and a waiter never holds while an older entry is
// in the queue.
//
// A driver whose store decides who holds by a key of its own (Consul)
// implements Acquirer: the head of the queue then acquires that key before
// it is granted, and the entry Acquire returns (Entry.Granted) is the
// claim's from then on, its token the fencing token. Such a driver's
// Create may also take a free key at once and return a granted entry,
// which waits no more.
//
// A claim's token is its entry's token. Tokens of one queue only grow,
// because a claim holds only once every older entry has left the queue,
// and the store gives every newer entry a greater token (the argument each
// driver must make for its store: see docs/backends.md).
//
// # Sessions and loss
//
// Every claim belongs to the Session its entry was created on. When the
// driver declares a session lost (Session.Lost), every claim on it ends
// before Lost returns: Done closes, leadership contexts are cancelled,
// waiters wake with LockLost. A driver must declare the loss before the
// store can hand the entries on (etcd: before the lease's TTL runs out,
// by a safety margin; in process: before it removes the entries), so the
// old holder always knows first.
//
// # What blocks and what fails
//
// Lock, LockWithTTL, LockName, WaitForLeadership and Campaign block until
// the claim is granted; everything else sends a bounded number of driver
// requests. Every error a method returns is a *topo.Error (the driver's
// errors go through Driver.MapError once).
package claims
