package memorytopo_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// lockEnv is one store with a lock of d taken by c.
type lockEnv struct {
	t     *testing.T
	ctx   context.Context
	f     *memorytopo.Factory
	c     *memorytopo.Conn // holds the lock, root /root
	other *memorytopo.Conn // root /root
	ld    topo.LockDescriptor
	name  string // the lock entry's name under d/locks
	log   []string
}

func (e *lockEnv) note(format string, args ...any) {
	e.log = append(e.log, fmt.Sprintf(format, args...))
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func (e *lockEnv) listDir(c topo.Conn, p string) {
	es, err := c.ListDir(e.ctx, p, true)
	e.note("ListDir(%q) = %+v, %s", p, es, errText(err))
}

func (e *lockEnv) get(c topo.Conn, p string) {
	b, v, err := c.Get(e.ctx, p)
	e.note("Get(%q) = %q, %v, %s", p, b, v, errText(err))
}

// lockResult is what a Lock call started by startLock returned.
type lockResult struct {
	ld  topo.LockDescriptor
	err error
}

// startLock starts a Lock of d by c with contents in a goroutine, and
// waits until the directory has n lock entries (so that this one has
// queued). The result arrives on the returned channel.
func (e *lockEnv) startLock(c topo.Conn, ctx context.Context, contents string, n int) <-chan lockResult {
	got := make(chan lockResult, 1)
	go func() {
		ld, err := c.Lock(ctx, "d", contents)
		got <- lockResult{ld, err}
	}()
	require.Eventually(e.t, func() bool { return memorytopo.LockEntries(e.c, "d") == n }, waitLimit, poll)
	return got
}

func (e *lockEnv) conn(root string) *memorytopo.Conn {
	c, err := e.f.NewConn("mem", root)
	require.NoError(e.t, err)
	e.t.Cleanup(c.Close)
	return c
}

// TestUnplacedLockMatchesPlaced checks that an uncontended lock, whose
// entry the store places in the tree only when something could see it,
// is indistinguishable from one whose entry was placed at once: each
// probe runs on a fresh store where the entry is still unplaced, and on
// one where another Conn's failed TryLock placed it, and every
// observation (values, versions, listings, errors, Done, tokens) must
// agree. Each probe is the first thing that could place the entry.
func TestUnplacedLockMatchesPlaced(t *testing.T) {
	entryPath := func(e *lockEnv) string { return "d/locks/" + e.name }
	probes := []struct {
		name string
		run  func(e *lockEnv)
	}{
		{"Get of the entry", func(e *lockEnv) { e.get(e.c, entryPath(e)) }},
		{"Get of the entry from another Conn", func(e *lockEnv) { e.get(e.other, entryPath(e)) }},
		{"Get of the entry from the store's top", func(e *lockEnv) { e.get(e.conn(""), "root/"+entryPath(e)) }},
		{"GetVersion of the entry", func(e *lockEnv) {
			b, err := e.c.GetVersion(e.ctx, entryPath(e), e.ld.(topo.Fence).Token())
			e.note("GetVersion = %q, %s", b, errText(err))
		}},
		{"Get of the locks directory", func(e *lockEnv) { e.get(e.c, "d/locks") }},
		{"ListDir of the directory", func(e *lockEnv) { e.listDir(e.c, "d") }},
		{"ListDir of the parent", func(e *lockEnv) { e.listDir(e.c, "") }},
		{"ListDir of the locks directory", func(e *lockEnv) { e.listDir(e.c, "d/locks") }},
		{"a new root below", func(e *lockEnv) {
			n := e.conn("/root/d")
			e.get(n, "locks/"+e.name)
			e.listDir(n, "")
		}},
		{"a new root in the locks directory", func(e *lockEnv) {
			n := e.conn("/root/d/locks")
			e.get(n, e.name)
			_, err := n.Create(e.ctx, e.name, []byte("x"))
			e.note("Create = %s", errText(err))
			_, err = n.Update(e.ctx, e.name, []byte("x"), nil)
			e.note("Update = %s", errText(err))
			e.listDir(n, "")
			_, err = n.Txn(e.ctx, topo.IfPresent(e.name))
			e.note("Txn IfPresent = %s", errText(err))
		}},
		{"a root in the locks directory used before", func(e *lockEnv) {
			// The root index exists already (setup opened it): the entry
			// was placed when taken.
			e.get(e.conn("/root/d/locks"), e.name)
		}},
		{"Watch of the entry", func(e *lockEnv) {
			_, _, err := e.c.Watch(e.ctx, entryPath(e))
			e.note("Watch = %s", errText(err))
		}},
		{"List", func(e *lockEnv) {
			kvs, err := e.c.List(e.ctx, "d")
			e.note("List = %d, %s", len(kvs), errText(err))
		}},
		{"deleting the last file", func(e *lockEnv) {
			e.note("Delete = %s", errText(e.c.Delete(e.ctx, "d/f", nil)))
			e.listDir(e.c, "")
			e.listDir(e.c, "d")
			_, err := e.other.Lock(e.ctx, "d", "x")
			e.note("Lock of the emptied directory = %s", errText(err))
			e.note("Unlock = %s", errText(e.ld.Unlock(e.ctx)))
			e.listDir(e.c, "")
		}},
		{"deleting the last file and creating another", func(e *lockEnv) {
			// The directory is emptied of files but still locked: a new
			// file there must not let a second holder in.
			e.note("Delete = %s", errText(e.c.Delete(e.ctx, "d/f", nil)))
			_, err := e.other.Create(e.ctx, "d/g", []byte("x"))
			e.note("Create = %s", errText(err))
			_, err = e.other.TryLock(e.ctx, "d", "x")
			e.note("TryLock = %s", errText(err))
			require.True(e.t, topo.IsErrType(err, topo.NodeExists), "a second holder: %v", err)
			e.note("Delete = %s", errText(e.c.Delete(e.ctx, "d/g", nil)))
		}},
		{"TryLock", func(e *lockEnv) {
			_, err := e.other.TryLock(e.ctx, "d", "x")
			e.note("TryLock = %s", errText(err))
		}},
		{"a waiting Lock", func(e *lockEnv) {
			wctx, cancel := context.WithTimeout(e.ctx, 20*time.Millisecond)
			defer cancel()
			_, err := e.other.Lock(wctx, "d", "x")
			e.note("Lock = %v", topo.IsErrType(err, topo.Timeout))
			got := make(chan topo.LockDescriptor, 1)
			go func() {
				l, err := e.other.Lock(e.ctx, "d", "next")
				if err != nil {
					e.t.Error(err)
				}
				got <- l
			}()
			require.Eventually(e.t, func() bool {
				es, err := e.c.ListDir(e.ctx, "d/locks", false)
				return err == nil && len(es) == 2
			}, waitLimit, poll)
			e.listDir(e.c, "d/locks")
			require.NoError(e.t, e.ld.Unlock(e.ctx))
			next := <-got
			e.note("next token greater = %v", next.(topo.Fence).Token() > e.ld.(topo.Fence).Token())
			e.listDir(e.c, "d/locks")
			require.NoError(e.t, next.Unlock(e.ctx))
		}},
		{"queued waiters", func(e *lockEnv) {
			third := e.conn("/root")
			w1 := e.startLock(e.other, e.ctx, "w1", 2)
			_, err := third.TryLock(e.ctx, "d", "x")
			e.note("TryLock = %s", errText(err))
			w2ctx, cancelW2 := context.WithCancel(e.ctx)
			w2 := e.startLock(third, w2ctx, "w2", 3)
			w3 := e.startLock(third, e.ctx, "w3", 4)
			cancelW2()
			r2 := <-w2
			e.note("cancelled waiter = %s", errText(r2.err))
			e.note("entries = %d", memorytopo.LockEntries(e.c, "d"))
			require.NoError(e.t, e.ld.Unlock(e.ctx))
			r1 := <-w1
			require.NoError(e.t, r1.err)
			e.note("w1 after the holder = %v", r1.ld.(topo.Fence).Token() > e.ld.(topo.Fence).Token())
			_, err = e.c.TryLock(e.ctx, "d", "x")
			e.note("TryLock = %s", errText(err))
			e.note("entries = %d", memorytopo.LockEntries(e.c, "d"))
			require.NoError(e.t, r1.ld.Unlock(e.ctx))
			r3 := <-w3
			require.NoError(e.t, r3.err)
			e.note("w3 after w1 = %v", r3.ld.(topo.Fence).Token() > r1.ld.(topo.Fence).Token())
			e.listDir(e.c, "d/locks")
			require.NoError(e.t, r3.ld.Unlock(e.ctx))
		}},
		{"queued waiters placed", func(e *lockEnv) {
			w1 := e.startLock(e.other, e.ctx, "w1", 2)
			w2 := e.startLock(e.other, e.ctx, "w2", 3)
			es, err := e.c.ListDir(e.ctx, "d/locks", true)
			require.NoError(e.t, err)
			require.Len(e.t, es, 3)
			e.note("ListDir = %+v", es)
			for _, x := range es {
				e.get(e.c, "d/locks/"+x.Name)
			}
			require.NoError(e.t, e.ld.Unlock(e.ctx))
			r1 := <-w1
			require.NoError(e.t, r1.err)
			e.listDir(e.c, "d/locks")
			require.NoError(e.t, r1.ld.Unlock(e.ctx))
			r2 := <-w2
			require.NoError(e.t, r2.err)
			require.NoError(e.t, r2.ld.Unlock(e.ctx))
		}},
		{"holder's session lost with waiters queued", func(e *lockEnv) {
			third := e.conn("/root")
			w1 := e.startLock(e.other, e.ctx, "w1", 2)
			w2 := e.startLock(third, e.ctx, "w2", 3)
			e.c.ExpireSession()
			r1 := <-w1
			require.NoError(e.t, r1.err)
			e.note("holder Check = %s", errText(e.ld.Check(e.ctx)))
			e.note("w1 Check = %s", errText(r1.ld.Check(e.ctx)))
			_, err := third.TryLock(e.ctx, "d", "x")
			e.note("TryLock = %s", errText(err))
			require.NoError(e.t, r1.ld.Unlock(e.ctx))
			r2 := <-w2
			require.NoError(e.t, r2.err)
			e.note("w2 after w1 = %v", r2.ld.(topo.Fence).Token() > r1.ld.(topo.Fence).Token())
			require.NoError(e.t, r2.ld.Unlock(e.ctx))
		}},
		{"waiter's session lost", func(e *lockEnv) {
			third := e.conn("/root")
			w1 := e.startLock(third, e.ctx, "w1", 2)
			w2 := e.startLock(e.other, e.ctx, "w2", 3)
			third.ExpireSession()
			r1 := <-w1
			e.note("lost waiter = %s", errText(r1.err))
			e.note("entries = %d", memorytopo.LockEntries(e.c, "d"))
			require.NoError(e.t, e.ld.Unlock(e.ctx))
			r2 := <-w2
			require.NoError(e.t, r2.err)
			e.listDir(e.c, "d/locks")
			require.NoError(e.t, r2.ld.Unlock(e.ctx))
		}},
		{"Done", func(e *lockEnv) {
			done := e.ld.(topo.Fence).Done()
			select {
			case <-done:
				e.note("Done closed while held")
			default:
			}
			require.NoError(e.t, e.ld.Unlock(e.ctx))
			<-done
			<-e.ld.(topo.Fence).Done()
		}},
		{"session loss", func(e *lockEnv) {
			e.c.ExpireSession()
			<-e.ld.(topo.Fence).Done()
			e.note("Check = %s", errText(e.ld.Check(e.ctx)))
			e.listDir(e.c, "d")
			e.get(e.c, entryPath(e))
			_, err := topo.GuardedUpdate(e.ctx, e.c, e.ld.(topo.Fence), "d/f", []byte("y"), nil)
			e.note("GuardedUpdate = %s", errText(err))
		}},
		{"Close", func(e *lockEnv) {
			e.c.Close()
			<-e.ld.(topo.Fence).Done()
			e.listDir(e.other, "d")
			e.get(e.other, entryPath(e))
		}},
	}
	takes := []struct {
		name string
		take func(c *memorytopo.Conn, ctx context.Context) (topo.LockDescriptor, error)
	}{
		{"Lock", func(c *memorytopo.Conn, ctx context.Context) (topo.LockDescriptor, error) {
			return c.Lock(ctx, "d", "holder")
		}},
		{"TryLock", func(c *memorytopo.Conn, ctx context.Context) (topo.LockDescriptor, error) {
			return c.TryLock(ctx, "d", "holder")
		}},
		{"LockWithTTL", func(c *memorytopo.Conn, ctx context.Context) (topo.LockDescriptor, error) {
			return c.LockWithTTL(ctx, "d", "holder", time.Hour)
		}},
		{"LockName", func(c *memorytopo.Conn, ctx context.Context) (topo.LockDescriptor, error) {
			return c.LockName(ctx, "d", "holder")
		}},
	}
	run := func(t *testing.T, take func(*memorytopo.Conn, context.Context) (topo.LockDescriptor, error), probe func(*lockEnv), place bool, earlyRoot bool) []string {
		ctx := testCtx(t)
		f := memorytopo.NewFactory()
		e := &lockEnv{t: t, ctx: ctx, f: f}
		e.c, e.other = e.conn("/root"), e.conn("/root")
		if earlyRoot {
			e.conn("/root/d/locks")
		}
		_, err := e.c.Create(ctx, "d/f", []byte("x"))
		require.NoError(t, err)
		e.ld, err = take(e.c, ctx)
		require.NoError(t, err)
		e.name = fmt.Sprintf("%016x", e.ld.(topo.Fence).Token())
		if place {
			// A listing of the locks directory places every entry.
			_, err := e.other.ListDir(ctx, "d/locks", false)
			require.NoError(t, err)
		}
		probe(e)
		// The tail: what is left, released.
		e.listDir(e.c, "")
		e.note("Check = %s", errText(e.ld.Check(ctx)))
		e.note("Unlock = %s", errText(e.ld.Unlock(ctx)))
		e.listDir(e.other, "")
		e.listDir(e.other, "d")
		e.get(e.other, entryPath(e))
		l, err := e.other.Lock(ctx, "d", "after")
		e.note("Lock after = %s", errText(err))
		if err == nil {
			e.note("token greater = %v", l.(topo.Fence).Token() > e.ld.(topo.Fence).Token())
			require.NoError(t, l.Unlock(ctx))
		}
		return e.log
	}
	for _, tk := range takes {
		for _, pr := range probes {
			t.Run(tk.name+"/"+pr.name, func(t *testing.T) {
				early := pr.name == "a root in the locks directory used before"
				unplaced := run(t, tk.take, pr.run, false, early)
				placed := run(t, tk.take, pr.run, true, early)
				require.Equal(t, placed, unplaced)
			})
		}
	}
}

// TestUnplacedLockExclusiveUnderPlacement hammers one directory's lock
// from several Conns (Lock, TryLock, LockWithTTL) while other goroutines
// keep placing entries (ListDir, Get of entry paths, new roots) and
// expiring a session: there is never more than one holder, and the tokens
// of successive holders strictly increase.
func TestUnplacedLockExclusiveUnderPlacement(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	conns := []*memorytopo.Conn{newConn(t, f), newConn(t, f), newConn(t, f)}
	_, err := conns[0].Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)

	var (
		mu      sync.Mutex
		holding = map[topo.LockDescriptor]bool{}
		last    int64
	)
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { // placement triggers
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c := conns[i%len(conns)]
			if es, err := c.ListDir(ctx, "d/locks", false); err == nil && len(es) > 0 {
				_, _, _ = c.Get(ctx, "d/locks/"+es[0].Name)
			}
			_, _, _ = c.Get(ctx, "d/locks/0000000000000001")
			if i%50 == 0 {
				n, err := f.NewConn("mem", fmt.Sprintf("/root/r%d", i))
				require.NoError(t, err)
				n.Close()
			}
		}
	})
	bg.Go(func() { // session loss
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%200 == 0 {
				conns[2].ExpireSession()
			}
			runtime.Gosched()
		}
	})
	var wg sync.WaitGroup
	for g := range 6 {
		wg.Go(func() {
			c := conns[g%len(conns)]
			for i := range 300 {
				var ld topo.LockDescriptor
				var err error
				switch (g + i) % 3 {
				case 0:
					ld, err = c.Lock(ctx, "d", "lock")
				case 1:
					ld, err = c.TryLock(ctx, "d", "try")
					if topo.IsErrType(err, topo.NodeExists) {
						continue
					}
				default:
					ld, err = c.LockWithTTL(ctx, "d", "ttl", time.Hour)
				}
				if topo.IsErrType(err, topo.LockLost) {
					continue // the session expired while waiting
				}
				require.NoError(t, err)
				mu.Lock()
				if ld.Check(ctx) == nil {
					// Every other recorded holder must have lost its lock
					// (an expired session) by now.
					for o := range holding {
						if o.Check(ctx) == nil {
							t.Errorf("two holders at once: tokens %d and %d", o.(topo.Fence).Token(), ld.(topo.Fence).Token())
						}
					}
					tok := ld.(topo.Fence).Token()
					require.Greater(t, tok, last, "tokens of successive holders increase")
					last = tok
					holding[ld] = true
				}
				mu.Unlock()
				runtime.Gosched()
				mu.Lock()
				delete(holding, ld)
				mu.Unlock()
				err = ld.Unlock(ctx)
				if err != nil {
					require.True(t, topo.IsErrType(err, topo.LockLost), "Unlock: %v", err)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	bg.Wait()
}
