package decode_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo/decode"
)

// vitessTopology is a topology Vitess wrote: <cell>/<path> holds the bytes
// stored at <path> in <cell>.
const vitessTopology = "../../testdata/vitess/vitess-local"

// vitessProtoset is Vitess's own FileDescriptorSet of its records.
const vitessProtoset = "../../testdata/vitess/vitess-topodata.protoset"

// readTopology returns every record of the Vitess topology by its path
// (<cell>/<path in the cell>).
func readTopology(t *testing.T) map[string][]byte {
	t.Helper()
	records := map[string][]byte{}
	err := filepath.WalkDir(vitessTopology, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(vitessTopology, p)
		if err != nil {
			return err
		}
		records[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	})
	require.NoError(t, err)
	require.Len(t, records, 24)
	return records
}

// Every record Vitess wrote is known by its path alone, decodes with the
// compiled-in types, and holds nothing those types do not know: the
// generated type re-encodes it to the same bytes, and so does its JSON
// parsed back. Vitess's own types (its protoset) decode it to the same
// JSON.
func TestLayoutDecodesVitessTopology(t *testing.T) {
	builtin := decode.Builtin()
	vitess, err := decode.ReadProtoset(vitessProtoset)
	require.NoError(t, err)
	kinds := map[string]int{}
	for p, value := range readTopology(t) {
		t.Run(p, func(t *testing.T) {
			content, md := builtin.Identify(p)
			require.Equal(t, decode.MessageContent, content)
			kinds[string(md.Name())]++

			js, err := builtin.Decode(p, value, false)
			require.NoError(t, err)
			assert.NotContains(t, string(js), "@unknown")

			mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
			require.NoError(t, err, "the compiled-in type of %s", p)
			msg := mt.New().Interface()
			require.NoError(t, proto.Unmarshal(value, msg))
			assert.Empty(t, msg.ProtoReflect().GetUnknown())
			again, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
			require.NoError(t, err)
			sameBytes(t, md, value, again, "re-encoded")

			fromJSON := mt.New().Interface()
			require.NoError(t, protojson.Unmarshal(js, fromJSON))
			again, err = proto.MarshalOptions{Deterministic: true}.Marshal(fromJSON)
			require.NoError(t, err)
			sameBytes(t, md, value, again, "re-encoded from JSON")

			theirs, err := vitess.Decode(p, value, false)
			require.NoError(t, err)
			assert.JSONEq(t, string(theirs), string(js), "decoded with Vitess's types")
			vmd, err := vitess.TypeFor(p)
			require.NoError(t, err)
			assert.Contains(t, []string{"topodata", "vschema"}, string(vmd.ParentFile().Package()), "a protoset's type of Vitess's name wins")
		})
	}
	assert.Equal(t, map[string]int{
		"RoutingRules": 1, "CellInfo": 1, "Keyspace": 4, "Shard": 3, "SrvVSchema": 1,
		"SrvKeyspace": 2, "ShardReplication": 3, "Tablet": 9,
	}, kinds)
}

// sameBytes asserts that again, a deterministic encoding of the message md
// that value holds, is value's bytes: the same bytes, or, where Vitess
// wrote a map's entries in another order than by key, the same bytes up to
// that order (see canonicalWire).
func sameBytes(t *testing.T, md protoreflect.MessageDescriptor, value, again []byte, what string) {
	t.Helper()
	if bytes.Equal(value, again) {
		return
	}
	assert.Equal(t, canonicalWire(t, value, md), canonicalWire(t, again, md), what)
	assert.Equal(t, len(value), len(again), what)
}

