package topoctl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// Vitess's own topology (both cells) goes memory -> etcd -> ZooKeeper ->
// Consul -> memory with copy: each hop copies every file, a second run
// finds them all identical, diff against the original says identical,
// and export then import of each hop gives the original back. A changed
// file is a difference, and a dry run writes nothing.
func TestVitessTopologyCopyChain(t *testing.T) {
	etcd := target{impl: "etcd2", addr: etcdtest.Start(t), root: "/chain"}
	zk := target{impl: "zk2", addr: zktest.Start(t), root: "/chain"}
	consul := target{impl: "consul", addr: consultest.Start(t), root: "chain"}
	mem := target{impl: "memory", addr: fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano()), root: "/"}
	for _, cell := range []string{"global", "zone1"} {
		t.Run(cell, func(t *testing.T) {
			orig := mem.withRoot("/" + cell)
			assert.Contains(t, orig.ok(t, "import", filepath.Join(vitessTopology, cell)), "imported ")
			chain := []target{orig, etcd.withRoot("/chain/" + cell), zk.withRoot("/chain/" + cell), consul.withRoot("chain/" + cell), mem.withRoot("/back-" + cell)}
			for i := 1; i < len(chain); i++ {
				from, to := chain[i-1], chain[i]
				assert.NotContains(t, from.ok(t, "copy", "--to", to.spec()), "copied 0 files")
				assert.Contains(t, from.ok(t, "copy", "--to", to.spec()), "copied 0 files (0 bytes)")
				assert.Contains(t, orig.ok(t, "diff", "--to", to.spec()), "identical: ")
				dir := filepath.Join(t.TempDir(), "export")
				to.ok(t, "export", dir)
				again := mem.withRoot("/reimport-" + cell + "-" + to.impl)
				again.ok(t, "import", dir)
				assert.Contains(t, orig.ok(t, "diff", "--to", again.spec()), "identical: ")
			}
			onZK := chain[2]
			onZK.ok(t, "put", "/changed", "x")
			r := orig.run(t, "", "diff", "--to", onZK.spec())
			assert.Equal(t, 1, r.code, r.stderr)
			assert.Contains(t, r.stdout, "only in to: /changed")
			out := onZK.ok(t, "copy", "--to", orig.spec(), "--dry-run", "/")
			assert.Contains(t, out, "would write /changed (1 byte)")
			assert.Equal(t, 1, orig.run(t, "", "diff", "--to", onZK.spec()).code, "the dry run wrote nothing")
		})
	}
}

// copy and import into ZooKeeper refuse an empty file that has files
// below it (ZooKeeper cannot store one: it reads as a directory), naming
// it, before writing anything; they reported it copied, and diff then
// found it missing.
func TestZkEmptyFileWithFilesBelowRefused(t *testing.T) {
	zk := target{impl: "zk2", addr: zktest.Start(t), root: "/emptyparent"}
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "e"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "e", "f"), []byte("F"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "g"), []byte("G"), 0o644))
	mem := target{impl: "memory", addr: fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano()), root: "/src"}
	mem.ok(t, "import", dir)
	mem.ok(t, "put", "/e", "")

	want := []string{"/e: an empty file with files below it cannot be stored on ZooKeeper", "nothing was written"}
	zk.fails(t, 1, want, "copy", "--from", mem.spec(), "--to", zk.spec())
	assert.Empty(t, strings.TrimSpace(zk.ok(t, "get", "-R", "--keys-only", "/")), "nothing written")

	// import of an empty file "e" where the store holds e/f.
	zk.ok(t, "import", dir)
	dir2 := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir2, "e"), nil, 0o644))
	zk.fails(t, 1, want, "import", dir2)
	assert.Equal(t, "/e/f\n/g\n", zk.ok(t, "get", "-R", "--keys-only", "/"))
}
