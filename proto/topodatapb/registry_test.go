package topodatapb_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/topokit/topokit/proto/topodatapb"
)

// Vitess registers its records' file as "topodata.proto" (package
// "topodata"). A program that links Vitess and topokit has both in the
// global registry, so topokit's file must live under a path of its own.
func TestRegistersUnderItsOwnPath(t *testing.T) {
	fd := topodatapb.File_topokit_topodata_topodata_proto
	require.Equal(t, "topokit/topodata/topodata.proto", fd.Path())
	require.Equal(t, "topokit.topodata", string(fd.Package()))

	// Stand-in for Vitess's generated code registering its own file.
	vitess := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("topodata.proto"),
		Package: proto.String("topodata"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("CellInfo"),
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: proto.String("server_address"), Number: proto.Int32(1), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String("serverAddress")},
				{Name: proto.String("root"), Number: proto.Int32(2), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), JsonName: proto.String("root")},
			},
		}},
	}
	f, err := protodesc.NewFile(vitess, protoregistry.GlobalFiles)
	require.NoError(t, err)
	require.NoError(t, protoregistry.GlobalFiles.RegisterFile(f), "Vitess's topodata.proto collides with topokit's")

	// The bytes stay interchangeable: a topokit CellInfo decodes as
	// Vitess's message and back.
	b, err := proto.Marshal(&topodatapb.CellInfo{ServerAddress: "127.0.0.1:2379", Root: "/vitess/zone1"})
	require.NoError(t, err)
	got := &topodatapb.CellInfo{}
	require.NoError(t, proto.Unmarshal(b, got))
	require.Equal(t, "/vitess/zone1", got.GetRoot())
}