// The same base name decodes by where it is: a keyspace's Keyspace and
// VSchema, an external cluster named after itself, with or without the
// store's root in front.
func TestLayoutByPath(t *testing.T) {
	r := decode.Builtin()
	for p, want := range map[string]string{
		"keyspaces/ks/Keyspace":                    "topokit.topodata.Keyspace",
		"/vitess/global/keyspaces/ks/VSchema":      "topokit.vschema.Keyspace",
		"keyspaces/ks/shards/-80/Shard":            "topokit.topodata.Shard",
		"keyspaces/ks/shards/-80/ShardReplication": "topokit.topodata.ShardReplication",
		"keyspaces/ks/SrvKeyspace":                 "topokit.topodata.SrvKeyspace",
		"SrvVSchema":                               "topokit.vschema.SrvVSchema",
		"RoutingRules":                             "topokit.vschema.RoutingRules",
		"ShardRoutingRules":                        "topokit.vschema.ShardRoutingRules",
		"routing_rules/keyspace/Rules":             "topokit.vschema.KeyspaceRoutingRules",
		"MirrorRules":                              "topokit.vschema.MirrorRules",
		"cells/zone1/CellInfo":                     "topokit.topodata.CellInfo",
		"cells_aliases/east/CellsAlias":            "topokit.topodata.CellsAlias",
		"ExternalClusters/vitess/other":            "topokit.topodata.ExternalVitessCluster",
		"tablets/zone1-0000000100/Tablet":          "topokit.topodata.Tablet",
	} {
		md, err := r.TypeFor(p)
		require.NoError(t, err, p)
		assert.Equal(t, want, string(md.FullName()), p)
	}
	md, err := r.Type("VSchema")
	require.NoError(t, err)
	assert.Equal(t, "topokit.vschema.Keyspace", string(md.FullName()))
	md, err = r.Type("Keyspace")
	require.NoError(t, err, "Keyspace is the layout's record, not ambiguous")
	assert.Equal(t, "topokit.topodata.Keyspace", string(md.FullName()))
	md, err = r.Type("KeyspaceRoutingRules")
	require.NoError(t, err)
	assert.Equal(t, "topokit.vschema.KeyspaceRoutingRules", string(md.FullName()))
	assert.Subset(t, r.Records(), []string{"Keyspace", "VSchema", "Tablet", "SrvVSchema", "MirrorRules", "KeyspaceRoutingRules", "ExternalVitessCluster"})
	assert.NotContains(t, r.Records(), "Metadata", "metadata is text")

	// Vitess's metadata values are text.
	content, _ := r.Identify("metadata/owner")
	assert.Equal(t, decode.TextContent, content)
	b, err := r.Decode("metadata/owner", []byte("team-db"), false)
	require.NoError(t, err)
	assert.Equal(t, `"team-db"`, string(b))

	ext, err := proto.Marshal(&topodatapb.ExternalVitessCluster{TopoConfig: &topodatapb.TopoConfig{TopoType: "etcd2", Server: "10.0.0.1:2379", Root: "/vitess/global"}})
	require.NoError(t, err)
	b, err = r.Decode("ExternalClusters/vitess/other", ext, false)
	require.NoError(t, err)
	assert.JSONEq(t, `{"topoConfig":{"topoType":"etcd2","server":"10.0.0.1:2379","root":"/vitess/global"}}`, string(b))
}

// Locks and elections hold text: a lock holder's description (JSON, as
// Vitess writes it) and participant ids decode readably on every
// backend's layout, and TypeFor says they are not messages.
func TestLayoutLocksAndElections(t *testing.T) {
	r := decode.Builtin()
	holder := []byte("{\n  \"Action\": \"ReparentShard\",\n  \"HostName\": \"vtctld-1\",\n  \"UserName\": \"vitess\",\n  \"Time\": \"2026-12-05T00:00:00Z\",\n  \"Status\": \"Running\"\n}\n")
	for _, p := range []string{
		"keyspaces/commerce/locks/694d9a3b1c2e0f11",            // etcd
		"keyspaces/commerce/shards/0/locks/0000000003",         // ZooKeeper
		"keyspaces/commerce/Lock",                              // Consul
		"keyspaces/commerce/locks/queue/sess-00000000000000a1", // Consul queue entry
	} {
		content, _ := r.Identify(p)
		assert.Equal(t, decode.LockContent, content, p)
		b, err := r.Decode(p, holder, false)
		require.NoError(t, err, p)
		assert.Equal(t, `{"Action":"ReparentShard","HostName":"vtctld-1","UserName":"vitess","Time":"2026-12-05T00:00:00Z","Status":"Running"}`, string(b), p)
		_, err = r.TypeFor(p)
		var te *decode.TypeError
		require.ErrorAs(t, err, &te, p)
		assert.Equal(t, decode.NotProtobuf, te.Kind, p)
	}
	for _, p := range []string{
		"elections/vtorc/locks/694d9a3b1c2e0f12",      // etcd candidate
		"elections/\x00values/vtorc/694d9a3b1c2e0f12", // etcd published value
		"elections/vtorc/0000000001",                  // ZooKeeper candidate
		"elections/vtorc",                             // Consul leader
	} {
		content, _ := r.Identify(p)
		assert.Equal(t, decode.ElectionContent, content, p)
		b, err := r.Decode(p, []byte("zone1-vtorc-1:15999"), true)
		require.NoError(t, err, p)
		assert.Equal(t, `"zone1-vtorc-1:15999"`, string(b), p)
	}

	multi, err := decode.Text(holder, true)
	require.NoError(t, err)
	assert.Contains(t, string(multi), "\n  \"HostName\": \"vtctld-1\"")
	for value, want := range map[string]string{"": `""`, "a\nb": `"a\nb"`, "\xff\x00ok": `"\\xff\\x00ok"`, "17": "17"} {
		b, err := decode.Text([]byte(value), false)
		require.NoError(t, err)
		assert.Equal(t, want, string(b), "%q", value)
	}
	content, md := r.Identify("keyspaces/commerce/NotARecord")
	assert.Equal(t, decode.UnknownContent, content)
	assert.Nil(t, md)
}

