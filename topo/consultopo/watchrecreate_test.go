package consultopo

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/test/faultproxy"
)

// TestWatchOfFileRecreatedBetweenPolls deletes a watched file and creates
// it again while the watch's next blocking query is on its way (its
// requests delayed by a proxy): the watch must report the deletion (NoNode,
// then the channel closes), as etcd and memorytopo do, not the new file's
// value as a change of the file it watched.
func TestWatchOfFileRecreatedBetweenPolls(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := testRoot(t)
	px, err := faultproxy.New(agent.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = px.Close() })
	opts := testOptions()
	opts.Address = px.Addr()
	w, err := NewConn(opts, root)
	require.NoError(t, err)
	defer w.Close()
	c := newTestConn(t, root)

	_, err = c.Create(ctx, "w/f", []byte("v0"))
	require.NoError(t, err)
	_, ch, err := w.Watch(ctx, "w/f")
	require.NoError(t, err)
	px.SetDelay(time.Second) // no timing assertion: a margin for two writes
	_, err = c.Update(ctx, "w/f", []byte("v1"), nil)
	require.NoError(t, err)
	wd := <-ch
	require.NoError(t, wd.Err)
	require.Equal(t, "v1", string(wd.Contents))
	// The watch's next query is on its way, delayed.
	require.NoError(t, c.Delete(ctx, "w/f", nil))
	_, err = c.Create(ctx, "w/f", []byte("again"))
	require.NoError(t, err)
	select {
	case wd := <-ch:
		require.NotNil(t, wd)
		require.Truef(t, topo.IsErrType(wd.Err, topo.NoNode), "after a delete and a re-create: got %q (err %v), want NoNode", wd.Contents, wd.Err)
	case <-time.After(30 * time.Second):
		t.Fatal("no event after a delete and a re-create")
	}
}
