package zk2topo

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// ZooKeeper opcodes the tests of this file count.
const (
	opcodeExists       = 3
	opcodeGetChildren2 = 12 // a Stat read with the children's names (kindOn)
	opcodeMulti        = 14
)

// opCounter is a Dialer (Options.Dialer) whose connections count the
// requests written by opcode, and run before() (when set) before a
// request's frame is written: a test's own writes on another client then
// reach the server between two requests of the Conn, in a known order.
type opCounter struct {
	mu     sync.Mutex
	counts map[int32]int
	before func(op int32)
}

func (o *opCounter) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &opConn{Conn: c, o: o, first: true}, nil
}

// count returns how many requests of opcode op were written.
func (o *opCounter) count(op int32) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[op]
}

// reset forgets the counts.
func (o *opCounter) reset() {
	o.mu.Lock()
	o.counts = nil
	o.mu.Unlock()
}

func (o *opCounter) setBefore(f func(op int32)) {
	o.mu.Lock()
	o.before = f
	o.mu.Unlock()
}

// opConn parses the frames written on one connection: 4 bytes of length,
// then the body, which starts with the xid and the opcode (except the
// connect request, the connection's first frame).
type opConn struct {
	net.Conn
	o *opCounter

	mu    sync.Mutex
	first bool
	hdr   [12]byte
	nhdr  int
	left  int // bytes of the current frame still to skip
}

func (c *opConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	var ops []int32
	for b := p; len(b) > 0; {
		if c.left > 0 {
			k := min(c.left, len(b))
			c.left -= k
			b = b[k:]
			continue
		}
		k := copy(c.hdr[c.nhdr:], b)
		c.nhdr += k
		b = b[k:]
		if c.nhdr < len(c.hdr) {
			continue
		}
		length := int(binary.BigEndian.Uint32(c.hdr[:4]))
		xid := int32(binary.BigEndian.Uint32(c.hdr[4:8]))
		if c.first {
			c.first = false
		} else if xid > 0 {
			ops = append(ops, int32(binary.BigEndian.Uint32(c.hdr[8:12])))
		}
		c.nhdr, c.left = 0, max(length-8, 0)
	}
	c.mu.Unlock()
	c.o.mu.Lock()
	if c.o.counts == nil {
		c.o.counts = map[int32]int{}
	}
	for _, op := range ops {
		c.o.counts[op]++
	}
	before := c.o.before
	c.o.mu.Unlock()
	if before != nil {
		for _, op := range ops {
			before(op)
		}
	}
	return c.Conn.Write(p)
}

// openCounted opens a Conn at root whose requests oc counts.
func openCounted(t *testing.T, oc *opCounter, root string) *Conn {
	t.Helper()
	c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, Dialer: oc.dial}, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// shardPaths are n files in n directories of their own under
// ks/shards, the shape of a Vitess keyspace's shard records.
func shardPaths(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("ks/shards/%d/Shard", i)
	}
	return out
}

