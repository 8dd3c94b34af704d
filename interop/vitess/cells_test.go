package vitessinterop

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/reflect/protoregistry"
	vtopodatapb "vitess.io/vitess/go/vt/proto/topodata"
	vtopo "vitess.io/vitess/go/vt/topo"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
)

// vitessFactory is a Vitess topo.Factory opening this store's Vitess
// Conns on the root it is given.
type vitessFactory struct {
	t *testing.T
	s store
}

func (f vitessFactory) HasGlobalReadOnlyCell(string, string) bool { return false }

func (f vitessFactory) Create(_, _, root string) (vtopo.Conn, error) {
	return f.s.vitess(f.t, root), nil
}

// topokitFactory is a topokit topo.Factory opening this store's topokit
// Conns on the root it is given.
type topokitFactory struct {
	t *testing.T
	s store
}

func (f topokitFactory) Create(_, _, root string) (topo.Conn, error) {
	return f.s.topokit(f.t, root), nil
}

// This binary links Vitess's generated topodata (registered as
// "topodata.proto", package topodata) and topokit's (under a path and
// package of its own): both are in the global registry, and a program that
// links both starts.
func TestBothTopodataRegistered(t *testing.T) {
	vfd, err := protoregistry.GlobalFiles.FindFileByPath("topodata.proto")
	require.NoError(t, err)
	require.Equal(t, "topodata", string(vfd.Package()))
	require.Equal(t, vtopodatapb.File_topodata_proto, vfd)
	tfd, err := protoregistry.GlobalFiles.FindFileByPath("topokit/topodata/topodata.proto")
	require.NoError(t, err)
	require.Equal(t, "topokit.topodata", string(tfd.Package()))
	require.Equal(t, topodatapb.File_topokit_topodata_topodata_proto, tfd)
}

// Cells and cells aliases written by either library's Server are read by
// the other's, on each real store: the records are the same bytes at the
// same paths, and the alias rules (a cell in one alias) agree.
func TestCellsAcrossLibraries(t *testing.T) {
	for _, s := range stores() {
		t.Run(s.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			root := s.root(t)
			vts, err := vtopo.NewWithFactory(vitessFactory{t, s}, "unused", root)
			require.NoError(t, err)
			// vts is not closed: its Conns are closed at the end of t.
			ts := topo.NewServer(topokitFactory{t, s}, s.topokit(t, root))
			defer ts.Close()

			// topokit writes, Vitess reads.
			require.NoError(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: "z1:2379", Root: "/zone1"}))
			require.NoError(t, ts.CreateCellInfo(ctx, "zone2", &topodatapb.CellInfo{ServerAddress: "z2:2379", Root: "/zone2"}))
			require.NoError(t, ts.CreateCellsAlias(ctx, "east", &topodatapb.CellsAlias{Cells: []string{"zone1", "zone2"}}))
			vci, err := vts.GetCellInfo(ctx, "zone1", true)
			require.NoError(t, err)
			require.Equal(t, "z1:2379", vci.GetServerAddress())
			require.Equal(t, "/zone1", vci.GetRoot())
			names, err := vts.GetCellInfoNames(ctx)
			require.NoError(t, err)
			require.Equal(t, []string{"zone1", "zone2"}, names)
			vca, err := vts.GetCellsAlias(ctx, "east", true)
			require.NoError(t, err)
			require.Equal(t, []string{"zone1", "zone2"}, vca.GetCells())
			require.Equal(t, "east", vtopo.GetAliasByCell(ctx, vts, "zone2"))

			// Vitess writes, topokit reads.
			require.NoError(t, vts.CreateCellInfo(ctx, "zone3", &vtopodatapb.CellInfo{ServerAddress: "z3:2379", Root: "/zone3"}))
			require.NoError(t, vts.CreateCellsAlias(ctx, "west", &vtopodatapb.CellsAlias{Cells: []string{"zone3"}}))
			ci, err := ts.GetCellInfo(ctx, "zone3")
			require.NoError(t, err)
			require.Equal(t, "z3:2379", ci.GetServerAddress())
			require.Equal(t, "/zone3", ci.GetRoot())
			alias, err := ts.GetAliasForCell(ctx, "zone3")
			require.NoError(t, err)
			require.Equal(t, "west", alias)
			all, err := ts.GetCellsAliases(ctx)
			require.NoError(t, err)
			require.Len(t, all, 2)
			require.Equal(t, []string{"zone1", "zone2"}, all["east"].GetCells())

			// The rules agree: neither puts a cell of one alias into another.
			err = ts.CreateCellsAlias(ctx, "south", &topodatapb.CellsAlias{Cells: []string{"zone3"}})
			require.ErrorIs(t, err, topo.NodeExists)
			require.Error(t, vts.CreateCellsAlias(ctx, "north", &vtopodatapb.CellsAlias{Cells: []string{"zone1"}}))

			// topokit's identical CreateCellInfo of a Vitess-written record is a no-op.
			require.NoError(t, ts.CreateCellInfo(ctx, "zone3", &topodatapb.CellInfo{ServerAddress: "z3:2379", Root: "/zone3"}))
		})
	}
}
