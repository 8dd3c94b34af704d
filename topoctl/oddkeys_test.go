package topoctl

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// Keys that another tool wrote and that are no canonical path ("a//b",
// "t/", "dot/./x") are never rewritten or dropped silently: export, copy
// and rm -R leave them alone and name each (PartialResult, exit 1), and
// ls -R lists the rest, naming the directory it cannot enter. Before,
// export wrote them as a/b, t and dot/x, and ls -R failed with
// InvalidPath.
func TestOddKeysEtcd(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	root := "/" + t.Name()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}})
	require.NoError(t, err)
	defer cli.Close()
	for _, k := range []string{"/ok", "/a//b", "/t/", "/dot/./x"} {
		_, err = cli.Put(t.Context(), root+k, "v"+k)
		require.NoError(t, err)
	}
	tg := target{impl: "etcd2", addr: addr, root: root}
	odd := []string{`"/a//b"`, `"/dot/./x"`, `"/t/"`}

	dir := filepath.Join(t.TempDir(), "x")
	r := tg.fails(t, ExitFailure, append([]string{"PartialResult", "3 files under keys that are no canonical path were not exported"}, odd...), "export", dir)
	assert.Contains(t, r.stdout, "exported 1 file ")
	var got []string
	require.NoError(t, filepath.Walk(dir, func(p string, i os.FileInfo, err error) error {
		if err == nil && !i.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			got = append(got, rel)
		}
		return err
	}))
	assert.Equal(t, []string{"ok"}, got)

	tg.fails(t, ExitFailure, append([]string{"PartialResult", "not copied"}, odd...), "copy", "--to", "memory:x:/")

	r = tg.run(t, "", "ls", "-R", "/")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "/ok\n")
	assert.Contains(t, r.stdout, "/dot/.\n")
	assert.Contains(t, r.stderr, `"/dot/." is no canonical path`)
}

// On Consul a key "t/" holding a value (another tool's) is named by
// export, not omitted silently as before; a "folder" key without a value
// is no file.
func TestOddKeysConsul(t *testing.T) {
	t.Parallel()
	addr := consultest.Start(t)
	root := t.Name()
	cli, err := api.NewClient(&api.Config{Address: addr})
	require.NoError(t, err)
	for k, v := range map[string]string{"/ok": "v", "/t/": "v", "/folder/": ""} {
		_, err = cli.KV().Put(&api.KVPair{Key: root + k, Value: []byte(v)}, nil)
		require.NoError(t, err)
	}
	tg := target{impl: "consul", addr: addr, root: root}
	r := tg.fails(t, ExitFailure, []string{"PartialResult", `"/t/"`, "1 file under keys that are no canonical path was not exported"}, "export", filepath.Join(t.TempDir(), "x"))
	assert.Contains(t, r.stdout, "exported 1 file ")
	assert.NotContains(t, r.stderr, "folder")
}

// On Consul a name that is both a file and a directory is listed once, as
// a directory, as on etcd; before, ls listed it twice.
func TestConsulFileAndDirectoryListedOnce(t *testing.T) {
	t.Parallel()
	tg := target{impl: "consul", addr: consultest.Start(t), root: t.Name()}
	tg.ok(t, "put", "n", "file")
	tg.ok(t, "put", "n/x", "below")
	assert.Equal(t, "n\n", tg.ok(t, "ls", "/"))
	assert.Equal(t, "directory  -  -  n\n", tg.ok(t, "ls", "-l", "/"))
}
