package memorytopo

import (
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestShapeLockExcludes: a Lock holder never overlaps a fast-path holder
// (enterFast) or an RLock holder, while fast-path and RLock holders share
// the lock. Each holder checks what it must not see while it holds the
// lock.
func TestShapeLockExcludes(t *testing.T) {
	var (
		l       = shapeLock{seed: maphash.MakeSeed()}
		readers atomic.Int32 // fast-path and RLock holders inside
		writers atomic.Int32 // Lock holders inside
		shared  int          // written only under Lock; read under read locks
		fast    atomic.Int64 // fast-path entries that succeeded
		sink    atomic.Int64
	)
	const rounds = 2000
	var wg sync.WaitGroup
	reader := func(stripe int) {
		defer wg.Done()
		for i := range rounds {
			ok := l.enterFast((stripe + i) % shapeStripes)
			if ok {
				fast.Add(1)
			} else {
				l.RLock()
				l.enableFast() // as updateInPlace does: writers start without the gate
			}
			readers.Add(1)
			if writers.Load() != 0 {
				t.Error("a reader holds the lock beside a writer")
			}
			// Hold the lock across a yield, so that a writer that did
			// not wait for this reader runs meanwhile (the race detector
			// also sees the read of shared overlap its write).
			sink.Add(int64(shared))
			runtime.Gosched()
			if writers.Load() != 0 {
				t.Error("a writer took the lock while a reader held it")
			}
			readers.Add(-1)
			if ok {
				l.exitFast((stripe + i) % shapeStripes)
			} else {
				l.RUnlock()
			}
		}
	}
	writer := func() {
		defer wg.Done()
		for range rounds / 4 {
			// Leave the lock free a while, so that readers take the
			// fast path between writers.
			for range 4 {
				runtime.Gosched()
			}
			l.Lock()
			writers.Add(1)
			if n := readers.Load(); n != 0 {
				t.Errorf("a writer holds the lock beside %d readers", n)
			}
			shared++
			runtime.Gosched()
			if n := readers.Load(); n != 0 {
				t.Errorf("a writer holds the lock beside %d readers", n)
			}
			writers.Add(-1)
			l.Unlock()
		}
	}
	for i := range 8 {
		wg.Add(1)
		go reader(i)
	}
	for range 2 {
		wg.Add(1)
		go writer()
	}
	wg.Wait()
	if shared != 2*rounds/4 {
		t.Errorf("shared = %d, want %d", shared, 2*rounds/4)
	}
	if fast.Load() == 0 {
		t.Error("no reader took the fast path")
	}
}

// TestShapeLockStripe: a path always maps to the same stripe, within
// range.
func TestShapeLockStripe(t *testing.T) {
	l := shapeLock{seed: maphash.MakeSeed()}
	for _, p := range []string{"", "a", "keyspaces/ks1/shards/0/Shard"} {
		i := stripe(l.hash(p))
		if i < 0 || i >= shapeStripes || stripe(l.hash(p)) != i {
			t.Errorf("stripe(%q) = %d, then %d", p, i, stripe(l.hash(p)))
		}
	}
}

// TestShapeLockEnabledWhileWriterWaits: a writer that found the fast path
// disabled and then waited for the lock while a reader enabled it still
// shuts the fast path out while it holds the lock.
func TestShapeLockEnabledWhileWriterWaits(t *testing.T) {
	for range 200 {
		l := shapeLock{seed: maphash.MakeSeed()}
		var inside atomic.Int32
		var writing atomic.Bool
		l.RLock()
		started, wdone := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(wdone)
			close(started)
			l.Lock() // finds the fast path disabled, then waits for the RLock
			writing.Store(true)
			for range 20 {
				runtime.Gosched()
				if inside.Load() != 0 {
					t.Error("a fast-path reader holds the lock beside a writer")
					break
				}
			}
			writing.Store(false)
			l.Unlock()
		}()
		<-started
		for range 10 {
			runtime.Gosched() // let the writer reach Lock
		}
		l.enableFast()
		l.RUnlock()
		for waiting := true; waiting; {
			select {
			case <-wdone:
				waiting = false
			default:
			}
			if l.enterFast(0) {
				inside.Add(1)
				if writing.Load() {
					t.Error("the fast path let a reader in beside a writer")
				}
				runtime.Gosched()
				inside.Add(-1)
				l.exitFast(0)
			} else {
				l.RLock()
				l.RUnlock()
			}
		}
		if t.Failed() {
			return
		}
	}
}
