package decode_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/decode"
)

// Type takes Vitess's full names of the layout's records, as its doc
// says ("topodata.Tablet"), with no protoset: the built-in type of that
// record, the one the layout decodes it as. A name of no record stays
// NotFound. With Vitess's protoset the name is the protoset's message.
func TestTypeTakesVitessFullNames(t *testing.T) {
	r := decode.Builtin()
	for name, want := range map[string]string{
		"topodata.Tablet":        "topokit.topodata.Tablet",
		".topodata.Keyspace":     "topokit.topodata.Keyspace",
		"vschema.Keyspace":       "topokit.vschema.Keyspace",
		"vschema.SrvVSchema":     "topokit.vschema.SrvVSchema",
		"topokit.topodata.Shard": "topokit.topodata.Shard",
	} {
		md, err := r.Type(name)
		require.NoError(t, err, name)
		assert.Equal(t, want, string(md.FullName()), name)
	}
	_, err := r.Type("topodata.Nothing")
	var te *decode.TypeError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, decode.NotFound, te.Kind)

	vitess, err := decode.ReadProtoset(vitessProtoset)
	require.NoError(t, err)
	md, err := vitess.Type("topodata.Tablet")
	require.NoError(t, err)
	assert.Equal(t, "topodata.Tablet", string(md.FullName()))
}
