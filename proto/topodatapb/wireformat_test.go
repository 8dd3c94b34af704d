package topodatapb_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

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

// records returns a new empty message of each of topokit's record types,
// by the full name of Vitess's type of the same record.
func records() map[protoreflect.FullName]proto.Message {
	return map[protoreflect.FullName]proto.Message{
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
	}
}

// Every record type has Vitess's wire format: the same fields by number,
// each of the same name, kind and cardinality, with nested messages and
// enums alike all the way down, and no field Vitess does not have. A wrong
// number or type anywhere fails here rather than misdecoding a record.
func TestWireFormatMatchesVitess(t *testing.T) {
	files := vitessFiles(t)
	for vitess, ours := range records() {
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

// A record with every field set (recursively, in Vitess's own message
// types from the protoset) decodes into topokit's type with nothing
// unknown, re-encodes to the same bytes, and prints the same JSON.
func TestFullRecordsRoundTrip(t *testing.T) {
	files := vitessFiles(t)
	for vitess, ours := range records() {
		t.Run(string(vitess), func(t *testing.T) {
			d, err := files.FindDescriptorByName(vitess)
			require.NoError(t, err)
			full := dynamicpb.NewMessage(d.(protoreflect.MessageDescriptor))
			fill(full, 0)
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(full)
			require.NoError(t, err)

			require.NoError(t, proto.Unmarshal(b, ours))
			assertNoUnknown(t, ours.ProtoReflect())
			again, err := proto.MarshalOptions{Deterministic: true}.Marshal(ours)
			require.NoError(t, err)
			assert.Equal(t, b, again)

			theirs, err := protojson.Marshal(full)
			require.NoError(t, err)
			js, err := protojson.Marshal(ours)
			require.NoError(t, err)
			assert.JSONEq(t, string(theirs), string(js))
		})
	}
}

// fill sets every field of m: scalars to a value that is not the default,
// enums to their last value, lists to two elements, maps to two entries,
// and messages recursively (six levels deep, which covers every record type).
func fill(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil && depth >= 6 {
				continue
			}
			mp := m.Mutable(fd).Map()
			for k := range 2 {
				key := scalar(fd.MapKey(), k).MapKey()
				if fd.MapValue().Message() != nil {
					v := mp.NewValue()
					fill(v.Message(), depth+1)
					mp.Set(key, v)
				} else {
					mp.Set(key, scalar(fd.MapValue(), k))
				}
			}
		case fd.IsList():
			if fd.Message() != nil && depth >= 6 {
				continue
			}
			l := m.Mutable(fd).List()
			for k := range 2 {
				if fd.Message() != nil {
					v := l.NewElement()
					fill(v.Message(), depth+1)
					l.Append(v)
				} else {
					l.Append(scalar(fd, k))
				}
			}
		case fd.Message() != nil:
			if depth < 6 {
				fill(m.Mutable(fd).Message(), depth+1)
			}
		default:
			m.Set(fd, scalar(fd, 0))
		}
	}
}

// scalar is a value of fd's kind that is not the default, the k-th of a
// few.
func scalar(fd protoreflect.FieldDescriptor, k int) protoreflect.Value {
	n := int64(k + 1)
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(k == 0)
	case protoreflect.EnumKind:
		vs := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vs.Get(vs.Len() - 1 - k).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(-100 * n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(-1e12 * n)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(300 * n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(1e12 * n))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n) + 0.25)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n) + 0.125)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(string(fd.Name()) + "-" + string(rune('a'+k)))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{0x80, byte(k)})
	}
	panic("no value for " + fd.Kind().String())
}

// assertNoUnknown asserts that m and every message in it hold no field
// their type lacks.
func assertNoUnknown(t *testing.T, m protoreflect.Message) {
	t.Helper()
	assert.Empty(t, m.GetUnknown(), "unknown fields in %s", m.Descriptor().FullName())
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					assertNoUnknown(t, mv.Message())
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for i := range v.List().Len() {
					assertNoUnknown(t, v.List().Get(i).Message())
				}
			}
		case fd.Message() != nil:
			assertNoUnknown(t, v.Message())
		}
		return true
	})
}
