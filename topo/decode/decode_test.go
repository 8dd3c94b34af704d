package decode_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo/decode"
)

func cellInfo(t *testing.T) []byte {
	t.Helper()
	b, err := proto.Marshal(&topodatapb.CellInfo{ServerAddress: "127.0.0.1:2379", Root: "/vitess/zone1"})
	require.NoError(t, err)
	return b
}

// A record is decoded by the type its path names, with the types built
// into the binary.
func TestBuiltinByPath(t *testing.T) {
	r := decode.Builtin()
	b, err := r.Decode("cells/zone1/CellInfo", cellInfo(t), false)
	require.NoError(t, err)
	assert.JSONEq(t, `{"serverAddress":"127.0.0.1:2379","root":"/vitess/zone1"}`, string(b))
	multi, err := r.Decode("/cells/zone1/CellInfo", cellInfo(t), true)
	require.NoError(t, err)
	assert.Contains(t, string(multi), "\n  \"root\"")

	_, err = r.TypeFor("keyspaces/ks/NoSuchRecord")
	var te *decode.TypeError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, decode.NotFound, te.Kind)
	assert.Equal(t, "NoSuchRecord", te.Name)
}

// A protoset loaded at run time gives its types; Register picks a type
// for another file name.
func TestProtosetAndRegister(t *testing.T) {
	fds := &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{
		protodesc.ToFileDescriptorProto(topodatapb.File_topokit_topodata_topodata_proto),
	}}
	r, err := decode.FromProtoset(fds)
	require.NoError(t, err)
	_, err = r.TypeFor("x/Cell")
	require.Error(t, err)
	r.Register("Cell", ".topokit.topodata.CellInfo")
	assert.Contains(t, r.Records(), "Cell")
	assert.Contains(t, r.Records(), "Tablet", "Vitess's records are known by name")
	b, err := r.Decode("x/Cell", cellInfo(t), false)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"root":"/vitess/zone1"`)

	md, err := r.Type("topokit.topodata.CellInfo")
	require.NoError(t, err)
	_, err = r.JSON(md, []byte{0xf8, 0x01, 0x01}, false) // field 31, unknown
	var ue *decode.UnknownFieldsError
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, 3, ue.Size)
	_, err = r.Type("topokit.topodata.Nothing")
	var te *decode.TypeError
	require.ErrorAs(t, err, &te)
}

func TestRaw(t *testing.T) {
	fs, err := decode.Raw(cellInfo(t))
	require.NoError(t, err)
	assert.Equal(t, "1: \"127.0.0.1:2379\"\n2: \"/vitess/zone1\"\n", decode.FormatRaw(fs))
	_, err = decode.Raw([]byte{0xff})
	assert.Error(t, err)
	assert.True(t, decode.Printable(nil))
	assert.False(t, decode.Printable([]byte{0, 1}))
}
