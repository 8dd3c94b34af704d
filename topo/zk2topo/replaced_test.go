package zk2topo

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// replaceAtWrite makes the Conn's next write of a znode's data (a
// set-data, or a multi: the nth one counting from now) wait until replace
// ran, on another client: a znode replaced between the Stat read a write
// is built on and the write itself. replace runs on the client library's
// send goroutine: it must not call t.FailNow (assert, not require).
func replaceAtWrite(t *testing.T, c *Conn, nth int32, replace func()) {
	t.Helper()
	s, err := c.session("")
	require.NoError(t, err)
	var multis atomic.Int32
	var once sync.Once
	hook := func(b []byte) {
		xid, op := reqHeader(b)
		if xid <= 0 || op != opSetData && op != opMulti {
			return
		}
		if op == opSetData || multis.Add(1) == nth {
			once.Do(replace)
		}
	}
	s.obs.writeHook.Store(&hook)
	t.Cleanup(func() { s.obs.writeHook.Store(nil) })
}

// TestCreateOverDirectoryReplacedByFile: Create and a Txn's CreateOp at a
// path that is only a directory write the file's data into its znode at
// the version read. When another client removed that directory and
// created a file there (version 0, the directory's) in between, the
// write used to overwrite that file and report success: two Creates of
// one file both succeeded, the first one's contents lost. The write
// carries a check of a child the read showed (roleSame): NodeExists,
// the other file kept.
func TestCreateOverDirectoryReplacedByFile(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, viaTxn := range []bool{false, true} {
		t.Run(map[bool]string{false: "Create", true: "Txn"}[viaTxn], func(t *testing.T) { createOverReplaced(ctx, t, viaTxn) })
	}
}

// createOverReplaced is one case of TestCreateOverDirectoryReplacedByFile.
func createOverReplaced(ctx context.Context, t *testing.T, viaTxn bool) {
	c := openConn(t, []string{testServer}, freshRoot(t))
	raw := rawConn(t)
	_, err := c.Create(ctx, "d/c", []byte("c"))
	require.NoError(t, err)
	zp := c.zkPath("d")
	// A Txn's CreateOp (Create's too, after its create) fails its first
	// multi (NodeExists), reads, and writes in its second.
	replaceAtWrite(t, c, 2, func() {
		assert.NoError(t, raw.Delete(zp+"/c", -1))
		assert.NoError(t, raw.Delete(zp, -1))
		_, err := raw.Create(zp, []byte("other"), 0, zk.WorldACL(zk.PermAll))
		assert.NoError(t, err)
	})
	if viaTxn {
		_, err = c.Txn(ctx, topo.CreateOp("d", []byte("mine")))
		var te *topo.TxnError
		require.ErrorAs(t, err, &te)
		require.Equal(t, 0, te.Index)
	} else {
		_, err = c.Create(ctx, "d", []byte("mine"))
	}
	require.Truef(t, topo.IsErrType(err, topo.NodeExists), "Create (Txn: %v) of a file another client created meanwhile: %v", viaTxn, err)
	data, st, err := raw.Get(zp)
	require.NoError(t, err)
	require.Equal(t, "other", string(data), "the other client's file")
	require.Equal(t, int32(0), st.Version)
}

// TestDeleteOfFileReplacedByDirectory: Delete (with or without a
// version) and a Txn's DeleteOp of a file with files below it empty its
// data at the version read. When another client deleted the file (and
// the files below) and created a file below its path in between, the
// emptied znode is a new directory at the file's version (0): the write
// used to report success for a file that was no longer there. Now
// NoNode, and the directory untouched.
func TestDeleteOfFileReplacedByDirectory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, k := range []string{"Delete", "Delete at the version", "Txn DeleteOp"} {
		t.Run(k, func(t *testing.T) { deleteOfReplaced(ctx, t, k) })
	}
}

// deleteOfReplaced is one case of TestDeleteOfFileReplacedByDirectory.
func deleteOfReplaced(ctx context.Context, t *testing.T, k string) {
	c := openConn(t, []string{testServer}, freshRoot(t))
	raw := rawConn(t)
	v, err := c.Create(ctx, "f", []byte("file"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "f/x", []byte("x"))
	require.NoError(t, err)
	zp := c.zkPath("f")
	// A Txn's DeleteOp (Delete's too, after its delete) fails its first
	// multi (NotEmpty), reads, and empties the file in its second.
	replaceAtWrite(t, c, 2, func() {
		assert.NoError(t, raw.Delete(zp+"/x", -1))
		assert.NoError(t, raw.Delete(zp, -1))
		_, err := raw.Create(zp, nil, 0, zk.WorldACL(zk.PermAll))
		assert.NoError(t, err)
		_, err = raw.Create(zp+"/y", []byte("y"), 0, zk.WorldACL(zk.PermAll))
		assert.NoError(t, err)
	})
	switch k {
	case "Delete":
		err = c.Delete(ctx, "f", nil)
	case "Delete at the version":
		err = c.Delete(ctx, "f", v)
	default:
		_, err = c.Txn(ctx, topo.DeleteOp("f", v))
		var te *topo.TxnError
		require.ErrorAs(t, err, &te)
		require.Equal(t, 0, te.Index)
	}
	require.Truef(t, topo.IsErrType(err, topo.NoNode), "%s of a file replaced by a directory: %v", k, err)
	data, st, err := raw.Get(zp)
	require.NoError(t, err)
	require.Empty(t, data)
	require.Equal(t, int32(0), st.Version, "%s wrote the directory", k)
	require.Equal(t, int32(1), st.NumChildren)
}

// TestConcurrentDeletesOfFileWithChildren: two unconditional Deletes of
// one file with files below it, the second's write landing after the
// first emptied it: the second used to fail with BadVersion, which only
// a Delete given a version may return. Now NoNode; the files below stay.
func TestConcurrentDeletesOfFileWithChildren(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := openConn(t, []string{testServer}, freshRoot(t))
	other := openConn(t, []string{testServer}, c.root)
	_, err := c.Create(ctx, "f", []byte("file"))
	require.NoError(t, err)
	_, err = c.Create(ctx, "f/x", []byte("x"))
	require.NoError(t, err)
	replaceAtWrite(t, c, 1, func() { assert.NoError(t, other.Delete(ctx, "f", nil)) })
	err = c.Delete(ctx, "f", nil)
	require.Truef(t, topo.IsErrType(err, topo.NoNode), "the second Delete: %v", err)
	_, _, err = c.Get(ctx, "f")
	require.True(t, topo.IsErrType(err, topo.NoNode), "%v", err)
	data, _, err := c.Get(ctx, "f/x")
	require.NoError(t, err)
	require.Equal(t, "x", string(data))
}
