package copy_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/copy"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/tree"
)

// stores returns two stores of one memory factory, and the factory for
// its faults.
func stores(t *testing.T) (src, dst topo.Conn, f *memorytopo.Factory) {
	t.Helper()
	f = memorytopo.NewFactory()
	a, err := f.NewConn("a", "/r")
	require.NoError(t, err)
	b, err := f.NewConn("b", "/r")
	require.NoError(t, err)
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	return a, b, f
}

func put(t *testing.T, c topo.Conn, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		_, err := c.Create(t.Context(), kv[i], []byte(kv[i+1]))
		require.NoError(t, err)
	}
}

func files(t *testing.T, c topo.Conn, dir string) map[string]string {
	t.Helper()
	l, err := tree.List(t.Context(), c, dir)
	require.NoError(t, err)
	out := map[string]string{}
	for _, f := range l.Files {
		out[f.Path] = string(f.Value)
	}
	return out
}

type counter struct {
	steps atomic.Int32
	ok    atomic.Int32 // 1 done ok, 2 done not ok
}

func (c *counter) Step() { c.steps.Add(1) }
func (c *counter) Done(ok bool) {
	if ok {
		c.ok.Store(1)
	} else {
		c.ok.Store(2)
	}
}

// A copy writes every file, skips the identical ones, and reports each
// write as progress.
func TestCopySubtree(t *testing.T) {
	src, dst, _ := stores(t)
	put(t, src, "ks/a", "1", "ks/b/c", "2", "ks/b/d", "3", "other", "x")
	put(t, dst, "ks/a", "1")
	l, err := tree.List(t.Context(), src, "ks")
	require.NoError(t, err)
	plan, err := copy.PlanWrites(t.Context(), dst, "ks", l.Files, copy.PlanOptions{})
	require.NoError(t, err)
	assert.Equal(t, 2, plan.Count(copy.Create))
	assert.Equal(t, 1, plan.Count(copy.Identical))
	assert.Equal(t, 2, plan.Bytes())
	var p counter
	require.NoError(t, copy.Execute(t.Context(), dst, plan, "copying", copy.ExecOptions{Batch: 2, Progress: &p}))
	assert.Equal(t, map[string]string{"ks/a": "1", "ks/b/c": "2", "ks/b/d": "3"}, files(t, dst, ""))
	assert.EqualValues(t, 2, p.steps.Load())
	assert.EqualValues(t, 1, p.ok.Load())
	assert.Nil(t, copy.Compare(l.Files, mustList(t, dst, "ks")))
}

func mustList(t *testing.T, c topo.Conn, dir string) []topo.KVInfo {
	l, err := tree.List(t.Context(), c, dir)
	require.NoError(t, err)
	return l.Files
}

// A file that differs fails the plan with NodeExists unless Overwrite;
// Delete plans the destination's extra files; bad paths and sizes are
// refused before anything is read.
func TestPlanChecks(t *testing.T) {
	src, dst, _ := stores(t)
	put(t, src, "a", "new")
	put(t, dst, "a", "old", "extra", "e")
	_, err := copy.PlanWrites(t.Context(), dst, "", mustList(t, src, ""), copy.PlanOptions{})
	assert.True(t, topo.IsErrType(err, topo.NodeExists), "%v", err)
	var ce *copy.ClashError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, []string{"a"}, ce.Paths)
	plan, err := copy.PlanWrites(t.Context(), dst, "", mustList(t, src, ""), copy.PlanOptions{Overwrite: true, Delete: true})
	require.NoError(t, err)
	assert.Equal(t, 1, plan.Count(copy.Overwrite))
	assert.Equal(t, 1, plan.Count(copy.Delete))
	require.NoError(t, copy.Execute(t.Context(), dst, plan, "copying", copy.ExecOptions{}))
	assert.Equal(t, map[string]string{"a": "new"}, files(t, dst, ""))

	_, err = copy.PlanWrites(t.Context(), dst, "", []topo.KVInfo{{Path: "x/locks/y"}}, copy.PlanOptions{})
	assert.True(t, topo.IsErrType(err, topo.InvalidPath), "%v", err)
	_, err = copy.PlanWrites(t.Context(), dst, "", []topo.KVInfo{{Path: "big", Value: make([]byte, topo.MaxValueSize+1)}}, copy.PlanOptions{})
	assert.True(t, topo.IsErrType(err, topo.InvalidArgument), "%v", err)
}