// A record written by a newer Vitess, with fields the compiled-in types do
// not have (at the top and nested), still decodes by path, shows them
// under "@unknown", and re-encodes to the same bytes; JSON with a type
// the user chose still refuses them as a sign of the wrong type.
func TestLayoutUnknownFields(t *testing.T) {
	value, err := os.ReadFile(filepath.Join(vitessTopology, "zone1/tablets/zone1-0000000100/Tablet"))
	require.NoError(t, err)
	// The alias again with a field 9 it does not have, then a field 99
	// the Tablet does not have. A repeated message field merges, so the
	// alias decodes as before plus the unknown field.
	alias := protowire.AppendTag(nil, 9, protowire.VarintType)
	alias = protowire.AppendVarint(alias, 7)
	newer := protowire.AppendTag(append([]byte{}, value...), 1, protowire.BytesType)
	newer = protowire.AppendBytes(newer, alias)
	newer = protowire.AppendTag(newer, 99, protowire.BytesType)
	newer = protowire.AppendString(newer, "from the future")

	r := decode.Builtin()
	b, err := r.Decode("tablets/zone1-0000000100/Tablet", newer, false)
	require.NoError(t, err)
	s := string(b)
	assert.Contains(t, s, `"hostname":"zone1-100.vt.internal"`)
	assert.Contains(t, s, `"@unknown":[{"at":"","fields":[{"field":99,"wire":"bytes","string":"from the future"}]},{"at":"alias","fields":[{"field":9,"wire":"varint","uint":7}]}]`)

	msg := &topodatapb.Tablet{}
	require.NoError(t, proto.Unmarshal(newer, msg))
	assert.Equal(t, uint32(100), msg.GetAlias().GetUid())
	again, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	require.NoError(t, err)
	again2 := &topodatapb.Tablet{}
	require.NoError(t, proto.Unmarshal(again, again2))
	assert.True(t, proto.Equal(msg, again2))
	// Unknown fields are kept in order, at the end of their message: the
	// bytes come back as the canonical form of the newer record.
	canonical, err := proto.MarshalOptions{Deterministic: true}.Marshal(again2)
	require.NoError(t, err)
	assert.Equal(t, again, canonical)
	assert.Equal(t, len(newer)-2, len(again), "the alias merged into one (its tag and length once)")

	// A record with unknown fields only at its end comes back byte for byte.
	tail := protowire.AppendTag(append([]byte{}, value...), 99, protowire.BytesType)
	tail = protowire.AppendString(tail, "from the future")
	msg = &topodatapb.Tablet{}
	require.NoError(t, proto.Unmarshal(tail, msg))
	again, err = proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	require.NoError(t, err)
	assert.Equal(t, tail, again)

	md, err := r.Type("Tablet")
	require.NoError(t, err)
	_, err = r.JSON(md, newer, false)
	var ue *decode.UnknownFieldsError
	assert.ErrorAs(t, err, &ue)
}

// A protoset adds types and rules, and what the user registers wins over
// the layout; a protoset without Vitess's types still decodes the layout.
func TestLayoutProtosetAndRules(t *testing.T) {
	r, err := decode.ReadProtoset(vitessProtoset)
	require.NoError(t, err)
	md, err := r.TypeFor("keyspaces/ks/VSchema")
	require.NoError(t, err)
	assert.Equal(t, "vschema.Keyspace", string(md.FullName()))

	r.RegisterPath("keyspaces/*/VSchema", "topodata.Keyspace")
	md, err = r.TypeFor("keyspaces/ks/VSchema")
	require.NoError(t, err)
	assert.Equal(t, "topodata.Keyspace", string(md.FullName()), "RegisterPath wins over the layout")
	r.Register("VSchema", "vschema.SrvVSchema")
	md, err = r.TypeFor("keyspaces/ks/VSchema")
	require.NoError(t, err)
	assert.Equal(t, "vschema.SrvVSchema", string(md.FullName()), "Register wins over RegisterPath")
	r.RegisterPath("settings/*", "topodata.CellInfo")
	md, err = r.TypeFor("settings/x")
	require.NoError(t, err)
	assert.Equal(t, "topodata.CellInfo", string(md.FullName()))
	r.RegisterPath("", "topodata.CellInfo")
	md, err = r.TypeFor("keyspaces/ks/Keyspace")
	require.NoError(t, err)
	assert.Equal(t, "topodata.Keyspace", string(md.FullName()), "an empty pattern matches nothing")
	r.RegisterPath("other/*", "no.Such")
	_, err = r.TypeFor("other/x")
	assert.Error(t, err, "a rule naming a type the registry lacks picks nothing")

	// A protoset of only well-known types.
	own, err := decode.FromProtoset(nil)
	require.NoError(t, err)
	md, err = own.TypeFor("tablets/zone1-0000000100/Tablet")
	require.NoError(t, err)
	assert.Equal(t, "topokit.topodata.Tablet", string(md.FullName()))
	value, err := os.ReadFile(filepath.Join(vitessTopology, "zone1/tablets/zone1-0000000100/Tablet"))
	require.NoError(t, err)
	b, err := own.Decode("tablets/zone1-0000000100/Tablet", value, false)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(b), `{"alias":{"cell":"zone1","uid":100}`), string(b))

	rules := decode.Layout()
	assert.Len(t, rules, 15)
	for _, l := range rules {
		assert.Contains(t, []string{"global", "cell"}, l.Cell, l.Pattern)
		assert.NotEmpty(t, l.Name, l.Pattern)
		assert.Equal(t, l.Type != "", l.Content == decode.MessageContent, l.Pattern)
	}
}
