package vitessinterop

import (
	"context"
	"encoding/json"
	"path"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	querypb "vitess.io/vitess/go/vt/proto/query"
	vtopodatapb "vitess.io/vitess/go/vt/proto/topodata"
	vschemapb "vitess.io/vitess/go/vt/proto/vschema"
	vttimepb "vitess.io/vitess/go/vt/proto/vttime"
	vtopo "vitess.io/vitess/go/vt/topo"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/decode"
)

// Every record Vitess's own Server writes, and its lock and election
// files, decode by path on each real store: with the types of this binary
// (Vitess's, which it links) and with topokit's compiled-in ones alone,
// to the same JSON, with nothing unknown; a message re-encoded through
// topokit's type is the message Vitess wrote.
func TestDecodeWhatVitessWrites(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx := testCtx(t)
			root := s.root(t)
			cellRoot := path.Join(root, "zone1")
			vts, err := vtopo.NewWithFactory(vitessFactory{t, s}, "unused", root)
			require.NoError(t, err)
			writeVitessRecords(ctx, t, vts, cellRoot)

			// Vitess holds a keyspace lock and leads an election;
			// topokit leads another, with a published value.
			lctx, unlock, err := vts.LockKeyspace(ctx, "ks", "TestDecodeWhatVitessWrites")
			require.NoError(t, err)
			defer func() {
				var uerr error
				unlock(&uerr)
				assert.NoError(t, uerr)
			}()
			require.NoError(t, vtopo.CheckKeyspaceLocked(lctx, "ks"))
			vl := joinVitess(s.vitess(t, root), "svc", "vitess-leader")
			require.NoError(t, vl.err)
			defer vl.stop()
			tl := joinTopokit(ctx, s.topokit(t, root), "svc2", "topokit-leader")
			require.NoError(t, tl.err)
			defer tl.stop()

			builtin := decode.Builtin()
			md, err := builtin.TypeFor("keyspaces/ks/Keyspace")
			require.NoError(t, err)
			require.Equal(t, "topodata.Keyspace", string(md.FullName()), "a binary that links Vitess decodes with Vitess's types")
			ours, err := decode.FromProtoset(nil)
			require.NoError(t, err)

			// The cell's root is under the global root: one walk reads
			// both, and a rule of the layout matches a path's last
			// segments (zone1/tablets/... is a Tablet).
			tc := s.topokit(t, root)
			files := map[string][]byte{}
			for _, p := range walk(ctx, t, tc, "") {
				files[p], _, err = tc.Get(ctx, p)
				require.NoError(t, err, p)
			}
			if s.name == "zk" {
				// topokit's ZooKeeper Conn lists neither lock entries nor
				// election candidates: read Vitess's with a raw client.
				for _, dir := range []string{"keyspaces/ks/locks", "elections/svc"} {
					for p, value := range zkChildren(t, root, dir) {
						files[p] = value
					}
				}
			}
			kinds := map[string]int{}
			for p, value := range files {
				content, md := builtin.Identify(p)
				require.NotEqual(t, decode.UnknownContent, content, "%s is not in the layout", p)
				kind := content.String()
				if md != nil {
					kind = string(md.Name())
				}
				kinds[kind]++

				js, err := builtin.Decode(p, value, false)
				require.NoError(t, err, p)
				assert.NotContains(t, string(js), "@unknown", p)
				theirs, err := ours.Decode(p, value, false)
				require.NoError(t, err, p)
				assert.JSONEq(t, string(js), string(theirs), p)
				switch content {
				case decode.MessageContent:
					sameMessage(t, p, ours, value)
				case decode.LockContent:
					var holder map[string]any
					require.NoError(t, json.Unmarshal(js, &holder), "%s: %s", p, js)
					assert.Equal(t, "TestDecodeWhatVitessWrites", holder["Action"], p)
				case decode.ElectionContent:
					assert.Contains(t, []string{`"vitess-leader"`, `"topokit-leader"`, `"value-of-topokit-leader"`}, string(js), p)
				case decode.TextContent:
					assert.Equal(t, `"team-db"`, string(js), p)
				}
			}
			t.Logf("records by kind: %v", kinds)
			for _, k := range []string{"Keyspace", "Shard", "Tablet", "ShardReplication", "SrvKeyspace", "SrvVSchema",
				"RoutingRules", "ShardRoutingRules", "KeyspaceRoutingRules", "MirrorRules", "CellInfo", "CellsAlias",
				"ExternalVitessCluster", "text", "lock holder", "election entry"} {
				assert.Positive(t, kinds[k], "no %s among %v", k, kinds)
			}
			assert.Equal(t, 2, kinds["Keyspace"], "the Keyspace and the VSchema (a vschema Keyspace)")
			assert.Equal(t, 2, kinds["Shard"])
			assert.Equal(t, 1, kinds["Tablet"])
		})
	}
}

