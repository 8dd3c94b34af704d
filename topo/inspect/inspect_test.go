package inspect_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/semaphore"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/inspect"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/middleware"
)

func newConns(t *testing.T) (a, b topo.Conn) {
	t.Helper()
	f := memorytopo.NewFactory()
	c1, err := f.NewConn("", "/r")
	require.NoError(t, err)
	c2, err := f.NewConn("", "/r")
	require.NoError(t, err)
	t.Cleanup(c1.Close)
	t.Cleanup(c2.Close)
	return c1, c2
}

// The holder of a lock is named from another client; a lock nobody holds
// is NoNode.
func TestLockHolder(t *testing.T) {
	holder, other := newConns(t)
	_, err := holder.Create(t.Context(), "ks/f", []byte("x"))
	require.NoError(t, err)
	_, err = inspect.LockHolder(t.Context(), other, "ks")
	assert.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)

	ld, err := holder.Lock(t.Context(), "ks", "holder one")
	require.NoError(t, err)
	h, err := inspect.LockHolder(t.Context(), other, "/ks")
	require.NoError(t, err)
	assert.Equal(t, "holder one", h)

	_, err = holder.Create(t.Context(), "ks/sub/g", []byte("y"))
	require.NoError(t, err)
	ld2, err := holder.Lock(t.Context(), "ks/sub", "holder two")
	require.NoError(t, err)
	locks, err := inspect.Locks(t.Context(), other, "")
	require.NoError(t, err)
	require.Len(t, locks, 2)
	assert.Equal(t, []string{"ks", "holder one", "ks/sub", "holder two"}, []string{locks[0].Dir, locks[0].Holder, locks[1].Dir, locks[1].Holder})
	assert.Equal(t, ld.Token(), locks[0].Token)
	assert.Equal(t, ld2.Token(), locks[1].Token)
	require.NoError(t, ld2.Unlock(t.Context()))

	require.NoError(t, ld.Unlock(t.Context()))
	_, err = inspect.LockHolder(t.Context(), other, "ks")
	assert.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)

	_, err = inspect.LockHolder(t.Context(), other, "a//../b")
	assert.True(t, topo.IsErrType(err, topo.InvalidPath), "%v", err)
}

// fakeReader is a backend Conn that reads lock holders itself, behind a
// decorator.
type fakeReader struct{ topo.Conn }

func (fakeReader) LockHolder(context.Context, string) (string, error) { return "from the backend", nil }

// A backend's LockHolderReader is found behind decorators (Unwrap).
func TestLockHolderReaderBehindMiddleware(t *testing.T) {
	c, _ := newConns(t)
	wrapped := topo.Decorate(topo.ConnInfo{}, fakeReader{c}, middleware.Logging(slog.New(slog.DiscardHandler)))
	h, err := inspect.LockHolder(t.Context(), wrapped, "ks")
	require.NoError(t, err)
	assert.Equal(t, "from the backend", h)
}

// plainConn is a Conn with none of the optional interfaces of its
// backend, as a custom backend's: LockHolder falls back to reading the
// lock's entries.
type plainConn struct{ topo.Conn }

// On a Conn without QueueReader, LockHolder names the oldest entry, not a
// waiter behind it, also when the holder's description is empty.
func TestLockHolderFallbackWithWaiter(t *testing.T) {
	holder, waiter := newConns(t)
	_, err := holder.Create(t.Context(), "ks/f", []byte("x"))
	require.NoError(t, err)
	checkHolderWithWaiter(t, holder, waiter, holder, plainConn{holder})
}

// Leader names the participant that leads, and nobody before.
func TestLeader(t *testing.T) {
	a, b := newConns(t)
	l, err := inspect.Leader(t.Context(), b, "primary")
	require.NoError(t, err)
	assert.Empty(t, l.ID, "nobody leads yet")

	lp, err := a.NewLeaderParticipation("primary", "candidate-1")
	require.NoError(t, err)
	defer lp.Stop()
	_, err = lp.WaitForLeadership()
	require.NoError(t, err)
	l, err = inspect.Leader(t.Context(), b, "primary")
	require.NoError(t, err)
	assert.Equal(t, "candidate-1", l.ID)
	assert.Positive(t, l.Token)
	es, err := inspect.Elections(t.Context(), b)
	require.NoError(t, err)
	assert.Equal(t, []inspect.Election{{Name: "primary", Leader: l, Candidates: []inspect.Entry{{Token: l.Token, Contents: "candidate-1"}}}}, es)
}

// SemaphoreHolders lists the holders and the limit without a handle.
func TestSemaphoreHolders(t *testing.T) {
	a, b := newConns(t)
	hs, limit, err := inspect.SemaphoreHolders(t.Context(), b, "sem")
	require.NoError(t, err)
	assert.Empty(t, hs)
	assert.Zero(t, limit)

	s, err := semaphore.New(a, "sem", 2, semaphore.Options{Description: "worker 1"})
	require.NoError(t, err)
	ld, err := s.Acquire(t.Context())
	require.NoError(t, err)
	defer func() { _ = ld.Unlock(context.WithoutCancel(t.Context())) }()
	hs, limit, err = inspect.SemaphoreHolders(t.Context(), b, "sem")
	require.NoError(t, err)
	assert.Equal(t, 2, limit)
	require.Len(t, hs, 1)
	assert.Equal(t, "worker 1", hs[0].Description)
	assert.Equal(t, ld.Token(), hs[0].Token)

	_, _, err = inspect.SemaphoreHolders(t.Context(), b, "/")
	assert.True(t, topo.IsErrType(err, topo.InvalidPath), "%v", err)
}

// The memory store keeps nothing beyond the interface's version.
func TestStoreMetaMemory(t *testing.T) {
	a, _ := newConns(t)
	_, err := a.Create(t.Context(), "f", []byte("x"))
	require.NoError(t, err)
	m, err := inspect.StoreMeta(t.Context(), a, "f")
	require.NoError(t, err)
	assert.Nil(t, m)
}

// Elections finds nested election names on memorytopo.
func TestNestedElectionsMemory(t *testing.T) {
	f := memorytopo.NewFactory()
	open := func() topo.Conn {
		c, err := f.NewConn("", "/r")
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	checkNestedElections(t, open(), open(), open(), true)
}
