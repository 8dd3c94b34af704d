package topodatapb_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/proto/vschemapb"
)

// vitessFiles reads the FileDescriptorSet of Vitess's own messages
// committed under testdata.
func vitessFiles(t *testing.T) *protoregistry.Files {
	t.Helper()
	b, err := os.ReadFile("../../testdata/vitess/vitess-topodata.protoset")
	require.NoError(t, err)
	fds := &descriptorpb.FileDescriptorSet{}
	require.NoError(t, proto.Unmarshal(b, fds))
	files, err := protodesc.NewFiles(fds)
	require.NoError(t, err)
	return files
}

// Every record type has Vitess's wire format: the same fields by number,
// each of the same name, kind and cardinality, with nested messages and
// enums alike all the way down, and no field Vitess does not have. A wrong
// number or type anywhere fails here rather than misdecoding a record.
func TestWireFormatMatchesVitess(t *testing.T) {
	files := vitessFiles(t)
	for vitess, ours := range map[protoreflect.FullName]proto.Message{
		"topodata.Keyspace":              &topodatapb.Keyspace{},
		"topodata.Shard":                 &topodatapb.Shard{},
		"topodata.Tablet":                &topodatapb.Tablet{},
		"topodata.ShardReplication":      &topodatapb.ShardReplication{},
		"topodata.SrvKeyspace":           &topodatapb.SrvKeyspace{},
		"topodata.CellInfo":              &topodatapb.CellInfo{},
		"topodata.CellsAlias":            &topodatapb.CellsAlias{},
		"topodata.ExternalVitessCluster": &topodatapb.ExternalVitessCluster{},
		"vschema.Keyspace":               &vschemapb.Keyspace{},
		"vschema.SrvVSchema":             &vschemapb.SrvVSchema{},
		"vschema.RoutingRules":           &vschemapb.RoutingRules{},
		"vschema.ShardRoutingRules":      &vschemapb.ShardRoutingRules{},
		"vschema.KeyspaceRoutingRules":   &vschemapb.KeyspaceRoutingRules{},
		"vschema.MirrorRules":            &vschemapb.MirrorRules{},
	} {
		t.Run(string(vitess), func(t *testing.T) {
			d, err := files.FindDescriptorByName(vitess)
			require.NoError(t, err)
			sameMessage(t, d.(protoreflect.MessageDescriptor), ours.ProtoReflect().Descriptor(), map[protoreflect.FullName]bool{})
		})
	}
}

// The comparison itself catches a wrong field number, a wrong type and an
// enum value out of place.
func TestWireFormatComparisonCatchesMismatches(t *testing.T) {
	files := vitessFiles(t)
	d, err := files.FindDescriptorByName("topodata.Shard")
	require.NoError(t, err)
	vitess := d.(protoreflect.MessageDescriptor)
	for name, mutate := range map[string]func(*descriptorpb.FileDescriptorProto){
		"number": func(f *descriptorpb.FileDescriptorProto) {
			shard(f).Field[0].Number = proto.Int32(10)
		},
		"type": func(f *descriptorpb.FileDescriptorProto) {
			field(shard(f), "is_primary_serving").Type = descriptorpb.FieldDescriptorProto_TYPE_INT32.Enum()
		},
		"enum": func(f *descriptorpb.FileDescriptorProto) {
			for _, e := range f.EnumType {
				if e.GetName() == "TabletType" {
					e.Value[len(e.Value)-1].Number = proto.Int32(9)
				}
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			fdp := protodesc.ToFileDescriptorProto(topodatapb.File_topokit_topodata_topodata_proto)
			fdp.Name = proto.String("mutated/topodata.proto")
			mutate(fdp)
			fd, err := protodesc.NewFile(fdp, nil)
			require.NoError(t, err)
			rec := &recorder{}
			sameMessage(rec, vitess, fd.Messages().ByName("Shard"), map[protoreflect.FullName]bool{})
			assert.True(t, rec.failed, "a mutated %s went unnoticed", name)
		})
	}
}

func shard(f *descriptorpb.FileDescriptorProto) *descriptorpb.DescriptorProto {
	for _, m := range f.MessageType {
		if m.GetName() == "Shard" {
			return m
		}
	}
	panic("no Shard")
}

func field(m *descriptorpb.DescriptorProto, name string) *descriptorpb.FieldDescriptorProto {
	for _, f := range m.Field {
		if f.GetName() == name {
			return f
		}
	}
	panic("no field " + name)
}

// recorder is an assert.TestingT that remembers a failure.
type recorder struct{ failed bool }

func (r *recorder) Errorf(string, ...any) { r.failed = true }

// sameMessage asserts that ours has vitess's wire format (see
// TestWireFormatMatchesVitess); seen stops recursion into types already
// compared.
func sameMessage(t assert.TestingT, vitess, ours protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) {
	if seen[vitess.FullName()] {
		return
	}
	seen[vitess.FullName()] = true
	vf, of := vitess.Fields(), ours.Fields()
	assert.Equal(t, vf.Len(), of.Len(), "%s and %s have different numbers of fields", vitess.FullName(), ours.FullName())
	for i := range of.Len() {
		if vf.ByNumber(of.Get(i).Number()) == nil {
			assert.Fail(t, "extra field", "%s has field %d (%s), %s does not", ours.FullName(), of.Get(i).Number(), of.Get(i).Name(), vitess.FullName())
		}
	}
	for i := range vf.Len() {
		v := vf.Get(i)
		o := of.ByNumber(v.Number())
		if !assert.NotNil(t, o, "%s has no field %d (%s)", ours.FullName(), v.Number(), v.FullName()) {
			continue
		}
		sameField(t, v, o, seen)
	}
}

func sameField(t assert.TestingT, v, o protoreflect.FieldDescriptor, seen map[protoreflect.FullName]bool) {
	what := string(v.FullName())
	assert.Equal(t, v.Name(), o.Name(), what)
	assert.Equal(t, v.JSONName(), o.JSONName(), what)
	assert.Equal(t, v.Kind(), o.Kind(), what)
	assert.Equal(t, v.Cardinality(), o.Cardinality(), what)
	assert.Equal(t, v.IsPacked(), o.IsPacked(), what)
	assert.Equal(t, v.HasPresence(), o.HasPresence(), what)
	assert.Equal(t, v.IsMap(), o.IsMap(), what)
	if v.IsMap() && o.IsMap() {
		sameField(t, v.MapKey(), o.MapKey(), seen)
		sameField(t, v.MapValue(), o.MapValue(), seen)
		return
	}
	if v.Message() != nil && o.Message() != nil {
		sameMessage(t, v.Message(), o.Message(), seen)
	}
	if v.Enum() != nil && o.Enum() != nil {
		sameEnum(t, v.Enum(), o.Enum())
	}
}

// sameEnum asserts that two enums have the same values, in the same order
// (the first name of a number is the one JSON shows).
func sameEnum(t assert.TestingT, vitess, ours protoreflect.EnumDescriptor) {
	vv, ov := vitess.Values(), ours.Values()
	if !assert.Equal(t, vv.Len(), ov.Len(), "%s and %s have different numbers of values", vitess.FullName(), ours.FullName()) {
		return
	}
	for i := range vv.Len() {
		assert.Equal(t, vv.Get(i).Name(), ov.Get(i).Name(), "%s value %d", vitess.FullName(), i)
		assert.Equal(t, vv.Get(i).Number(), ov.Get(i).Number(), "%s.%s", vitess.FullName(), vv.Get(i).Name())
	}
}
