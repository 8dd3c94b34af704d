package copy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/copy"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/middleware"
	"github.com/topokit/topokit/topo/tree"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// backend opens Conns on one real server (or memorytopo), each at its own
// root.
type backend struct {
	name string
	open func(t *testing.T) topo.Conn
}

var rootSeq atomic.Int64

// realBackends starts etcd, ZooKeeper and Consul once for the calling
// test, and returns them with memorytopo.
func realBackends(t *testing.T) []backend {
	t.Helper()
	etcdAddr, zkAddr, consulAddr := etcdtest.Start(t), zktest.Start(t), consultest.Start(t)
	mem := memorytopo.NewFactory()
	open := func(t *testing.T, f topo.Factory, addr, prefix string) topo.Conn {
		t.Helper()
		c, err := f.Create("c", addr, fmt.Sprintf("%sroot%d", prefix, rootSeq.Add(1)))
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	return []backend{
		{"memory", func(t *testing.T) topo.Conn { return open(t, mem, "", "/") }},
		{"etcd", func(t *testing.T) topo.Conn { return open(t, etcd2topo.Factory{}, etcdAddr, "/") }},
		{"zk", func(t *testing.T) topo.Conn {
			return open(t, zk2topo.Factory{Options: zk2topo.Options{SessionTimeout: 10 * time.Second}}, zkAddr, "/")
		}},
		{"consul", func(t *testing.T) topo.Conn {
			return open(t, consultopo.NewFactory(consultopo.Options{SessionTTL: 20 * time.Second}), consulAddr, "")
		}},
	}
}

func kvs(kv ...string) []topo.KVInfo {
	var out []topo.KVInfo
	for i := 0; i < len(kv); i += 2 {
		out = append(out, topo.KVInfo{Path: kv[i], Value: []byte(kv[i+1])})
	}
	return out
}

// copyAll plans and executes files into dst under dir.
func copyAll(t *testing.T, dst topo.Conn, dir string, files []topo.KVInfo, po copy.PlanOptions, eo copy.ExecOptions) error {
	t.Helper()
	tree.SortByPath(files)
	plan, err := copy.PlanWrites(t.Context(), dst, dir, files, po)
	if err != nil {
		return err
	}
	return copy.Execute(t.Context(), dst, plan, "copying", eo)
}

func files2(t *testing.T, c topo.Conn) map[string]string {
	t.Helper()
	kv, err := c.List(t.Context(), "")
	if topo.IsErrType(err, topo.NoNode) {
		return map[string]string{}
	}
	require.NoError(t, err)
	out := map[string]string{}
	for _, f := range kv {
		out[f.Path] = string(f.Value)
	}
	return out
}

// Trees that every store holds byte for byte: binary, empty and
// largest values, values above batchBytes, names with spaces, non-ASCII
// and URL-special characters, a deep path, files with files below them,
// and Vitess's own topology; copied one write per request and in
// batches, compared, exported and read back.
func TestRealCopyRoundTrips(t *testing.T) {
	for _, be := range realBackends(t) {
		t.Run(be.name, func(t *testing.T) {
			for _, batch := range []int{1, 32} {
				eo := copy.ExecOptions{Batch: batch, Parallel: 4}
				t.Run(fmt.Sprint("batch", batch), func(t *testing.T) {
					all := make([]byte, 256)
					for i := range all {
						all[i] = byte(i)
					}
					big := bytes.Repeat([]byte{0xff, 0x00, 'x'}, topo.MaxValueSize/3+1)[:topo.MaxValueSize]
					mid := bytes.Repeat([]byte{0x01}, 130<<10)
					vitess, err := copy.ReadDir("../../testdata/vitess/vitess-local/global", "vt")
					require.NoError(t, err)
					files := append([]topo.KVInfo{
						{Path: "ks/all", Value: all},
						{Path: "ks/big", Value: big},
						{Path: "ks/empty", Value: []byte{}},
						{Path: "ks/mid1", Value: mid},
						{Path: "ks/mid2", Value: mid},
						{Path: "ks/name with space/é ü 日本", Value: []byte("u")},
						{Path: "ks/pct%2Fx?y#z&a=b+c", Value: []byte("p")},
						{Path: "ks/" + strings.Repeat("d/", 60) + "leaf", Value: []byte("deep")},
						{Path: "fc", Value: []byte("A")},
						{Path: "fc/b", Value: []byte("B")},
						{Path: "fc/b/c", Value: []byte("C")},
						{Path: "fc-x", Value: []byte("X")},
					}, vitess...)
					tree.SortByPath(files)
					dst := be.open(t)
					require.NoError(t, copyAll(t, dst, "", files, copy.PlanOptions{}, eo))
					got := mustList(t, dst, "")
					assert.Nil(t, copy.Compare(files, got))
					plan, err := copy.PlanWrites(t.Context(), dst, "", files, copy.PlanOptions{})
					require.NoError(t, err)
					assert.Equal(t, len(files), plan.Count(copy.Identical), "a second run writes nothing")

					for _, under := range []string{"ks", "vt"} {
						dir := filepath.Join(t.TempDir(), "x")
						_, err = copy.Export(t.Context(), mustList(t, dst, under), under, dir, copy.ExportOptions{Parallel: 3})
						require.NoError(t, err)
						back, err := copy.ReadDir(dir, under)
						require.NoError(t, err)
						assert.Nil(t, copy.Compare(mustList(t, dst, under), back))
					}
				})
			}
		})
	}
}

// ZooKeeper cannot hold an empty file with files below it (the znode reads
// as a directory): a plan that would write one there fails, naming it,
// before anything is written, instead of reporting a copy that lost it.
// The other stores hold it.
func TestRealEmptyFileWithFilesBelow(t *testing.T) {
	for _, be := range realBackends(t) {
		t.Run(be.name, func(t *testing.T) {
			for _, batch := range []int{1, 32} {
				t.Run(fmt.Sprint("batch", batch), func(t *testing.T) {
					eo := copy.ExecOptions{Batch: batch, Parallel: 4}
					dst := be.open(t)
					files := kvs("e", "", "e/f", "F", "g", "G")
					err := copyAll(t, dst, "", files, copy.PlanOptions{}, eo)
					if be.name != "zk" {
						require.NoError(t, err)
						assert.Nil(t, copy.Compare(files, mustList(t, dst, "")))
						return
					}
					require.Error(t, err)
					assert.True(t, topo.IsErrType(err, topo.InvalidArgument), "%v", err)
					assert.ErrorContains(t, err, "/e: an empty file with files below it")
					assert.Empty(t, files2(t, dst), "nothing written")

					// Also through a decorator (Unwrap() topo.Conn).
					wrapped := middleware.New(topo.ConnInfo{}, dst, middleware.Hooks{})
					err = copyAll(t, wrapped, "", files, copy.PlanOptions{}, eo)
					assert.True(t, topo.IsErrType(err, topo.InvalidArgument), "%v", err)

					// Nor below a file the destination holds, nor by an
					// overwrite.
					put(t, dst, "h/i", "I", "j", "J", "j/k", "K")
					err = copyAll(t, dst, "", kvs("h", ""), copy.PlanOptions{}, eo)
					assert.True(t, topo.IsErrType(err, topo.InvalidArgument), "%v", err)
					err = copyAll(t, dst, "", kvs("j", "", "j/k", "K"), copy.PlanOptions{Overwrite: true}, eo)
					assert.True(t, topo.IsErrType(err, topo.InvalidArgument), "%v", err)
					assert.Equal(t, map[string]string{"h/i": "I", "j": "J", "j/k": "K"}, files2(t, dst))
					// Nor when the plan deletes the files below it: the
					// last delete would take the emptied znode with it.
					err = copyAll(t, dst, "", kvs("h", "", "j", "J"), copy.PlanOptions{Overwrite: true, Delete: true}, eo)
					assert.True(t, topo.IsErrType(err, topo.InvalidArgument), "%v", err)
					assert.Equal(t, map[string]string{"h/i": "I", "j": "J", "j/k": "K"}, files2(t, dst))
					// Once they are gone, it can be written.
					require.NoError(t, copyAll(t, dst, "", kvs("j", "J"), copy.PlanOptions{Delete: true}, eo))
					require.NoError(t, copyAll(t, dst, "", kvs("h", "", "j", "J"), copy.PlanOptions{}, eo))
					assert.Equal(t, map[string]string{"h": "", "j": "J"}, files2(t, dst))
				})
			}
		})
	}
}

// nested returns n trees of files with files below them: pr/NN, pr/NN/c,
// pr/NN/c/d.
func nested(n int) []topo.KVInfo {
	var files []topo.KVInfo
	for i := range n {
		p := fmt.Sprintf("pr/%02d", i)
		files = append(files, topo.KVInfo{Path: p, Value: []byte("F")}, topo.KVInfo{Path: p + "/c", Value: []byte("C")}, topo.KVInfo{Path: p + "/c/d", Value: []byte("D")})
	}
	tree.SortByPath(files)
	return files
}

// Deleting files with files below them, in parallel -- rm -R
// (DeleteTree), a plan's deletes, and the revert of a failed copy --
// leaves nothing behind. On ZooKeeper such a file is a znode with
// children, whose delete only empties it: deleted concurrently with its
// last child it was left as an empty znode, which reads as an empty file,
// after a run that reported every file deleted or reverted. copy deletes
// a file after the files below it (phases); zk2topo's Delete and Txn also
// clean up an emptied znode whose last child went meanwhile. Batches of 2
// split each nested tree (pr/NN, pr/NN/c, pr/NN/c/d) across two
// transactions; 1 runs Deletes, 3 keeps each tree in one transaction.
func TestRealDeleteFilesWithFilesBelow(t *testing.T) {
	for _, be := range realBackends(t) {
		t.Run(be.name, func(t *testing.T) {
			for _, batch := range []int{1, 2, 3} {
				eo := copy.ExecOptions{Batch: batch, Parallel: 8}
				t.Run(fmt.Sprint("batch", batch), func(t *testing.T) {
					for range 3 {
						dst := be.open(t)
						require.NoError(t, copyAll(t, dst, "", nested(20), copy.PlanOptions{}, copy.ExecOptions{Batch: 32}))
						put(t, dst, "keep", "k")
						n, err := copy.DeleteTree(t.Context(), dst, mustList(t, dst, "pr"), eo)
						require.NoError(t, err)
						assert.Equal(t, 60, n)
						require.Equal(t, map[string]string{"keep": "k"}, files2(t, dst), "rm -R")

						require.NoError(t, copyAll(t, dst, "", nested(20), copy.PlanOptions{}, copy.ExecOptions{Batch: 32}))
						require.NoError(t, copyAll(t, dst, "", kvs("keep", "k"), copy.PlanOptions{Delete: true}, eo))
						require.Equal(t, map[string]string{"keep": "k"}, files2(t, dst), "copy --delete")

						// A copy that fails at its last file (another
						// writer created it since the plan) reverts the
						// rest.
						files := append(nested(20), topo.KVInfo{Path: "pr/zz", Value: []byte("mine")})
						plan, err := copy.PlanWrites(t.Context(), dst, "", files, copy.PlanOptions{})
						require.NoError(t, err)
						put(t, dst, "pr/zz", "theirs")
						err = copy.Execute(t.Context(), dst, plan, "copying", eo)
						var ee *copy.ExecError
						require.ErrorAs(t, err, &ee)
						assert.Empty(t, ee.Left)
						require.Equal(t, map[string]string{"keep": "k", "pr/zz": "theirs"}, files2(t, dst), "revert")
						des, err := dst.ListDir(t.Context(), "pr", false)
						require.NoError(t, err)
						require.Equal(t, []topo.DirEntry{{Name: "zz"}}, des)
					}
				})
			}
		})
	}
}

// Export refuses, before writing anything, a tree whose file at the
// exported path itself has files below it: written beside them, it took
// the place of the file of its own name below it (and vice versa), and
// the export reported success.
func TestRealExportFileAtItsOwnDirectory(t *testing.T) {
	for _, be := range realBackends(t) {
		t.Run(be.name, func(t *testing.T) {
			dst := be.open(t)
			put(t, dst, "ks", "top", "ks/ks", "inner", "ks/o", "o", "solo", "s")
			dir := filepath.Join(t.TempDir(), "x")
			_, err := copy.Export(t.Context(), mustList(t, dst, "ks"), "ks", dir, copy.ExportOptions{Parallel: 2})
			assert.True(t, topo.IsErrType(err, topo.InvalidPath), "%v", err)
			_, serr := os.Stat(dir)
			assert.True(t, os.IsNotExist(serr), "nothing exported")

			// A lone file is exported under its name.
			_, err = copy.Export(t.Context(), mustList(t, dst, "solo"), "solo", dir, copy.ExportOptions{})
			require.NoError(t, err)
			b, err := os.ReadFile(filepath.Join(dir, "solo"))
			require.NoError(t, err)
			assert.Equal(t, "s", string(b))
		})
	}
}

// Scenarios around the copy that hold on every store: lock and election
// entries are neither copied, listed as skipped, nor deleted by --delete;
// a batch larger than the store's transactions is written one file at a
// time; a run interrupted midway reverts every write, its overwrite
// included; an overwrite that lost to a concurrent writer reverts the run and
// keeps the writer's value.
func TestRealCopyAroundOthers(t *testing.T) {
	for _, be := range realBackends(t) {
		t.Run(be.name, func(t *testing.T) {
			t.Run("locks-elections", func(t *testing.T) {
				src, dst := be.open(t), be.open(t)
				put(t, src, "ks/a", "1", "ks/b/c", "2")
				put(t, dst, "ks/a", "old", "ks/x", "extra")
				for _, c := range []topo.Conn{src, dst} {
					ld, err := c.Lock(t.Context(), "ks", "me")
					require.NoError(t, err)
					t.Cleanup(func() { _ = ld.Unlock(t.Context()) })
					lp, err := c.NewLeaderParticipation("el", "id1")
					require.NoError(t, err)
					_, err = lp.Campaign(t.Context(), []byte("val"))
					require.NoError(t, err)
					t.Cleanup(lp.Stop)
				}
				l, err := tree.List(t.Context(), src, "")
				require.NoError(t, err)
				assert.False(t, l.Skipped(), "%+v", l)
				require.NoError(t, copyAll(t, dst, "", l.Files, copy.PlanOptions{Overwrite: true, Delete: true}, copy.ExecOptions{Batch: 32}))
				assert.Equal(t, map[string]string{"ks/a": "1", "ks/b/c": "2"}, files2(t, dst))
				lp, err := dst.NewLeaderParticipation("el", "id2")
				require.NoError(t, err)
				defer lp.Stop()
				_, err = lp.Leader(t.Context())
				require.NoError(t, err, "the election still has its leader")
				_, err = dst.TryLock(t.Context(), "ks", "other")
				assert.Error(t, err, "the lock is still held")
			})
			for _, batch := range []int{1, 8} {
				t.Run(fmt.Sprint("interrupted-batch", batch), func(t *testing.T) {
					dst := be.open(t)
					put(t, dst, "keep/x", "old")
					var files []topo.KVInfo
					for i := range 200 {
						files = append(files, topo.KVInfo{Path: fmt.Sprintf("keep/%03d/s/%d", i/3, i), Value: []byte("v")})
					}
					files = append(files, topo.KVInfo{Path: "keep/x", Value: []byte("new")})
					plan, err := copy.PlanWrites(t.Context(), dst, "", files, copy.PlanOptions{Overwrite: true})
					require.NoError(t, err)
					ctx, cancel := context.WithCancel(t.Context())
					defer cancel()
					p := &cancelAt{at: 50, cancel: cancel}
					err = copy.Execute(ctx, dst, plan, "copying", copy.ExecOptions{Batch: batch, Parallel: 8, Progress: p})
					var ee *copy.ExecError
					require.ErrorAs(t, err, &ee)
					assert.True(t, ee.Interrupted)
					assert.Equal(t, map[string]string{"keep/x": "old"}, files2(t, dst))
				})
			}
			t.Run("big-batch", func(t *testing.T) {
				dst := be.open(t)
				var files []topo.KVInfo
				for i := range 300 {
					files = append(files, topo.KVInfo{Path: fmt.Sprintf("bb/%03d", i), Value: []byte(fmt.Sprint(i))})
				}
				require.NoError(t, copyAll(t, dst, "", files, copy.PlanOptions{}, copy.ExecOptions{Batch: 300, Parallel: 2}))
				assert.Nil(t, copy.Compare(files, mustList(t, dst, "")))
			})
			for _, batch := range []int{1, 32} {
				t.Run(fmt.Sprint("concurrent-overwrite-batch", batch), func(t *testing.T) {
					dst := be.open(t)
					put(t, dst, "o/a", "old", "o/b", "old", "o/gone", "g")
					plan, err := copy.PlanWrites(t.Context(), dst, "o", kvs("o/a", "new", "o/b", "new"), copy.PlanOptions{Overwrite: true, Delete: true})
					require.NoError(t, err)
					_, err = dst.Update(t.Context(), "o/b", []byte("theirs"), nil)
					require.NoError(t, err)
					err = copy.Execute(t.Context(), dst, plan, "copying", copy.ExecOptions{Batch: batch, Parallel: 1})
					assert.True(t, topo.IsErrType(err, topo.BadVersion), "%v", err)
					assert.Equal(t, map[string]string{"o/a": "old", "o/b": "theirs", "o/gone": "g"}, files2(t, dst))
				})
			}
		})
	}
}

// cancelAt cancels a run at its at-th write.
type cancelAt struct {
	n      atomic.Int32
	at     int32
	cancel func()
}

func (c *cancelAt) Step() {
	if c.n.Add(1) == c.at {
		c.cancel()
	}
}
func (c *cancelAt) Done(bool) {}

// onFirstWrite runs fn at a run's first write.
type onFirstWrite struct {
	n  atomic.Int32
	fn func()
}

func (o *onFirstWrite) Step() {
	if o.n.Add(1) == 1 {
		o.fn()
	}
}
func (o *onFirstWrite) Done(bool) {}

// A revert leaves alone a file that another writer deleted and created
// anew after this run created it, and says so. On ZooKeeper the new file
// has the version this run's had (versions start at 0 again), and the
// revert deleted it at that version, reporting everything reverted.
func TestRealRevertLeavesRecreatedFile(t *testing.T) {
	for _, be := range realBackends(t) {
		t.Run(be.name, func(t *testing.T) {
			dst := be.open(t)
			plan, err := copy.PlanWrites(t.Context(), dst, "", kvs("a", "mine", "b", "mine", "z", "mine"), copy.PlanOptions{Overwrite: true})
			require.NoError(t, err)
			put(t, dst, "z", "theirs") // the run fails at z
			p := &onFirstWrite{fn: func() {
				// Between the run's write of a and its revert.
				assert.NoError(t, dst.Delete(t.Context(), "a", nil))
				_, err := dst.Create(t.Context(), "a", []byte("theirs"))
				assert.NoError(t, err)
			}}
			err = copy.Execute(t.Context(), dst, plan, "copying", copy.ExecOptions{Batch: 1, Parallel: 1, Progress: p})
			var ee *copy.ExecError
			require.ErrorAs(t, err, &ee)
			assert.Equal(t, map[string]string{"a": "theirs", "z": "theirs"}, files2(t, dst))
			require.Len(t, ee.Left, 1, "%v", err)
			assert.Equal(t, "a", ee.Left[0].Path)
			assert.True(t, topo.IsErrType(ee.Left[0].Err, topo.BadVersion), "%v", ee.Left[0].Err)
			assert.Contains(t, err.Error(), "1 file not reverted")
		})
	}
}

// TestRealDeleteTreeAtListedVersion: with AtListedVersion, DeleteTree
// keeps a file another writer rewrote after the listing, and stops with
// its BadVersion; a file deleted by another writer since counts as done.
// Batches of 1 run Deletes, 3 one transaction, refused, then Deletes.
func TestRealDeleteTreeAtListedVersion(t *testing.T) {
	for _, be := range realBackends(t) {
		t.Run(be.name, func(t *testing.T) {
			for _, batch := range []int{1, 3} {
				t.Run(fmt.Sprint("batch", batch), func(t *testing.T) {
					dst := be.open(t)
					put(t, dst, "d/a", "1", "d/b", "2", "d/c", "3")
					listed := mustList(t, dst, "d")
					_, err := dst.Update(t.Context(), "d/b", []byte("theirs"), nil)
					require.NoError(t, err)
					_, err = copy.DeleteTree(t.Context(), dst, listed, copy.ExecOptions{Batch: batch, Parallel: 1, AtListedVersion: true})
					var de *copy.DeleteError
					require.ErrorAs(t, err, &de)
					require.True(t, topo.IsErrType(err, topo.BadVersion), "%v", err)
					assert.Equal(t, "theirs", files2(t, dst)["d/b"], "a write made after the listing was deleted")

					listed = mustList(t, dst, "d")
					require.NoError(t, dst.Delete(t.Context(), "d/b", nil))
					n, err := copy.DeleteTree(t.Context(), dst, listed, copy.ExecOptions{Batch: batch, AtListedVersion: true})
					require.NoError(t, err)
					assert.Equal(t, len(listed)-1, n)
					assert.Empty(t, files2(t, dst))
				})
			}
		})
	}
}