// TestTxnParentCreatedByAnotherOp: a write whose missing parent is the
// file of another write of the same Txn, placed after it. The multi used
// to create that parent as an empty directory and then fail at the other
// write's create (NodeExists, on a znode that existed only inside the
// failed multi), again and again, until it gave up, Unavailable, with no
// other writer about. The parent is now created once, with its file's
// contents.
func TestTxnParentCreatedByAnotherOp(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	for _, tc := range []struct {
		name string
		ops  []topo.TxnOp
	}{
		{"create", []topo.TxnOp{topo.CreateOp("x/y", []byte("y")), topo.CreateOp("x", []byte("x"))}},
		{"update without version", []topo.TxnOp{topo.UpdateOp("u/v", []byte("v"), nil), topo.UpdateOp("u", []byte("u"), nil)}},
		{"deeper", []topo.TxnOp{topo.CreateOp("a/b/c", []byte("c")), topo.CreateOp("a", []byte("a")), topo.CreateOp("a/b", []byte("b"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, err := c.Txn(ctx, tc.ops...)
			require.NoError(t, err)
			for i, op := range tc.ops {
				data, v, err := c.Get(ctx, op.Path)
				require.NoError(t, err, op.Path)
				require.Equal(t, string(op.Contents), string(data), op.Path)
				require.Equal(t, vs[i], v, op.Path)
				require.Equal(t, topo.NumericVersion(0), v, op.Path)
			}
		})
	}
}

// TestTxnNewDirectoriesRequests: a Txn of 32 creates of files in 32
// directories that do not exist yet (what topoctl's import and copy send
// into an empty root) sends two multis (the first fails for want of the
// parents) and, between them, one Stat read of each distinct ancestor of
// the files (35: the 32 directories, ks/shards, ks and the root). It used
// to read the ancestors of the first failing file, and then the Stat of
// every file and every ancestor again (71 reads, one more round trip).
// No directory znode gets data.
func TestTxnNewDirectoriesRequests(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	var oc opCounter
	c := openCounted(t, &oc, root)
	raw := rawConn(t)
	paths := shardPaths(32)
	ops := make([]topo.TxnOp, len(paths))
	for i, p := range paths {
		ops[i] = topo.CreateOp(p, []byte("shard "+p))
	}
	_, err := c.Txn(ctx, ops...)
	require.NoError(t, err)
	require.Equal(t, 2, oc.count(opcodeMulti), "multis")
	require.Equal(t, 35, oc.count(opcodeExists), "Stat reads")
	for _, p := range paths {
		data, _, err := c.Get(ctx, p)
		require.NoError(t, err)
		require.Equal(t, "shard "+p, string(data))
		dir, st, err := raw.Get(root + "/" + p[:len(p)-len("/Shard")])
		require.NoError(t, err)
		require.Empty(t, dir, "a directory znode has no data")
		require.Equal(t, int32(0), st.Version)
	}
	// Into directories that exist now: one multi, no read.
	oc.reset()
	for i, p := range paths {
		ops[i] = topo.CreateOp(p+"2", []byte("v"))
	}
	_, err = c.Txn(ctx, ops...)
	require.NoError(t, err)
	require.Equal(t, 1, oc.count(opcodeMulti), "multis")
	require.Equal(t, 0, oc.count(opcodeExists), "Stat reads")
}

// TestTxnParentCreatedConcurrently: another client creates a missing
// parent directory (or a file at its path) between the Stat reads a Txn's
// second multi was built on and that multi, which then fails at the
// parent's create (NodeExists) and writes nothing; the Txn reads the
// parents again and succeeds with a third multi, never reporting a
// condition failure, never writing the other client's znode.
func TestTxnParentCreatedConcurrently(t *testing.T) {
	for _, asFile := range []bool{false, true} {
		t.Run(fmt.Sprintf("file=%v", asFile), func(t *testing.T) {
			ctx := txnCtx(t)
			root := freshRoot(t)
			var oc opCounter
			c := openCounted(t, &oc, root)
			raw := rawConn(t)
			_, err := c.Create(ctx, "ks/keep", []byte("k"))
			require.NoError(t, err)
			var data []byte
			if asFile {
				data = []byte("theirs")
			}
			multis := 0
			oc.setBefore(func(op int32) {
				if op != opcodeMulti {
					return
				}
				if multis++; multis == 2 {
					_, err := raw.Create(root+"/ks/shards", data, 0, zk.WorldACL(zk.PermAll))
					assert.NoError(t, err) // on the client's send goroutine
				}
			})
			paths := shardPaths(8)
			ops := make([]topo.TxnOp, len(paths))
			for i, p := range paths {
				ops[i] = topo.CreateOp(p, []byte("v"))
			}
			_, err = c.Txn(ctx, ops...)
			require.NoError(t, err)
			require.Equal(t, 3, multis)
			for _, p := range paths {
				got, _, err := c.Get(ctx, p)
				require.NoError(t, err)
				require.Equal(t, "v", string(got))
			}
			got, st, err := raw.Get(root + "/ks/shards")
			require.NoError(t, err)
			require.Equal(t, string(data), string(got), "the other client's znode is left as it wrote it")
			require.Equal(t, int32(0), st.Version)
		})
	}
}

// TestTxnDeleteCleanupBatched: a Txn deleting 32 files, each the last in
// its own directory, removes the 32 directories it left empty with one
// more multi, after one Stat read of each and, in the same round trip,
// of their ancestors below the root (ks/shards and ks: a directory their
// removal empties goes in that multi too), and then reads the level
// above again (ks/shards, which keeps two other files, and its ancestor
// ks): 36 Stat reads in three round trips. It used to remove them one
// directory at a time, each with a delete of its own after two Stat
// reads, and then two Stat reads of the level above, one round trip
// after the other.
// A directory left holding only an empty "locks" znode goes too; one
// that keeps a file, and one that is a file itself, stay.
func TestTxnDeleteCleanupBatched(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	var oc opCounter
	c := openCounted(t, &oc, root)
	raw := rawConn(t)
	paths := shardPaths(32)
	for _, p := range append([]string{"ks/shards/keep1", "ks/shards/keep2"}, paths...) {
		_, err := c.Create(ctx, p, []byte("v"))
		require.NoError(t, err)
	}
	ops := make([]topo.TxnOp, len(paths))
	for i, p := range paths {
		ops[i] = topo.DeleteOp(p, nil)
	}
	oc.reset()
	_, err := c.Txn(ctx, ops...)
	require.NoError(t, err)
	require.Equal(t, 2, oc.count(opcodeMulti), "multis")
	require.Equal(t, 36, oc.count(opcodeExists), "Stat reads")
	children, _, err := raw.Children(root + "/ks/shards")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"keep1", "keep2"}, children)

	// Mixed: an empty locks znode left (goes), a sibling file (stays), a
	// directory that is a file itself (stays, with its data).
	for _, p := range []string{"m/locked/f", "m/sibling/f", "m/sibling/g", "m/file/f"} {
		_, err := c.Create(ctx, p, []byte("v"))
		require.NoError(t, err)
	}
	_, err = c.Create(ctx, "m/file", []byte("data")) // the directory becomes the file
	require.NoError(t, err)
	l, err := c.Lock(ctx, "m/locked", "x")
	require.NoError(t, err)
	require.NoError(t, l.Unlock(ctx))
	_, err = c.Txn(ctx, topo.DeleteOp("m/locked/f", nil), topo.DeleteOp("m/sibling/f", nil), topo.DeleteOp("m/file/f", nil))
	require.NoError(t, err)
	for zp, want := range map[string]bool{"/m/locked": false, "/m/sibling": true, "/m/sibling/g": true, "/m/file": true} {
		ok, _, err := raw.Exists(root + zp)
		require.NoError(t, err)
		require.Equal(t, want, ok, zp)
	}
	data, _, err := c.Get(ctx, "m/file")
	require.NoError(t, err)
	require.Equal(t, "data", string(data))
}

