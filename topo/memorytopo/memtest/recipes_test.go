package memtest_test

// The recipes of docs/testing.md. Each test below is quoted there whole
// (TestTestingDocQuotesRecipes checks that the quotes match), so keep them
// short and self-explaining.

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/memorytopo/memtest"
)

func TestRecipeHappyPath(t *testing.T) {
	ctx := t.Context()
	s := memtest.New(t, memtest.Options{Cells: []string{"zone1"}})

	// Give the code under test s.Server, as production gives it a Server.
	conn, err := s.Server.ConnForCell(ctx, "zone1")
	require.NoError(t, err)
	_, err = conn.Create(ctx, "tablets/t1", []byte("serving"))
	require.NoError(t, err)

	data, _, err := conn.Get(ctx, "tablets/t1")
	require.NoError(t, err)
	require.Equal(t, "serving", string(data))
	require.EqualValues(t, 1, s.Factory.CallCount(memorytopo.OpCreate))
}

func TestRecipeCASConflict(t *testing.T) {
	ctx := t.Context()
	s := memtest.New(t, memtest.Options{})
	a, b := s.Client.Global(), s.NewClient().Global()
	v0, err := a.Create(ctx, "config/replicas", []byte("3"))
	require.NoError(t, err)

	// Both read version v0; a writes first, so b's write must fail.
	_, err = a.Update(ctx, "config/replicas", []byte("5"), v0)
	require.NoError(t, err)
	_, err = b.Update(ctx, "config/replicas", []byte("4"), v0)
	require.ErrorIs(t, err, topo.BadVersion)

	// b reads again and sees a's write.
	data, _, err := b.Get(ctx, "config/replicas")
	require.NoError(t, err)
	require.Equal(t, "5", string(data))
}