// sameMessage asserts that value, the Vitess message at p, read into
// topokit's type of p (from ours) and written back is the message Vitess
// wrote, of the same size.
func sameMessage(t *testing.T, p string, ours *decode.Registry, value []byte) {
	t.Helper()
	omd, err := ours.TypeFor(p)
	require.NoError(t, err, p)
	ot, err := protoregistry.GlobalTypes.FindMessageByName(omd.FullName())
	require.NoError(t, err, p)
	om := ot.New().Interface()
	require.NoError(t, proto.Unmarshal(value, om), p)
	assert.Empty(t, om.ProtoReflect().GetUnknown(), p)
	again, err := proto.MarshalOptions{Deterministic: true}.Marshal(om)
	require.NoError(t, err, p)
	vmd, err := decode.Builtin().TypeFor(p)
	require.NoError(t, err, p)
	vt, err := protoregistry.GlobalTypes.FindMessageByName(vmd.FullName())
	require.NoError(t, err, p)
	want, got := vt.New().Interface(), vt.New().Interface()
	require.NoError(t, proto.Unmarshal(value, want), p)
	require.NoError(t, proto.Unmarshal(again, got), p)
	assert.True(t, proto.Equal(want, got), "%s: %v != %v", p, want, got)
	assert.Len(t, again, len(value), p)
}