// TestTxnContention: a Txn that another client keeps defeating (the
// directory a CreateOp turns into the file gets a new version between
// every Stat read and multi) gives up after ten multis with
// ResourceExhausted wrapping ErrTxnContention: nothing of it was applied.
// It used to say Unavailable, which means the outcome is unknown. Called
// again once the other client stops, the same Txn succeeds.
func TestTxnContention(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	var oc opCounter
	c := openCounted(t, &oc, root)
	raw := rawConn(t)
	_, err := c.Create(ctx, "d/child", []byte("c"))
	require.NoError(t, err)
	bump := func(op int32) {
		if op == opcodeMulti {
			_, err := raw.Set(root+"/d", nil, -1) // still only a directory
			assert.NoError(t, err)                // on the client's send goroutine
		}
	}
	oc.setBefore(bump)
	before := fileTree(t, raw, root)
	_, err = c.Txn(ctx, topo.CreateOp("d", []byte("file")), topo.CreateOp("e", []byte("e")))
	require.ErrorIs(t, err, topo.ResourceExhausted)
	require.ErrorIs(t, err, ErrTxnContention)
	require.False(t, topo.IsErrType(err, topo.Unavailable), "%v", err)
	oc.setBefore(nil)
	after := fileTree(t, raw, root)
	require.NotEqual(t, before, after) // d's version moved on
	data, _, err := raw.Get(root + "/d")
	require.NoError(t, err)
	require.Empty(t, data, "nothing of the Txn was applied")
	ok, _, err := raw.Exists(root + "/e")
	require.NoError(t, err)
	require.False(t, ok, "nothing of the Txn was applied")

	_, err = c.Txn(ctx, topo.CreateOp("d", []byte("file")), topo.CreateOp("e", []byte("e")))
	require.NoError(t, err)
	data, _, err = c.Get(ctx, "d")
	require.NoError(t, err)
	require.Equal(t, "file", string(data))
}

