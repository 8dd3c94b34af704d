package memorytopo

import (
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
)

// shapeStripes is how many reader stripes a shapeLock has (a power of
// two).
const shapeStripes = 16

// shapeLock is the store's mu: a sync.RWMutex whose read side has, beside
// RLock, a striped fast path for updateInPlace (enterFast, exitFast).
//
// RLock and RUnlock share one reader count, an atomic word that every
// core writes twice per call: with writers of different files on several
// cores that word's cache line moves between them on every call, which
// cost more than the rest of an in-place Update. enterFast counts its
// holder in one of shapeStripes padded counters instead, chosen by the
// caller (by path), so that holders on different cores mostly write
// different lines.
//
// Exclusion is that of the RWMutex, with fast-path holders counted as
// readers: Lock raises gate, takes the RWMutex for writing (no RLock
// holder remains and none can start), then waits until every stripe's
// count is zero. enterFast adds to its stripe and then reads gate,
// backing out when it is raised. All of these are sequentially
// consistent atomics, so either the writer sees the fast-path holder's
// count and waits for it, or that holder sees the gate and backs out (it
// then takes RLock, which waits for the writer): a fast-path holder and
// a Lock holder never overlap. Unlock releases the RWMutex, then lowers
// gate.
type shapeLock struct {
	rw sync.RWMutex
	_  [64 - 24]byte
	// gate counts the writers that wait for the lock or hold it; written
	// only by Lock and Unlock, so it stays in every core's cache between
	// writers.
	gate atomic.Int32
	_    [64 - 4]byte
	// fast is set (never cleared) once a fast path may run: before, Lock
	// needs neither the gate nor the stripes, so that a store that makes
	// no in-place Update pays nothing for them. Set only under RLock.
	fast atomic.Bool
	// raised is whether the current Lock holder raised the gate (read
	// and written by the holder only).
	raised bool
	// seed picks the stripe of a path (see stripe).
	seed    maphash.Seed
	stripes [shapeStripes]struct {
		n atomic.Int32
		_ [64 - 4]byte
	}
}

// Lock takes the lock for writing: it waits until no RLock and no fast
// path holds it. The gate goes up before the RWMutex is taken, so that
// while a writer waits every new reader queues behind it in RLock (and
// gives its CPU up) instead of running on through the fast path. Until a
// fast path is enabled (enableFast), none can run, and Lock is the
// RWMutex's alone.
func (l *shapeLock) Lock() {
	raised := l.fast.Load()
	if raised {
		l.gate.Add(1)
	}
	l.rw.Lock()
	// fast is set only under RLock, so it cannot change from here to
	// Unlock; it may have been set while this writer waited.
	if !raised && l.fast.Load() {
		l.gate.Add(1)
		raised = true
	}
	if raised {
		for i := range l.stripes {
			for spins := 0; l.stripes[i].n.Load() != 0; spins++ {
				// A fast-path holder runs a few hundred nanoseconds;
				// let it run when it shares this core.
				if spins > 16 {
					runtime.Gosched()
				}
			}
		}
	}
	l.raised = raised
}

// Unlock releases a Lock.
func (l *shapeLock) Unlock() {
	raised := l.raised
	l.rw.Unlock()
	if raised {
		l.gate.Add(-1)
	}
}

// enableFast lets enterFast succeed from now on. Call it with RLock held
// (so that no Lock holder sees it change).
func (l *shapeLock) enableFast() {
	if !l.fast.Load() {
		l.fast.Store(true)
	}
}

// RLock takes the lock for reading.
func (l *shapeLock) RLock() { l.rw.RLock() }

// RUnlock releases an RLock.
func (l *shapeLock) RUnlock() { l.rw.RUnlock() }

// hash returns a hash of the path p, from which stripe picks a stripe
// (and the call counters one of theirs): a stable one per path, so that
// a goroutine writing one file keeps to one stripe. Any stripe is
// correct; the hash only spreads the paths.
func (l *shapeLock) hash(p string) uint64 { return maphash.String(l.seed, p) }

// stripe returns the stripe enterFast uses for a path of hash h.
func stripe(h uint64) int { return int(h>>8) & (shapeStripes - 1) }

// enterFast takes the lock for reading on stripe i, as RLock does, when
// no writer holds or waits for it, and reports whether it did; on false
// nothing is held (the caller takes RLock instead, and may enable the
// fast path there). A true must be followed by exitFast(i).
func (l *shapeLock) enterFast(i int) bool {
	if !l.fast.Load() {
		return false
	}
	st := &l.stripes[i].n
	st.Add(1)
	if l.gate.Load() != 0 {
		st.Add(-1)
		return false
	}
	return true
}

// exitFast releases enterFast(i).
func (l *shapeLock) exitFast(i int) { l.stripes[i].n.Add(-1) }