// writeVitessRecords writes one of each of Vitess's records through its
// own Server: global ones, and those of a cell zone1 at cellRoot.
func writeVitessRecords(ctx context.Context, t *testing.T, vts *vtopo.Server, cellRoot string) {
	t.Helper()
	require.NoError(t, vts.CreateCellInfo(ctx, "zone1", &vtopodatapb.CellInfo{ServerAddress: "unused", Root: cellRoot}))
	require.NoError(t, vts.CreateCellsAlias(ctx, "east", &vtopodatapb.CellsAlias{Cells: []string{"zone1"}}))
	require.NoError(t, vts.CreateKeyspace(ctx, "ks", &vtopodatapb.Keyspace{
		DurabilityPolicy: "semi_sync",
		SidecarDbName:    "_vt",
		ThrottlerConfig: &vtopodatapb.ThrottlerConfig{
			Enabled:       true,
			Threshold:     1.5,
			ThrottledApps: map[string]*vtopodatapb.ThrottledAppRule{"online-ddl": {Name: "online-ddl", Ratio: 0.5, ExpiresAt: &vttimepb.Time{Seconds: 2e9}}},
		},
	}))
	require.NoError(t, vts.CreateShard(ctx, "ks", "-80"))
	require.NoError(t, vts.CreateShard(ctx, "ks", "80-"))
	require.NoError(t, vts.SaveVSchema(ctx, &vtopo.KeyspaceVSchemaInfo{Name: "ks", Keyspace: &vschemapb.Keyspace{
		Sharded:  true,
		Vindexes: map[string]*vschemapb.Vindex{"hash": {Type: "hash"}},
		Tables: map[string]*vschemapb.Table{"t": {
			ColumnVindexes: []*vschemapb.ColumnVindex{{Column: "id", Name: "hash"}},
			Columns:        []*vschemapb.Column{{Name: "id", Type: querypb.Type_INT64, Nullable: proto.Bool(false)}},
		}},
	}}))
	require.NoError(t, vts.SaveRoutingRules(ctx, &vschemapb.RoutingRules{Rules: []*vschemapb.RoutingRule{{FromTable: "t2", ToTables: []string{"ks.t"}}}}))
	require.NoError(t, vts.SaveShardRoutingRules(ctx, &vschemapb.ShardRoutingRules{Rules: []*vschemapb.ShardRoutingRule{{FromKeyspace: "old", ToKeyspace: "ks", Shard: "-80"}}}))
	require.NoError(t, vts.CreateKeyspaceRoutingRules(ctx, &vschemapb.KeyspaceRoutingRules{Rules: []*vschemapb.KeyspaceRoutingRule{{FromKeyspace: "old", ToKeyspace: "ks"}}}))
	require.NoError(t, vts.SaveMirrorRules(ctx, &vschemapb.MirrorRules{Rules: []*vschemapb.MirrorRule{{FromTable: "ks.t", ToTable: "other.t", Percent: 12.5}}}))
	require.NoError(t, vts.CreateExternalVitessCluster(ctx, "other", &vtopodatapb.ExternalVitessCluster{TopoConfig: &vtopodatapb.TopoConfig{TopoType: "etcd2", Server: "10.0.0.1:2379", Root: "/other"}}))
	require.NoError(t, vts.UpsertMetadata(ctx, "owner", "team-db"))
	require.NoError(t, vts.CreateTablet(ctx, &vtopodatapb.Tablet{
		Alias:    &vtopodatapb.TabletAlias{Cell: "zone1", Uid: 100},
		Hostname: "zone1-100",
		PortMap:  map[string]int32{"vt": 15100, "grpc": 16100},
		Keyspace: "ks",
		Shard:    "-80",
		KeyRange: &vtopodatapb.KeyRange{End: []byte{0x80}},
		Type:     vtopodatapb.TabletType_PRIMARY,
		Tags:     map[string]string{"rack": "r1", "zone": "a"},
	}))
	require.NoError(t, vts.UpdateSrvKeyspace(ctx, "zone1", "ks", &vtopodatapb.SrvKeyspace{Partitions: []*vtopodatapb.SrvKeyspace_KeyspacePartition{{
		ServedType:      vtopodatapb.TabletType_PRIMARY,
		ShardReferences: []*vtopodatapb.ShardReference{{Name: "-80", KeyRange: &vtopodatapb.KeyRange{End: []byte{0x80}}}, {Name: "80-", KeyRange: &vtopodatapb.KeyRange{Start: []byte{0x80}}}},
	}}}))
	require.NoError(t, vts.UpdateSrvVSchema(ctx, "zone1", &vschemapb.SrvVSchema{
		Keyspaces:    map[string]*vschemapb.Keyspace{"ks": {Sharded: true}, "other": {}},
		RoutingRules: &vschemapb.RoutingRules{Rules: []*vschemapb.RoutingRule{{FromTable: "t2", ToTables: []string{"ks.t"}}}},
	}))
}

// zkChildren returns the children of dir (under root) and their data,
// by path relative to root, with a raw ZooKeeper client.
func zkChildren(t *testing.T, root, dir string) map[string][]byte {
	t.Helper()
	z := rawZK(t)
	defer z.Close()
	names, _, err := z.Children(path.Join(root, dir))
	require.NoError(t, err, dir)
	out := map[string][]byte{}
	for _, n := range names {
		value, _, err := z.Get(path.Join(root, dir, n))
		require.NoError(t, err, n)
		out[path.Join(dir, n)] = value
	}
	return out
}

// walk returns the path of every file under dir that a full ListDir
// shows, locks' and elections' files included where the backend lists
// them (a directory whose entries are all hidden lists as NoNode).
func walk(ctx context.Context, t *testing.T, c topo.Conn, dir string) []string {
	t.Helper()
	entries, err := c.ListDir(ctx, dir, true)
	if topo.IsErrType(err, topo.NoNode) {
		return nil
	}
	require.NoError(t, err, dir)
	var files []string
	for _, e := range entries {
		p := path.Join(dir, e.Name)
		if e.Type == topo.TypeDirectory {
			files = append(files, walk(ctx, t, c, p)...)
		} else {
			files = append(files, p)
		}
	}
	return files
}