func TestRecipeContention(t *testing.T) {
	ctx := t.Context()
	s := memtest.New(t, memtest.Options{})
	_, err := s.Client.Global().Create(ctx, "counter", []byte{0})
	require.NoError(t, err)

	// Eight workers on two clients add 1 twenty times each, by
	// read-modify-write with compare-and-set, retrying on BadVersion.
	clients := []topo.Conn{s.Client.Global(), s.NewClient().Global()}
	var wg sync.WaitGroup
	for w := range 8 {
		conn := clients[w%2]
		wg.Go(func() {
			for range 20 {
				for {
					data, v, err := conn.Get(ctx, "counter")
					if err != nil {
						t.Error(err)
						return
					}
					_, err = conn.Update(ctx, "counter", []byte{data[0] + 1}, v)
					if err == nil {
						break
					}
					if !errors.Is(err, topo.BadVersion) {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	data, _, err := s.Client.Global().Get(ctx, "counter")
	require.NoError(t, err)
	require.EqualValues(t, 160, data[0]) // no increment lost
}

func TestRecipeWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	s := memtest.New(t, memtest.Options{})
	conn := s.Client.Global()
	_, err := conn.Create(ctx, "config/mode", []byte("read-write"))
	require.NoError(t, err)

	current, changes, err := conn.Watch(ctx, "config/mode")
	require.NoError(t, err)
	require.Equal(t, "read-write", string(current.Contents))

	// Another process changes the file; the watch reports it.
	_, err = s.NewClient().Global().Update(ctx, "config/mode", []byte("read-only"), nil)
	require.NoError(t, err)
	ev := <-changes
	require.NoError(t, ev.Err)
	require.Equal(t, "read-only", string(ev.Contents))

	// Stop the watch: cancel and drain until the channel closes.
	cancel()
	for range changes {
	}
}

func TestRecipeFault(t *testing.T) {
	ctx := t.Context()
	s := memtest.New(t, memtest.Options{})
	conn := s.Client.Global()
	_, err := conn.Create(ctx, "config/replicas", []byte("3"))
	require.NoError(t, err)
	lock, err := conn.Lock(ctx, "config", "resize")
	require.NoError(t, err)
	defer lock.Unlock(ctx)

	// The next write of config/replicas fails: a plain Update, or, as
	// here, a fenced one (topo.GuardedUpdate is a Txn with an UpdateOp;
	// an OpUpdate fault matches it too).
	s.Factory.AddFault(memorytopo.Fault{Op: memorytopo.OpUpdate, Path: "config/replicas", Times: 1})
	_, err = topo.GuardedUpdate(ctx, conn, lock, "config/replicas", []byte("5"), nil)
	require.ErrorIs(t, err, topo.Unavailable)

	// The fault is used up: the retry succeeds.
	_, err = topo.GuardedUpdate(ctx, conn, lock, "config/replicas", []byte("5"), nil)
	require.NoError(t, err)
}

func TestRecipeSessionLoss(t *testing.T) {
	ctx := t.Context()
	s := memtest.New(t, memtest.Options{})
	a := newElection(t, s.Client, "a")
	b := newElection(t, s.NewClient(), "b")
	require.NoError(t, a.Await(ctx))
	mastership, err := a.WithMastership(ctx)
	require.NoError(t, err)

	// The store expires a's session: its mastership ends at once ...
	s.Client.ExpireSession()
	<-mastership.Done()
	require.ErrorIs(t, context.Cause(mastership), topo.LockLost)

	// ... and b takes over.
	require.NoError(t, b.Await(ctx))
	leader, err := a.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "b", leader)
}

func TestRecipePartitionAndFencing(t *testing.T) {
	ctx := t.Context()
	s := memtest.New(t, memtest.Options{SessionTTL: 200 * time.Millisecond})
	a, b := s.Client, s.NewClient()
	_, err := a.Global().Create(ctx, "config/replicas", []byte("3"))
	require.NoError(t, err)
	lockA, err := a.Global().Lock(ctx, "config", "a")
	require.NoError(t, err)

	// a is cut off; its session lapses SessionTTL later and b gets the
	// lock (b's Lock waits until then).
	a.Partition()
	lockB, err := b.Global().Lock(ctx, "config", "b")
	require.NoError(t, err)
	require.Greater(t, lockB.Token(), lockA.Token())

	// a comes back still believing it holds the lock: its fenced write is
	// refused by the store, b's goes through.
	a.Heal()
	_, err = topo.GuardedUpdate(ctx, a.Global(), lockA, "config/replicas", []byte("5"), nil)
	require.ErrorIs(t, err, topo.LockLost)
	_, err = topo.GuardedUpdate(ctx, b.Global(), lockB, "config/replicas", []byte("4"), nil)
	require.NoError(t, err)
}

func TestRecipeLeaseLapses(t *testing.T) {
	ctx := t.Context()
	s := memtest.New(t, memtest.Options{SessionTTL: 200 * time.Millisecond})
	conn := s.Client.Global()
	_, err := conn.Create(ctx, "jobs/j1", nil)
	require.NoError(t, err)
	lock, err := conn.Lock(ctx, "jobs", "worker-1")
	require.NoError(t, err)

	// The process freezes: nothing renews its session, which lapses
	// SessionTTL later. The lock's Done closes then; Check says why.
	s.Client.PauseKeepAlive()
	<-lock.Done()
	require.ErrorIs(t, lock.Check(ctx), topo.LockLost)

	// Resuming does not bring the lock back; another worker takes it.
	s.Client.ResumeKeepAlive()
	other, err := s.NewClient().Global().TryLock(ctx, "jobs", "worker-2")
	require.NoError(t, err)
	require.NoError(t, other.Check(ctx))
}

func TestRecipeLeaderCutOff(t *testing.T) {
	ctx := t.Context()
	s := memtest.New(t, memtest.Options{SessionTTL: 200 * time.Millisecond})
	a := newElection(t, s.Client, "a")
	b := newElection(t, s.NewClient(), "b")
	require.NoError(t, a.Await(ctx))
	mastership, err := a.WithMastership(ctx)
	require.NoError(t, err)
	termA, err := a.Term()
	require.NoError(t, err)

	// a is cut off. It steps down before the store lets its lease lapse
	// (its mastership context ends first); then b is elected.
	s.Client.Partition()
	<-mastership.Done()
	require.NoError(t, b.Await(ctx))
	termB, err := b.Term()
	require.NoError(t, err)
	require.Greater(t, termB.Token(), termA.Token())

	// Back online, a's writes fenced by its old term are refused.
	s.Client.Heal()
	_, err = topo.GuardedUpdate(ctx, s.Client.Global(), termA, "leader-state", []byte("a"), nil)
	require.ErrorIs(t, err, topo.LockLost)
}

// newElection returns c's candidacy as instance id in the election
// "scheduler", closed when the test ends.
func newElection(t *testing.T, c *memtest.Client, id string) *election.TopoElection {
	t.Helper()
	f, err := election.NewTopoFactory(c.Global(), id)
	require.NoError(t, err)
	e, err := f.NewTopoElection(t.Context(), "scheduler")
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}
