package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/examples/templatetopo"
	"github.com/topokit/topokit/topoctl"
)

// topoctlRun runs topoctl in-process, as this binary's main would with
// args, and returns its exit code, stdout and stderr.
func topoctlRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := topoctl.Main(ctx, args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// ok runs topoctl against the template store at address "demo", root root,
// and returns its stdout, failing t unless it exits 0.
func ok(t *testing.T, root string, args ...string) string {
	t.Helper()
	argv := append([]string{"-i", templatetopo.FactoryName, "-a", "demo", "--topo-global-root", root}, args...)
	code, out, errs := topoctlRun(t, argv...)
	require.Equalf(t, topoctl.ExitOK, code, "topoctl %s: stdout %q, stderr %q", strings.Join(argv, " "), out, errs)
	return out
}

// TestCommands runs ls, get, put, lock and copy against the template
// backend, in the process that registered it: copy between two template
// roots and from the template to the memory backend.
func TestCommands(t *testing.T) {
	const src = "/custom-src"
	ok(t, src, "put", "/keyspaces/commerce/Keyspace", "v1")
	ok(t, src, "put", "/keyspaces/customer/Keyspace", "v2")
	require.Equal(t, "commerce\ncustomer\n", ok(t, src, "ls", "/keyspaces"))
	require.Equal(t, "v1", ok(t, src, "get", "/keyspaces/commerce/Keyspace"))
	require.Contains(t, ok(t, src, "lock", "/keyspaces/commerce", "--", "echo", "holding the lock"), "holding the lock")

	ok(t, src, "copy", "--to", templatetopo.FactoryName+":demo:/custom-dst", "/keyspaces")
	require.Equal(t, "v2", ok(t, "/custom-dst", "get", "/keyspaces/customer/Keyspace"), "copied between two template roots")

	ok(t, src, "copy", "--to", "memory:demo:/custom-mem", "/keyspaces")
	code, out, errs := topoctlRun(t, "-i", "memory", "-a", "demo", "--topo-global-root", "/custom-mem", "get", "/keyspaces/commerce/Keyspace")
	require.Equalf(t, topoctl.ExitOK, code, "get from the memory copy: stderr %q", errs)
	require.Equal(t, "v1", out, "copied from the template to memory")

	// The lock is free again after lock's command ended.
	require.Contains(t, ok(t, src, "lock", "--try", "/keyspaces/commerce", "--", "echo", "again"), "again")
}

// TestBinary builds this command with the go tool and runs it: the
// template backend is listed in --help and takes a put. (Each run of the
// binary has a fresh in-process store, so one command is all a run shows.)
func TestBinary(t *testing.T) {
	gotool, err := exec.LookPath("go")
	require.NoError(t, err, "the go tool is needed to build the example")
	bin := filepath.Join(t.TempDir(), "customtopoctl")
	build := exec.CommandContext(t.Context(), gotool, "build", "-o", bin, ".")
	outb, err := build.CombinedOutput()
	require.NoErrorf(t, err, "go build: %s", outb)

	help, err := exec.CommandContext(t.Context(), bin, "--help").CombinedOutput()
	require.NoErrorf(t, err, "customtopoctl --help: %s", help)
	require.Regexp(t, `this binary has:\n  [a-z0-9, ]*\b`+regexp.QuoteMeta(templatetopo.FactoryName)+`\b`, string(help), "--help lists the template backend among the registered ones")

	put := exec.CommandContext(t.Context(), bin, "-i", templatetopo.FactoryName, "-a", "demo", "--topo-global-root", "/r", "put", "/a/f", "v")
	outb, err = put.CombinedOutput()
	require.NoErrorf(t, err, "customtopoctl put: %s", outb)
}