// TestTxnDirectoriesAbsent: with DirectoriesAbsent naming the new
// directories, a Txn of 32 creates in 32 directories that do not exist
// yet is one multi and no read. A wrong hint never changes the result:
// a directory named absent that exists (as a directory, as a file, or
// created by another client just before the multi) makes the first
// multi fail at its create, writing nothing, and the Txn goes on as
// without the hint, leaving the existing znode as it was; one absent but
// not named is found out as without the hint.
func TestTxnDirectoriesAbsent(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	var oc opCounter
	c := openCounted(t, &oc, root)
	raw := rawConn(t)
	_, err := c.Create(ctx, "ks/keep", []byte("k")) // ks exists
	require.NoError(t, err)
	paths := shardPaths(32)
	ops := make([]topo.TxnOp, len(paths))
	var dirs []string
	for i, p := range paths {
		ops[i] = topo.CreateOp(p, []byte("v"+p))
		dirs = append(dirs, p[:len(p)-len("/Shard")])
	}
	oc.reset()
	_, err = c.Txn(DirectoriesAbsent(ctx, append(dirs, "ks/shards")...), ops...)
	require.NoError(t, err)
	require.Equal(t, 1, oc.count(opcodeMulti), "multis")
	require.Equal(t, 0, oc.count(opcodeExists), "Stat reads")
	for _, p := range paths {
		data, _, err := c.Get(ctx, p)
		require.NoError(t, err)
		require.Equal(t, "v"+p, string(data))
		dir, st, err := raw.Get(root + "/" + p[:len(p)-len("/Shard")])
		require.NoError(t, err)
		require.Empty(t, dir, "a directory znode has no data")
		require.Equal(t, int32(0), st.Version)
	}

	wrong := []struct {
		name  string
		setup func(t *testing.T)
		hint  []string
	}{
		{"an existing directory named", func(t *testing.T) {
			_, err := c.Create(ctx, "w1/d/other", []byte("o"))
			require.NoError(t, err)
		}, []string{"w1/d"}},
		{"an existing file named", func(t *testing.T) {
			_, err := c.Create(ctx, "w2/d", []byte("file"))
			require.NoError(t, err)
		}, []string{"w2/d"}},
		{"an absent directory not named", func(t *testing.T) {}, []string{"w3/d"}},
		{"created by another client before the multi", func(t *testing.T) {
			oc.setBefore(func(op int32) {
				if op == opcodeMulti {
					oc.setBefore(nil)
					_, err := raw.Create(root+"/w4", nil, 0, zk.WorldACL(zk.PermAll))
					assert.NoError(t, err) // on the client's send goroutine
				}
			})
		}, []string{"w4", "w4/d"}},
	}
	for k, tc := range wrong {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup(t)
			top := fmt.Sprintf("w%d", k+1)
			before, _, err := raw.Get(root + "/" + top + "/d")
			if err != nil {
				before = nil
			}
			vs, err := c.Txn(DirectoriesAbsent(ctx, tc.hint...),
				topo.CreateOp(top+"/d/f", []byte("f")), topo.CreateOp(top+"/d/g", []byte("g")))
			require.NoError(t, err)
			require.Equal(t, []topo.Version{topo.NumericVersion(0), topo.NumericVersion(0)}, vs)
			for _, n := range []string{"f", "g"} {
				data, _, err := c.Get(ctx, top+"/d/"+n)
				require.NoError(t, err)
				require.Equal(t, n, string(data))
			}
			after, _, err := raw.Get(root + "/" + top + "/d")
			require.NoError(t, err)
			require.Equal(t, string(before), string(after), "the directory's data is left as it was")
		})
	}
	oc.setBefore(nil)

	// A file the hint would put in the way is still refused: NodeExists
	// for the op, nothing written.
	before := tree(t, raw, root)
	_, err = c.Txn(DirectoriesAbsent(ctx, "ks/shards/0"), topo.CreateOp("ks/shards/0/Shard", []byte("x")), topo.CreateOp("new/f", nil))
	requireTxnErr(t, err, 0, topo.NodeExists)
	require.Equal(t, before, tree(t, raw, root), "a failed Txn must write nothing")
}

