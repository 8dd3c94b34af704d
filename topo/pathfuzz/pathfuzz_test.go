package pathfuzz

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// Run it with random inputs with e.g.
//
//	go test -run '^$' -fuzz FuzzPathsOnEveryBackend ./topo/pathfuzz/
//
// A plain `go test` (and so `make test`) runs every seed once.

// seeds are paths that every rule's edge touches, and code points that one
// store or another refuses or mangles.
var seeds = []string{
	"a", "/a", "a/b", "a/b/c", "a b/c d", "naïve/ключ/鍵", "a?b", "a#b", "a%b",
	"a%2Fb", "a+b", "a&b=c", "a;b", `a\b`, `a"b`, "a<b>", "a[b]", "a{b}", "~a",
	"a*b", "a:b", "a@b", "a!b", "a$b", "a'b", "a(b)", "a,b", "a^b", "a`b", "a|b",
	"", "/", "a/", "a//b", ".", "..", "a/.", "a/../b", "...", ".a", "a.",
	"a\x00b", "a\x01b", "a\x1fb", "a\x7fb", "a\xffb", "\xe2\x82",
	"a/\u0080", "a/\u0085", "a/\u009f", "a/\u00a0", "a/\u00ad", "a/\u00e9",
	"a/\u2028", "a/\u2029", "a/\u200b", "a/\ud7ff", "a/\ue000", "a/\uf8ff", "a/\uf900",
	"a/\ufeff", "a/\uffef", "a/\ufff0", "a/\ufffd", "a/\ufffe", "a/\uffff",
	"x/\uffff", "a/\U00010000", "a/\U0001f600", "a/\U0010ffff", "\u0085/a",
	"\uffff", "a/b\uffff/c", "keyspaces/ks/shards/-80/Shard",
	strings.Repeat("a", 300), strings.Repeat("ab/", 50) + "c",
}

// backend is one store under test.
type backend struct {
	name string
	conn topo.Conn
}

func FuzzPathsOnEveryBackend(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	var seq atomic.Int64
	root := fmt.Sprintf("/pathfuzz-%d", time.Now().UnixNano())
	etcdAddr := etcdtest.Start(f)
	zkAddr := zktest.Start(f)
	consulAddr := consultest.Start(f)
	mem, err := memorytopo.NewFactory().Create("c", "", root)
	require.NoError(f, err)
	f.Cleanup(mem.Close)
	et, err := etcd2topo.NewConn(etcd2topo.Options{Endpoints: []string{etcdAddr}}, root)
	require.NoError(f, err)
	f.Cleanup(et.Close)
	zc, err := zk2topo.NewConn(zk2topo.Options{Servers: []string{zkAddr}}, root)
	require.NoError(f, err)
	f.Cleanup(zc.Close)
	cc, err := consultopo.NewConn(consultopo.Options{Address: consulAddr}, root)
	require.NoError(f, err)
	f.Cleanup(cc.Close)
	backends := []backend{{"memory", mem}, {"etcd2", et}, {"zk2", zc}, {"consul", cc}}

	f.Fuzz(func(t *testing.T, p string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		// Each input in a directory of its own, so that one input's file
		// is never another's directory. A leading "/" of the input stays
		// meaningful: "/a" and "a" are the same file.
		dir := "p" + strconv.FormatInt(seq.Add(1), 10)
		in := dir + "/" + strings.TrimPrefix(p, "/")
		want, ruleErr := topo.CleanFilePath(in)
		outcomes := make([]string, len(backends))
		for i, b := range backends {
			outcomes[i] = tryPath(ctx, t, b, in, dir, want, ruleErr)
		}
		for i := range backends[1:] {
			if outcomes[i+1] != outcomes[0] {
				t.Fatalf("path %q: %s says %s, %s says %s", in, backends[0].name, outcomes[0], backends[i+1].name, outcomes[i+1])
			}
		}
	})
}

// tryPath creates in on b, reads it back, lists it and deletes it, and
// returns the outcome ("stored", or the refusal's code). It fails t when
// the outcome breaks the rule (a refusal other than InvalidPath, a path
// topo.CleanFilePath refuses that the store took, a name not read back
// byte for byte) or anything is left behind.
func tryPath(ctx context.Context, t *testing.T, b backend, in, dir, want string, ruleErr error) string {
	t.Helper()
	c := b.conn
	leftovers := func(when string) {
		t.Helper()
		kvs, err := c.List(ctx, dir+"/")
		if topo.IsErrType(err, topo.NoNode) {
			err = nil
		}
		require.NoError(t, err, "%s: List(%q) %s", b.name, dir+"/", when)
		var paths []string
		for _, kv := range kvs {
			paths = append(paths, kv.Path)
		}
		require.Empty(t, paths, "%s: files left behind %s", b.name, when)
		ents, err := c.ListDir(ctx, dir, false)
		if topo.IsErrType(err, topo.NoNode) {
			err = nil
		}
		require.NoError(t, err, "%s: ListDir(%q) %s", b.name, dir, when)
		require.Empty(t, ents, "%s: entries left behind %s", b.name, when)
	}
	_, err := c.Create(ctx, in, []byte("v"))
	if err != nil {
		code := topo.CodeOf(err)
		require.Equal(t, topo.InvalidPath, code, "%s: Create(%q) refused with %v; every refusal of a path must be InvalidPath", b.name, in, err)
		require.Error(t, ruleErr, "%s: Create(%q) refused a path topo.CleanFilePath accepts: %v", b.name, in, err)
		// Every other call refuses it the same way.
		_, _, gerr := c.Get(ctx, in)
		require.Equal(t, topo.InvalidPath, topo.CodeOf(gerr), "%s: Get(%q): %v", b.name, in, gerr)
		_, uerr := c.Update(ctx, in, []byte("u"), nil)
		require.Equal(t, topo.InvalidPath, topo.CodeOf(uerr), "%s: Update(%q): %v", b.name, in, uerr)
		derr := c.Delete(ctx, in, nil)
		require.Equal(t, topo.InvalidPath, topo.CodeOf(derr), "%s: Delete(%q): %v", b.name, in, derr)
		leftovers("after the refused writes")
		return "refused " + code.String()
	}
	require.NoError(t, ruleErr, "%s: Create(%q) stored a path topo.CleanFilePath refuses", b.name, in)
	got, _, err := c.Get(ctx, in)
	require.NoError(t, err, "%s: Get(%q) of a file just created", b.name, in)
	require.Equal(t, "v", string(got), "%s: Get(%q)", b.name, in)
	kvs, err := c.List(ctx, dir+"/")
	require.NoError(t, err, "%s: List", b.name)
	require.Len(t, kvs, 1, "%s: List(%q)", b.name, dir+"/")
	require.Equal(t, want, kvs[0].Path, "%s: List gives the path back byte for byte", b.name)
	parent, name := path.Split(want)
	ents, err := c.ListDir(ctx, strings.TrimSuffix(parent, "/"), false)
	require.NoError(t, err, "%s: ListDir of %q's parent", b.name, want)
	require.True(t, slices.ContainsFunc(ents, func(e topo.DirEntry) bool { return e.Name == name }),
		"%s: ListDir of %q's parent does not name %q: %v", b.name, want, name, ents)
	require.NoError(t, c.Delete(ctx, in, nil), "%s: Delete(%q)", b.name, in)
	leftovers("after the Delete")
	return "stored"
}
