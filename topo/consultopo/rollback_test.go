package consultopo

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// TestFailureCodesOfKeysNamedLikeConsulMessages: Consul names the key of a
// failed operation in its message, so a key holding the words of another
// message ("index is stale", "doesn't exist", " exists") must not change
// the code: every failing condition and write is read from the message
// around the key alone.
func TestFailureCodesOfKeysNamedLikeConsulMessages(t *testing.T) {
	root := testRoot(t)
	c := newTestConn(t, root)
	ctx := t.Context()
	stale := topo.NumericVersion(1)
	for _, name := range []string{"index is stale", "failed index check", "doesn't exist", "k exists", "Permission denied"} {
		t.Run(name, func(t *testing.T) {
			absent, present := "absent/"+name, "present/"+name
			_, err := c.Create(ctx, present, []byte("v"))
			require.NoError(t, err)

			_, err = c.Txn(ctx, topo.IfPresent(absent))
			requireTxnErr(t, err, 0, topo.NoNode)
			_, err = c.Txn(ctx, topo.IfVersion(absent, stale))
			requireTxnErr(t, err, 0, topo.NoNode)
			_, err = c.Txn(ctx, topo.IfVersion(present, stale))
			requireTxnErr(t, err, 0, topo.BadVersion)
			_, err = c.Txn(ctx, topo.IfAbsent(present))
			requireTxnErr(t, err, 0, topo.NodeExists)

			_, err = c.Create(ctx, present, []byte("v"))
			requireCode(t, err, topo.NodeExists)
			_, err = c.Update(ctx, absent, []byte("v"), stale)
			requireCode(t, err, topo.NoNode)
			_, err = c.Update(ctx, present, []byte("v"), stale)
			requireCode(t, err, topo.BadVersion)
			requireCode(t, c.Delete(ctx, absent, nil), topo.NoNode)
			requireCode(t, c.Delete(ctx, absent, stale), topo.NoNode)
			requireCode(t, c.Delete(ctx, present, stale), topo.BadVersion)
		})
	}
}

// TestUnquoted: the keys Consul quotes (%q, escapes included) leave its
// message; an unterminated quote leaves it as it is.
func TestUnquoted(t *testing.T) {
	for in, want := range map[string]string{
		`key "a/index is stale" doesn't exist`:       `key "" doesn't exist`,
		`failed to set key "q\"x\\", index is stale`: `failed to set key "", index is stale`,
		`"a" and "b" exists`:                         `"" and "" exists`,
		`no quotes`:                                  `no quotes`,
		`bad "unterminated`:                          `bad "unterminated`,
	} {
		require.Equal(t, want, unquoted(in), "unquoted(%q)", in)
	}
}
