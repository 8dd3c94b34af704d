package topoctl

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/topokit/topokit/topo"
)

func TestParseSpec(t *testing.T) {
	t.Parallel()
	// A data directory without serve's address record: the default
	// address is the built-in one.
	dataDir := t.TempDir()
	o := &connector{settings: settings{getenv: func(k string) string {
		if k == envDataDir {
			return dataDir
		}
		return ""
	}}}
	for in, want := range map[string]spec{
		"etcd2:127.0.0.1:2379:/vitess":                {"etcd2", "127.0.0.1:2379", "/vitess", false},
		"zk2:127.0.0.1:2181,127.0.0.1:2182:/vitess/g": {"zk2", "127.0.0.1:2181,127.0.0.1:2182", "/vitess/g", false},
		"consul:127.0.0.1:8500:":                      {"consul", "127.0.0.1:8500", "", false},
		"memory:name:/":                               {"memory", "name", "/", false},
		"etcd2::/vitess":                              {"etcd2", defaultClientAddress, "/vitess", true},
		"zk2:[::1]:2181:/r":                           {"zk2", "[::1]:2181", "/r", false},
	} {
		got, err := o.parseSpec("to", in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "etcd2", "etcd2:/vitess", ":a:/r"} {
		_, err := o.parseSpec("to", in)
		var ue usageError
		assert.True(t, errors.As(err, &ue), "%q: %v", in, err)
	}
}

func TestParseRaw(t *testing.T) {
	t.Parallel()
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, 0x3f800000)
	b = protowire.AppendTag(b, 2, protowire.Fixed64Type)
	b = protowire.AppendFixed64(b, 1)
	b = protowire.AppendTag(b, 3, protowire.StartGroupType)
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 5)
	b = protowire.AppendTag(b, 3, protowire.EndGroupType)
	b = protowire.AppendTag(b, 4, protowire.BytesType)
	b = protowire.AppendString(b, "")
	fs, err := parseRaw(b, 0)
	require.NoError(t, err)
	assert.Equal(t, "1: 0x3f800000\n2: 0x0000000000000001\n3 {\n  1: 5\n}\n4: \"\"\n", formatRaw(fs))

	for _, bad := range [][]byte{{0x08}, {0x0a, 0x05, 'a'}, {0x0c}, {0x00}} {
		_, err := parseRaw(bad, 0)
		assert.Error(t, err, "%x", bad)
	}
	empty, err := parseRaw(nil, 0)
	require.NoError(t, err)
	assert.Empty(t, formatRaw(empty))
}

func TestDefaultDataDir(t *testing.T) {
	t.Parallel()
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	d, err := defaultDataDir(env(map[string]string{envDataDir: "/x", "HOME": "/h"}))
	require.NoError(t, err)
	assert.Equal(t, "/x", d)
	d, err = defaultDataDir(env(map[string]string{"XDG_DATA_HOME": "/xdg", "HOME": "/h"}))
	require.NoError(t, err)
	assert.Equal(t, "/xdg/topokit/etcd", d)
	d, err = defaultDataDir(env(map[string]string{"XDG_DATA_HOME": "relative", "HOME": "/h"}))
	require.NoError(t, err)
	assert.Equal(t, "/h/.local/share/topokit/etcd", d)
}

// Every command's help has examples, the commands that only group others
// and cobra's completion commands included.
func TestEveryCommandHasExamples(t *testing.T) {
	t.Parallel()
	root, _ := newRoot(streams{})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() != "help" {
			assert.NotEmpty(t, strings.TrimSpace(c.Example), "%q has no examples", c.CommandPath())
		}
		for _, sc := range c.Commands() {
			walk(sc)
		}
	}
	walk(root)
}

// TestFlagUsagesHaveNoBackquotes: no flag's usage holds a backquote,
// which pflag takes as the name of the flag's value in the help ("ui
// --protoset" showed "--protoset +envProtoset+ ... (default:
// $+envProtoset+, ...)" instead of "--protoset string ... (default:
// $TOPOCTL_PROTOSET, ...)").
func TestFlagUsagesHaveNoBackquotes(t *testing.T) {
	t.Parallel()
	root, _ := newRoot(streams{})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			assert.NotContains(t, f.Usage, "`", "%s --%s: %s", c.CommandPath(), f.Name, f.Usage)
		})
		for _, sc := range c.Commands() {
			walk(sc)
		}
	}
	walk(root)
}

// TestSlashPathsLeavesURLs: a connection error whose path is a URL (the
// seed a serve --seeds node could not reach) is not shown as the path
// "/https://..."; a store path gets its leading "/".
func TestSlashPathsLeavesURLs(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &topo.Error{Code: topo.Unavailable, Path: "https://127.0.0.1:1", Err: errors.New("no answer")})
	assert.Equal(t, "wrapped: unavailable: https://127.0.0.1:1: no answer", slashPaths(err))
	err = &topo.Error{Code: topo.NoNode, Path: "ks/Keyspace"}
	assert.Equal(t, "node doesn't exist: /ks/Keyspace", slashPaths(err))
}
