package memorytopo_test

import (
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestInPlaceUpdatesAndSnapshots: List and Txn are snapshots although
// rewrites of existing files run beside each other (Update's in-place
// path). Each writer rewrites its file a and then its file z with the
// same round number, so every snapshot must show a at z's round or one
// ahead; a List or Txn that let an in-place rewrite land while it
// collected could show z ahead of a, or a two rounds ahead. Files
// between a and z make each List take long enough for that.
func TestInPlaceUpdatesAndSnapshots(t *testing.T) {
	ctx := testCtx(t)
	f := memorytopo.NewFactory()
	c := newConn(t, f)
	const writers, fillers, rounds = 4, 50, 2000
	pa := func(w int) string { return "w" + strconv.Itoa(w) + "/a" }
	pb := func(w int) string { return "w" + strconv.Itoa(w) + "/z" }
	for w := range writers {
		_, err := c.Create(ctx, pa(w), []byte("0"))
		require.NoError(t, err)
		for i := range fillers {
			_, err = c.Create(ctx, "w"+strconv.Itoa(w)+"/m"+strconv.Itoa(i), nil)
			require.NoError(t, err)
		}
		_, err = c.Create(ctx, pb(w), []byte("0"))
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= rounds; i++ {
				v := []byte(strconv.Itoa(i))
				if _, err := c.Update(ctx, pa(w), v, nil); err != nil {
					t.Error(err)
					return
				}
				if _, err := c.Update(ctx, pb(w), v, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	check := func(what string, a, b []byte) {
		ra, _ := strconv.Atoi(string(a))
		rb, _ := strconv.Atoi(string(b))
		if ra != rb && ra != rb+1 {
			t.Errorf("%s: a at round %d, b at round %d: not a snapshot", what, ra, rb)
		}
	}
	go func() { wg.Wait(); close(done) }()
	per := fillers + 2
	for n := 0; ; n++ {
		select {
		case <-done:
			return
		default:
		}
		kvs, err := c.List(ctx, "w")
		require.NoError(t, err)
		require.Len(t, kvs, per*writers)
		for w := range writers {
			check("List", kvs[per*w].Value, kvs[per*w+per-1].Value)
		}
		// A Txn's conditions see the store as one state: read both
		// files, then confirm both versions in one transaction; when
		// it succeeds, the two reads were of one state only if the
		// values agree.
		w := n % writers
		a, va, err := c.Get(ctx, pa(w))
		require.NoError(t, err)
		b, vb, err := c.Get(ctx, pb(w))
		require.NoError(t, err)
		if _, err := c.Txn(ctx, topo.IfVersion(pa(w), va), topo.IfVersion(pb(w), vb)); err == nil {
			check("Txn", a, b)
		}
		// Leave the store's lock free a while (Get takes no lock), so
		// that the writers take Update's fast path between snapshots.
		for range 8 {
			if _, _, err := c.Get(ctx, pa(w)); err != nil {
				t.Fatal(err)
			}
		}
	}
}
