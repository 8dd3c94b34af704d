package claims_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/claims"
)

// Inspect shows a lock's holder, with its fencing token, and its waiters
// in the order they will be served, without joining the queue; an empty
// queue has no holder, and a reserved path is refused.
func TestInspectShowsHolderAndWaiters(t *testing.T) {
	s := newStore()
	ctx := t.Context()
	e, _ := newEngine(s)
	st, err := e.Inspect(ctx, claims.Queue{Path: "d"})
	require.NoError(t, err)
	assert.False(t, st.Held)
	assert.Empty(t, st.Waiting)

	holder, err := e.LockName(ctx, "d", "holder")
	require.NoError(t, err)
	for i, name := range []string{"w1", "w2"} {
		we, _ := newEngine(s)
		go func() { _, _ = we.LockName(ctx, "d", name) }()
		eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.waiting == i+1 })
	}
	st, err = e.Inspect(ctx, claims.Queue{Path: "/d/"})
	require.NoError(t, err)
	require.True(t, st.Held)
	assert.Equal(t, "holder", st.Holder.Contents)
	assert.Equal(t, holder.Token(), st.Holder.Token)
	require.Len(t, st.Waiting, 2)
	assert.Equal(t, "w1", st.Waiting[0].Contents)
	assert.Equal(t, "w2", st.Waiting[1].Contents)
	assert.Greater(t, st.Waiting[1].Token, st.Waiting[0].Token)
	assert.Greater(t, st.Waiting[0].Token, st.Holder.Token)

	_, err = e.Inspect(ctx, claims.Queue{Path: "d/locks"})
	assert.True(t, topo.IsErrType(err, topo.InvalidPath), "%v", err)
}
