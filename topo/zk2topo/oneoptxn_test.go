package zk2topo

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// rawData reads p's data with the raw client: nil for a null buffer
// (length -1, as Vitess writes empty contents), non-nil for a buffer of
// length 0.
func rawData(t *testing.T, c *Conn, p string) ([]byte, *zk.Stat) {
	t.Helper()
	data, st, err := c.zkConn().Get(c.zkPath(p))
	require.NoError(t, err, p)
	return data, st
}

// TestUpdateOneOpTxnOutcomes: the outcomes of a compare-and-set Update and
// of an unconditional Update of empty contents (a one-op Txn since
// f2b834a1, readThenSet before) on every kind of znode (an ephemeral
// znode outside the reserved places is not a file: NoNode; an entry
// inside them is NodeExists), and the bytes they store.
func TestUpdateOneOpTxnOutcomes(t *testing.T) {
	ctx, c, version := emptyWriteFixture(t) // dir (directory only), file (with file/x)
	_, fv, err := c.Get(ctx, "file")
	require.NoError(t, err)
	zc := c.zkConn()
	_, err = zc.Create(c.zkPath("eph"), []byte("e"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)
	// An entry where entries may be (a segment "elections"): NodeExists.
	_, err = c.Create(ctx, "v/elections/x/keep", []byte("k"))
	require.NoError(t, err)
	_, err = zc.Create(c.zkPath("v/elections/x/entry"), []byte("e"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	require.NoError(t, err)

	for _, tc := range []struct {
		p    string
		data []byte
		v    topo.Version
		code topo.ErrorCode
	}{
		{"absent", []byte("x"), topo.NumericVersion(0), topo.NoNode},
		{"absent/below", nil, topo.NumericVersion(0), topo.NoNode},
		{"dir", []byte("x"), topo.NumericVersion(0), topo.NoNode},
		{"dir", nil, topo.NumericVersion(0), topo.NoNode},
		{"eph", []byte("x"), topo.NumericVersion(0), topo.NoNode},
		{"eph", nil, topo.NumericVersion(0), topo.NoNode},
		{"file", []byte("x"), topo.NumericVersion(7), topo.BadVersion},
		{"file", nil, topo.NumericVersion(7), topo.BadVersion},
		{"v/elections/x/entry", []byte("x"), topo.NumericVersion(0), topo.NodeExists},
		{"v/elections/x/entry", nil, topo.NumericVersion(0), topo.NodeExists},
		{"v/elections/x/entry", []byte("x"), nil, topo.NodeExists},
		{"v/elections/x/entry", nil, nil, topo.NodeExists},
		{"v/elections/x/keep", []byte("x"), topo.NumericVersion(3), topo.BadVersion},
		{"v/elections/x/absent", []byte("x"), topo.NumericVersion(0), topo.NoNode},
	} {
		before := version(tc.p)
		_, err := c.Update(ctx, tc.p, tc.data, tc.v)
		require.True(t, topo.IsErrType(err, tc.code), "%s %q: %v", tc.p, tc.data, err)
		var te *topo.TxnError
		require.False(t, errors.As(err, &te), "Update returned a TxnError: %v", err)
		require.Equal(t, before, version(tc.p), "%s written", tc.p)
	}
	_, err = c.Update(ctx, "absent", nil, nil)
	require.NoError(t, err)
	require.Equal(t, int32(-1), version("absent/below"))

	// Empty contents: the bytes stored.
	_, err = c.Update(ctx, "e/new", []byte{}, nil)
	require.NoError(t, err)
	_, err = c.Create(ctx, "e/old", []byte("x"))
	require.NoError(t, err)
	_, err = c.Update(ctx, "e/old", []byte{}, nil)
	require.NoError(t, err)
	_, err = c.Create(ctx, "e/cas", []byte("x"))
	require.NoError(t, err)
	_, err = c.Update(ctx, "e/cas", nil, topo.NumericVersion(0))
	require.NoError(t, err)
	for _, p := range []string{"e/new", "e/old", "e/cas"} {
		data, st := rawData(t, c, p)
		t.Logf("%s: data nil %v, len %d, version %d", p, data == nil, len(data), st.Version)
		require.Nil(t, data, "%s: empty contents stored as a buffer of length 0, not a null buffer", p)
	}

	// A compare-and-set of a file with children at its version, non-empty.
	nv, err := c.Update(ctx, "file", []byte("w"), fv)
	require.NoError(t, err)
	require.NotEqual(t, fv.String(), nv.String())
	data, _, err := c.Get(ctx, "file/x")
	require.NoError(t, err)
	require.Equal(t, "v", string(data))
}

// TestTxnFirstConditionOnLaggingFollower: a Conn whose server is a
// follower parted from its leader reads that follower's stale copy. A
// Txn whose first op is IfVersion at the version another client's
// acknowledged Update made must not fail with BadVersion on the strength
// of that stale read (before f2b834a1, every condition failure was the
// multi's, answered through the leader), nor a compare-and-set Update
// (which readThenSet also judged from its read). The follower cannot
// reach the leader: both end with the context.
func TestTxnFirstConditionOnLaggingFollower(t *testing.T) {
	e := zktest.StartEnsembleWithLinks(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	l := e.WaitLeader(zktest.StartTimeout)
	f := (l + 1) % 3
	root := freshRoot(t)
	w := openConn(t, []string{e.Addr(l)}, root)
	r := openConn(t, []string{e.Addr(f)}, root)
	_, err := w.Create(ctx, "p", []byte("0"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, _, err := r.Get(ctx, "p")
		return err == nil
	}, time.Minute, 10*time.Millisecond)
	e.CutLink(f, l)
	t.Cleanup(func() { e.HealLink(f, l) })
	v1, err := w.Update(ctx, "p", []byte("1"), nil)
	require.NoError(t, err)
	_, rv, err := r.Get(ctx, "p")
	require.NoError(t, err)
	t.Logf("written at %v; the parted follower reads %v", v1, rv)

	tctx, tcancel := context.WithTimeout(ctx, 2*time.Second)
	defer tcancel()
	_, err = r.Txn(tctx, topo.IfVersion("p", v1), topo.UpdateOp("q", []byte("x"), nil))
	t.Logf("Txn: %v", err)
	require.Error(t, err)
	require.False(t, topo.IsErrType(err, topo.BadVersion), "BadVersion judged from a stale read: %v", err)
	uctx, ucancel := context.WithTimeout(ctx, 2*time.Second)
	defer ucancel()
	_, err = r.Update(uctx, "p", []byte("2"), v1)
	t.Logf("Update: %v", err)
	require.Error(t, err)
	require.False(t, topo.IsErrType(err, topo.BadVersion), "Update: BadVersion judged from a stale read: %v", err)
}