// When a write fails, everything the run wrote is reverted: the
// destination holds what it held before, and the error says so.
func TestExecuteRevertsOnFailure(t *testing.T) {
	src, dst, f := stores(t)
	put(t, src, "a", "1", "b", "2", "c", "3", "d", "4")
	put(t, dst, "b", "old")
	plan, err := copy.PlanWrites(t.Context(), dst, "", mustList(t, src, ""), copy.PlanOptions{Overwrite: true})
	require.NoError(t, err)
	f.AddFault(memorytopo.Fault{Op: memorytopo.OpCreate, Path: "d", Err: topo.PermissionDenied})
	var p counter
	err = copy.Execute(t.Context(), dst, plan, "copying", copy.ExecOptions{Parallel: 1, Batch: 1, Progress: &p})
	var ee *copy.ExecError
	require.ErrorAs(t, err, &ee)
	assert.True(t, topo.IsErrType(err, topo.PermissionDenied), "%v", err)
	assert.Equal(t, "d", ee.FailedAt)
	assert.Equal(t, 3, ee.Written)
	assert.True(t, ee.Reverted)
	assert.Empty(t, ee.Left)
	assert.Contains(t, err.Error(), "everything this run wrote was reverted")
	assert.EqualValues(t, 2, p.ok.Load(), "progress ends as failed")
	assert.Equal(t, map[string]string{"b": "old"}, files(t, dst, ""))
}

// A run whose context ends starts no new write and reverts what it wrote.
func TestExecuteInterrupted(t *testing.T) {
	src, dst, _ := stores(t)
	put(t, src, "a", "1", "b", "2")
	plan, err := copy.PlanWrites(t.Context(), dst, "", mustList(t, src, ""), copy.PlanOptions{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = copy.Execute(ctx, dst, plan, "copying", copy.ExecOptions{})
	var ee *copy.ExecError
	require.ErrorAs(t, err, &ee)
	assert.True(t, ee.Interrupted)
	assert.Empty(t, files(t, dst, ""))
}

func TestCompare(t *testing.T) {
	a := []topo.KVInfo{{Path: "a", Value: []byte("1")}, {Path: "b", Value: []byte("2")}, {Path: "c", Value: []byte("3")}}
	b := []topo.KVInfo{{Path: "b", Value: []byte("2")}, {Path: "c", Value: []byte("33")}, {Path: "d"}}
	assert.Equal(t, []copy.Difference{
		{Path: "a", Kind: copy.OnlyInFrom, FromBytes: 1},
		{Path: "c", Kind: copy.Differs, FromBytes: 1, ToBytes: 2},
		{Path: "d", Kind: copy.OnlyInTo},
	}, copy.Compare(a, b))
	assert.Equal(t, "only-in-from", copy.OnlyInFrom.String())
}

func TestDeleteTree(t *testing.T) {
	_, dst, _ := stores(t)
	put(t, dst, "ks/a", "1", "ks/b/c", "2", "ks/b/d", "3", "keep", "k")
	n, err := copy.DeleteTree(t.Context(), dst, mustList(t, dst, "ks"), copy.ExecOptions{Batch: 2})
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, map[string]string{"keep": "k"}, files(t, dst, ""))
}

// Export then ReadDir gives the same files back, byte for byte; a store
// path that is both a file and a directory is refused before writing.
func TestExportReadDirRoundTrip(t *testing.T) {
	src, dst, _ := stores(t)
	put(t, src, "ks/a", "1", "ks/b/c", "\x00\xff")
	dir := filepath.Join(t.TempDir(), "out")
	n, err := copy.Export(t.Context(), mustList(t, src, "ks"), "ks", dir, copy.ExportOptions{Parallel: 2})
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	got, err := copy.ReadDir(dir, "ks")
	require.NoError(t, err)
	assert.Nil(t, copy.Compare(mustList(t, src, "ks"), got))

	put(t, dst, "x", "f", "x/y", "g")
	_, err = copy.Export(t.Context(), mustList(t, dst, ""), "", filepath.Join(t.TempDir(), "clash"), copy.ExportOptions{})
	assert.True(t, topo.IsErrType(err, topo.InvalidPath), "%v", err)

	require.NoError(t, os.Symlink(filepath.Join(dir, "a"), filepath.Join(dir, "link")))
	_, err = copy.ReadDir(dir, "ks")
	assert.ErrorContains(t, err, "not a regular file")
}
