package topoctl

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// Smaller findings of a new user's trial (issue 25, item 8), each failing
// before its fix.
func TestTrialFindings(t *testing.T) {
	t.Parallel()
	addr := etcdtest.Start(t)
	tg := target{impl: "etcd2", addr: addr, root: "/" + t.Name()}

	t.Run("typo suggestions keep their lines", func(t *testing.T) {
		r := tg.fails(t, ExitUsage, []string{"unknown command \"lss\"", "Did you mean this?\n\tls\n"}, "lss")
		assert.NotContains(t, r.stderr, `\x0a`)
	})

	t.Run("cell set refuses an empty root", func(t *testing.T) {
		for _, root := range []string{"", "/"} {
			tg.fails(t, ExitUsage, []string{"whole key space"}, "cell", "set", "zone1", "--root", root)
		}
		tg.fails(t, ExitFailure, []string{"NoNode"}, "get", "cells/zone1/CellInfo")
	})

	t.Run("oversized stdin", func(t *testing.T) {
		r := tg.run(t, strings.Repeat("x", topo.MaxValueSize+100), "put", "big", "-")
		require.Equal(t, ExitFailure, r.code, r.stderr)
		assert.Contains(t, r.stderr, fmt.Sprintf("standard input holds more than the %d bytes", topo.MaxValueSize))
		assert.NotContains(t, r.stderr, fmt.Sprint(topo.MaxValueSize+1))
	})

	t.Run("consul hint names CONSUL_HTTP_ADDR", func(t *testing.T) {
		target{noFlags: true}.fails(t, ExitUsage, []string{"CONSUL_HTTP_ADDR", "is required with --topo-implementation consul"}, "-i", "consul", "ls")
	})

	t.Run("etcd root without a leading slash", func(t *testing.T) {
		r := tg.withRoot(strings.TrimPrefix(tg.root, "/")+"x").run(t, "", "ls", "/")
		assert.Contains(t, r.stderr, `has no leading "/"`)
		r = tg.run(t, "", "ls", "/")
		assert.NotContains(t, r.stderr, "warning")
	})

	t.Run("get ends a line on a terminal", func(t *testing.T) {
		tg.ok(t, "put", "hello", "world")
		var out, errb syncBuffer
		code := runMain(t.Context(), tg.argv([]string{"get", "hello"}), streams{Stdout: &out, Stderr: &errb, StdoutIsTerminal: func() bool { return true }})
		require.Equal(t, 0, code, errb.String())
		assert.Equal(t, "world\n", out.String())
		assert.Equal(t, "world", tg.ok(t, "get", "hello"), "a pipe gets the bytes as they are")
	})

	t.Run("one name per store: a cell's errors name the cell's store", func(t *testing.T) {
		cellRoot := tg.root + "-zone1"
		tg.ok(t, "cell", "set", "zone1", "--server-address", addr, "--root", cellRoot)
		cell := tg
		cell.env = map[string]string{envCell: "zone1"}
		name := "etcd2:" + addr + ":" + cellRoot + " (cell zone1)"
		in := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(in, "f"), []byte("v"), 0o600))
		assert.Contains(t, cell.ok(t, "import", in, "/d"), " to "+name+" under /d")
		hold := cell.start(t, "lock", "/d", "--", "sh", "-c", "echo held; exec sleep 600")
		hold.waitOutput(t, "held")
		r := cell.fails(t, ExitFailure, []string{"Timeout"}, "--timeout", "1s", "lock", "/d", "--", "true")
		assert.Contains(t, r.stderr, "(store "+name+")", "the store the summary named, not the global cell's")
	})

	t.Run("a cell at a dead address fails as the global cell does, naming the cell's store", func(t *testing.T) {
		cellRoot := tg.root + "-dead"
		tg.ok(t, "cell", "set", "dead", "--server-address", "127.0.0.1:1", "--root", cellRoot)
		cell := tg
		cell.env = map[string]string{envCell: "dead"}
		r := cell.fails(t, ExitFailure, []string{"Unavailable", "etcd2:127.0.0.1:1:" + cellRoot, "nothing accepts connections at 127.0.0.1:1"}, "--timeout", "5s", "ls", "/")
		assert.NotContains(t, r.stderr, "Timeout", "the dial guard answers at once, not after --timeout")
	})

	t.Run("racing imports with --overwrite say another writer changed the file", func(t *testing.T) {
		in := t.TempDir()
		for i := range 5 {
			require.NoError(t, os.MkdirAll(filepath.Join(in, fmt.Sprint(i)), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(in, fmt.Sprint(i), "f"), []byte("v"), 0o600))
		}
		conflicts := 0
		for round := 0; round < 50 && conflicts == 0; round++ {
			var wg sync.WaitGroup
			results := make([]result, 3)
			for i := range results {
				wg.Go(func() { results[i] = tg.run(t, "", "import", "--overwrite", in, fmt.Sprintf("/race%d", round)) })
			}
			wg.Wait()
			for _, r := range results {
				if r.code == 0 {
					continue
				}
				conflicts++
				assert.Contains(t, r.stderr, "by another writer after it was listed", "not a bare \"node already exists\" after --overwrite")
				assert.Contains(t, r.stderr, "run again")
			}
			for i := range 5 {
				assert.Equal(t, "v", tg.ok(t, "get", fmt.Sprintf("race%d/%d/f", round, i)), "one of the imports wrote every file")
			}
		}
		require.Positive(t, conflicts, "three concurrent imports of one new tree never conflicted in 50 rounds")
	})

	t.Run("make serve says what it does before the long build", func(t *testing.T) {
		cmd := exec.CommandContext(t.Context(), "make", "-n", "serve")
		cmd.Dir = ".."
		// Run as a user would, not as a sub-make of make test's (whose
		// MAKEFLAGS name a jobserver this make cannot reach).
		cmd.Env = append(os.Environ(), "MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		lines := strings.Split(string(out), "\n")
		require.GreaterOrEqual(t, len(lines), 2)
		assert.Contains(t, lines[0], "echo \"building bin/topoctl", "a message before go build")
		assert.Contains(t, lines[1], "go build")
	})

	t.Run("summaries name PATH; dry runs count identical files", func(t *testing.T) {
		in := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(in, "Keyspace"), []byte("k"), 0o600))
		out := tg.ok(t, "import", in, "/ks")
		assert.Contains(t, out, " under /ks\n")
		out = tg.ok(t, "import", "--dry-run", in, "/ks")
		assert.NotContains(t, out, "identical, skipped")
		assert.Contains(t, out, "(0 new, 0 overwritten, 1 identical, 0 deleted)")
		assert.Contains(t, out, " under /ks; would write 0 files")
		assert.Contains(t, tg.ok(t, "export", filepath.Join(t.TempDir(), "x"), "/ks"), " under /ks to ")
		assert.Contains(t, tg.ok(t, "copy", "--to", "memory:m:/", "/ks"), " under /ks to memory:m:/ under /ks")
	})
}