// TestTxnDirectoriesAbsentConcurrent: eight Txns at once, each creating
// its own files in the same new directories and each told that those
// directories are absent: all but one find a directory created by another
// in the way of their first multi (NodeExists, nothing written), and every
// one succeeds, with every file written once and no directory given data.
func TestTxnDirectoriesAbsentConcurrent(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	c := openConn(t, []string{testServer}, root)
	raw := rawConn(t)
	_, err := c.Create(ctx, "keep", nil) // the root exists
	require.NoError(t, err)
	const writers, dirs = 8, 16
	var hint []string
	for d := range dirs {
		hint = append(hint, fmt.Sprintf("a/d%d", d))
	}
	hint = append(hint, "a")
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			var ops []topo.TxnOp
			for d := range dirs {
				ops = append(ops, topo.CreateOp(fmt.Sprintf("a/d%d/w%d", d, w), []byte(fmt.Sprint(w))))
			}
			_, err := c.Txn(DirectoriesAbsent(ctx, hint...), ops...)
			errs <- err
		}()
	}
	for range writers {
		require.NoError(t, <-errs)
	}
	for d := range dirs {
		children, st, err := raw.Children(fmt.Sprintf("%s/a/d%d", root, d))
		require.NoError(t, err)
		require.Len(t, children, writers)
		require.Equal(t, int32(0), st.Version)
		data, _, err := raw.Get(fmt.Sprintf("%s/a/d%d", root, d))
		require.NoError(t, err)
		require.Empty(t, data)
		for w := range writers {
			got, _, err := c.Get(ctx, fmt.Sprintf("a/d%d/w%d", d, w))
			require.NoError(t, err)
			require.Equal(t, fmt.Sprint(w), string(got))
		}
	}
}

// TestTxnDeleteKeepsFileParent: a Txn's deletes never delete a file that
// merely had files below it. In zk2topo's layout a znode can be a file
// and a directory at once, and a file created with data has data version
// 0, like a directory created empty, so no multi request can tell the two
// apart (a multi cannot check a znode's data length); only the clean-up
// after the multi, which reads each directory's Stat, may remove a
// directory. The file x (data, version 0) with the file x/y below it: a
// Txn deleting x/y keeps x and its data. Then the batched clean-up: one
// Txn empties several directories a level at a time, of which p/q is a
// version-0 file with data (it stays, with its data, and so does p),
// r/s and u/v/w are plain directories (they go, and so do r, u/v and u).
// Both with no hint and with DirectoriesAbsent set (naming the new
// directory of a CreateOp of the same Txn, and every directory of the
// deletes, wrongly): the hint changes nothing of it.
func TestTxnDeleteKeepsFileParent(t *testing.T) {
	ctx := txnCtx(t)
	raw := rawConn(t)
	for _, v := range []struct {
		name string
		ctx  func(ctx context.Context, dirs ...string) context.Context
	}{
		{"no hint", func(ctx context.Context, _ ...string) context.Context { return ctx }},
		{"DirectoriesAbsent", DirectoriesAbsent},
	} {
		t.Run(v.name, func(t *testing.T) {
			root := freshRoot(t)
			c := openConn(t, []string{testServer}, root)
			requireFile := func(p, want string) {
				t.Helper()
				data, st, err := raw.Get(root + "/" + p)
				require.NoError(t, err, "file %s lost", p)
				require.Equal(t, want, string(data), p)
				require.Equal(t, int32(0), st.Version, p)
				require.Zero(t, st.NumChildren, p)
			}
			requireAbsent := func(p string) {
				t.Helper()
				ok, _, err := raw.Exists(root + "/" + p)
				require.NoError(t, err)
				require.False(t, ok, p)
			}

			// One file below a file.
			for _, f := range [][2]string{{"x", "file x"}, {"x/y", "v"}} {
				_, err := c.Create(ctx, f[0], []byte(f[1]))
				require.NoError(t, err)
			}
			_, st, err := raw.Get(root + "/x")
			require.NoError(t, err)
			require.Equal(t, int32(0), st.Version, "x has the version of a directory created empty")
			_, err = c.Txn(v.ctx(ctx, "x", "new"), topo.DeleteOp("x/y", nil), topo.CreateOp("new/f", []byte("n")))
			require.NoError(t, err)
			requireFile("x", "file x")
			requireAbsent("x/y")
			requireFile("new/f", "n")

			// The batched clean-up, several directories and levels.
			for _, f := range [][2]string{{"p/q", "file q"}, {"p/q/a", "v"}, {"p/q/b", "v"},
				{"r/s/a", "v"}, {"r/s/b", "v"}, {"u/v/w/a", "v"}, {"keep", "k"}} {
				_, err := c.Create(ctx, f[0], []byte(f[1]))
				require.NoError(t, err)
			}
			_, err = c.Txn(v.ctx(ctx, "p/q", "p", "r/s", "r", "u/v/w", "u/v", "u", "new2"),
				topo.DeleteOp("p/q/a", nil), topo.DeleteOp("p/q/b", nil),
				topo.DeleteOp("r/s/a", nil), topo.DeleteOp("r/s/b", nil),
				topo.DeleteOp("u/v/w/a", nil), topo.CreateOp("new2/f", []byte("n2")))
			require.NoError(t, err)
			requireFile("p/q", "file q")
			children, _, err := raw.Children(root + "/p")
			require.NoError(t, err)
			require.Equal(t, []string{"q"}, children, "p keeps the file p/q")
			requireAbsent("r")
			requireAbsent("u")
			requireFile("keep", "k")
			requireFile("new2/f", "n2")
		})
	}
}

// TestTxnHintTooLargeDropped: a DirectoriesAbsent hint naming directories
// that exist, whose creates would make the first multi larger than
// Options.MaxTxnBytes while the Txn without them fits, is dropped at once:
// the Txn succeeds with one multi and no read, and refuses nothing.
func TestTxnHintTooLargeDropped(t *testing.T) {
	ctx := txnCtx(t)
	root := freshRoot(t)
	_, err := openConn(t, []string{testServer}, root).Create(ctx, "x/y/keep", []byte("k"))
	require.NoError(t, err)
	data := make([]byte, 200)
	// The encoded multi of the file's create alone (see checkSize): the
	// headers, then the path, the data, the flags and the world ACL.
	alone := sizeRequestHeader + sizeMultiHeader + sizeMultiHeader +
		4 + len(root+"/x/y/f") + 4 + len(data) + 4 + 4 + 4 + 4 + len("world") + 4 + len("anyone")
	var oc opCounter
	c, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, Dialer: oc.dial, MaxTxnBytes: alone + 8}, root)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	oc.reset()
	vs, err := c.Txn(DirectoriesAbsent(ctx, "x", "x/y"), topo.CreateOp("x/y/f", data))
	require.NoError(t, err)
	require.Equal(t, []topo.Version{topo.NumericVersion(0)}, vs)
	require.Equal(t, 1, oc.count(opcodeMulti), "multis")
	require.Equal(t, 0, oc.count(opcodeExists), "Stat reads")
	got, _, err := c.Get(ctx, "x/y/f")
	require.NoError(t, err)
	require.Equal(t, data, got)

	// One byte less than the create alone: refused before anything is sent.
	c2, err := NewConn(Options{Servers: []string{testServer}, SessionTimeout: testSessionTimeout, Dialer: oc.dial, MaxTxnBytes: alone - 1}, root)
	require.NoError(t, err)
	t.Cleanup(c2.Close)
	oc.reset()
	_, err = c2.Txn(DirectoriesAbsent(ctx, "x", "x/y"), topo.CreateOp("x/y/g", data))
	require.ErrorIs(t, err, topo.InvalidArgument)
	require.Equal(t, 0, oc.count(opcodeMulti), "multis")
}
