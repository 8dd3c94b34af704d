package topo_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

func aliasOf(cells ...string) *topodatapb.CellsAlias {
	return &topodatapb.CellsAlias{Cells: cells}
}

func requireConflict(t *testing.T, err error) *topo.CellsAliasConflictError {
	t.Helper()
	requireCodeT(t, err, topo.NodeExists)
	var ce *topo.CellsAliasConflictError
	require.Truef(t, errors.As(err, &ce), "want a *CellsAliasConflictError, got %v", err)
	return ce
}

func TestCellsAliasCRUD(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t, "zone1", "zone2", "zone3")
	raw := rawConn(t, f)

	all, err := ts.GetCellsAliases(ctx)
	require.NoError(t, err)
	require.Empty(t, all)
	names, err := ts.GetCellsAliasNames(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{}, names)
	_, err = ts.GetCellsAlias(ctx, "east")
	requireCodeT(t, err, topo.NoNode)
	requireCodeT(t, ts.DeleteCellsAlias(ctx, "east"), topo.NoNode)

	require.NoError(t, ts.CreateCellsAlias(ctx, "east", aliasOf("zone1", "zone2")))
	require.NoError(t, ts.CreateCellsAlias(ctx, "west", aliasOf("zone3")))
	requireCodeT(t, ts.CreateCellsAlias(ctx, "east", aliasOf("zone9")), topo.NodeExists)
	_, v1, err := raw.Get(ctx, "global/"+topo.CellsAliasPath("east"))
	require.NoError(t, err)
	require.NoError(t, ts.CreateCellsAlias(ctx, "east", aliasOf("zone1", "zone2")), "an identical CreateCellsAlias is idempotent")
	_, v2, err := raw.Get(ctx, "global/"+topo.CellsAliasPath("east"))
	require.NoError(t, err)
	require.Equal(t, v1, v2, "an identical CreateCellsAlias wrote")

	got, err := ts.GetCellsAlias(ctx, "east")
	require.NoError(t, err)
	require.Equal(t, []string{"zone1", "zone2"}, got.GetCells())
	all, err = ts.GetCellsAliases(ctx)
	require.NoError(t, err)
	require.Len(t, all, 2)
	require.Equal(t, []string{"zone3"}, all["west"].GetCells())
	names, err = ts.GetCellsAliasNames(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"east", "west"}, names)

	// The record lives at cells_aliases/<alias>/CellsAlias in the global
	// cell (Vitess's layout).
	require.Equal(t, "cells_aliases/east/CellsAlias", topo.CellsAliasPath("east"))
	data, _, err := raw.Get(ctx, "global/cells_aliases/east/CellsAlias")
	require.NoError(t, err)
	decoded := &topodatapb.CellsAlias{}
	require.NoError(t, proto.Unmarshal(data, decoded))
	require.Equal(t, []string{"zone1", "zone2"}, decoded.GetCells())

	// Other files under cells_aliases/ are not aliases.
	_, err = raw.Create(ctx, "global/cells_aliases/east/notes", []byte("x"))
	require.NoError(t, err)
	_, err = raw.Create(ctx, "global/cells_aliases/stray", []byte("x"))
	require.NoError(t, err)
	names, err = ts.GetCellsAliasNames(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"east", "west"}, names)

	require.NoError(t, ts.UpdateCellsAlias(ctx, "east", func(ca *topodatapb.CellsAlias) error {
		ca.Cells = slices.DeleteFunc(ca.Cells, func(c string) bool { return c == "zone2" })
		return nil
	}))
	got, err = ts.GetCellsAlias(ctx, "east")
	require.NoError(t, err)
	require.Equal(t, []string{"zone1"}, got.GetCells())

	// UpdateCellsAlias of an absent alias starts from an empty record.
	require.NoError(t, ts.UpdateCellsAlias(ctx, "north", func(ca *topodatapb.CellsAlias) error {
		require.Empty(t, ca.GetCells())
		ca.Cells = append(ca.Cells, "zone2")
		return nil
	}))
	got, err = ts.GetCellsAlias(ctx, "north")
	require.NoError(t, err)
	require.Equal(t, []string{"zone2"}, got.GetCells())

	// NoUpdateNeeded writes nothing; another error from update is returned.
	_, before, err := raw.Get(ctx, "global/"+topo.CellsAliasPath("north"))
	require.NoError(t, err)
	require.NoError(t, ts.UpdateCellsAlias(ctx, "north", func(*topodatapb.CellsAlias) error {
		return fmt.Errorf("nothing: %w", topo.NoUpdateNeeded)
	}))
	boom := errors.New("boom")
	require.ErrorIs(t, ts.UpdateCellsAlias(ctx, "north", func(*topodatapb.CellsAlias) error { return boom }), boom)
	_, after, err := raw.Get(ctx, "global/"+topo.CellsAliasPath("north"))
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.NoError(t, ts.UpdateCellsAlias(ctx, "ghost", func(*topodatapb.CellsAlias) error { return topo.NoUpdateNeeded }))

	require.NoError(t, ts.DeleteCellsAlias(ctx, "north"))
	_, err = ts.GetCellsAlias(ctx, "north")
	requireCodeT(t, err, topo.NoNode)

	// An undecodable record is InvalidArgument, naming it.
	_, err = raw.Create(ctx, "global/cells_aliases/bad/CellsAlias", []byte{0xff})
	require.NoError(t, err)
	_, err = ts.GetCellsAlias(ctx, "bad")
	requireCodeT(t, err, topo.InvalidArgument)
	_, err = ts.GetCellsAliases(ctx)
	requireCodeT(t, err, topo.InvalidArgument)
	require.ErrorContains(t, err, "cells_aliases/bad/CellsAlias")
}

func TestCellsAliasBadInputWritesNothing(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t, "zone1")
	raw := rawConn(t, f)
	for _, name := range []string{"", "a/b", "global", "locks", "Lock", ".", ".."} {
		err := ts.CreateCellsAlias(ctx, name, aliasOf("zone1"))
		require.Truef(t, topo.IsErrType(err, topo.InvalidArgument) || topo.IsErrType(err, topo.InvalidPath), "%q: %v", name, err)
		err = ts.UpdateCellsAlias(ctx, name, func(*topodatapb.CellsAlias) error { return nil })
		require.Truef(t, topo.IsErrType(err, topo.InvalidArgument) || topo.IsErrType(err, topo.InvalidPath), "%q: %v", name, err)
		_, err = ts.GetCellsAlias(ctx, name)
		require.Errorf(t, err, "%q", name)
		require.Errorf(t, ts.DeleteCellsAlias(ctx, name), "%q", name)
	}
	for _, ca := range []*topodatapb.CellsAlias{nil, aliasOf(""), aliasOf("a/b"), aliasOf("zone1", "global")} {
		requireCodeT(t, ts.CreateCellsAlias(ctx, "east", ca), topo.InvalidArgument)
		requireCodeT(t, ts.UpdateCellsAlias(ctx, "east", func(c *topodatapb.CellsAlias) error {
			c.Cells = ca.GetCells()
			if ca == nil {
				c.Cells = []string{""}
			}
			return nil
		}), topo.InvalidArgument)
	}
	_, err := raw.List(ctx, "global/cells_aliases/")
	requireCodeT(t, err, topo.NoNode)
}

// TestCellsAliasRules checks Vitess's rules: a cell belongs to at most one
// alias, and an alias does not share its name with a cell.
func TestCellsAliasRules(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t, "zone1", "zone2", "zone3")
	raw := rawConn(t, f)
	require.NoError(t, ts.CreateCellsAlias(ctx, "east", aliasOf("zone1", "zone2")))

	ce := requireConflict(t, ts.CreateCellsAlias(ctx, "west", aliasOf("zone3", "zone2")))
	require.Equal(t, &topo.CellsAliasConflictError{Alias: "west", Cell: "zone2", Aliases: []string{"east"}}, ce)
	_, err := ts.GetCellsAlias(ctx, "west")
	requireCodeT(t, err, topo.NoNode)

	// An update may keep the alias's own cells, but not take another's.
	require.NoError(t, ts.UpdateCellsAlias(ctx, "east", func(ca *topodatapb.CellsAlias) error {
		ca.Cells = append(ca.Cells, "zone3")
		return nil
	}))
	require.NoError(t, ts.CreateCellsAlias(ctx, "west", aliasOf("zone4")))
	ce = requireConflict(t, ts.UpdateCellsAlias(ctx, "west", func(ca *topodatapb.CellsAlias) error {
		ca.Cells = append(ca.Cells, "zone3")
		return nil
	}))
	require.Equal(t, []string{"east"}, ce.Aliases)
	got, err := ts.GetCellsAlias(ctx, "west")
	require.NoError(t, err)
	require.Equal(t, []string{"zone4"}, got.GetCells(), "a refused update changed the record")

	// Alias names and cell names do not collide, in either direction.
	ce = requireConflict(t, ts.CreateCellsAlias(ctx, "zone1", aliasOf("zone9")))
	require.Equal(t, "zone1", ce.Cell)
	require.Empty(t, ce.Aliases)
	requireConflict(t, ts.UpdateCellsAlias(ctx, "zone2", func(ca *topodatapb.CellsAlias) error { return nil }))
	requireConflict(t, ts.CreateCellInfo(ctx, "west", &topodatapb.CellInfo{Root: "/west"}))
	requireConflict(t, ts.UpdateCellInfoFields(ctx, "west", func(ci *topodatapb.CellInfo) error {
		ci.Root = "/west"
		return nil
	}))
	_, _, err = raw.Get(ctx, "global/"+topo.CellInfoPath("west"))
	requireCodeT(t, err, topo.NoNode)
	_, _, err = raw.Get(ctx, "global/"+topo.CellsAliasPath("zone1"))
	requireCodeT(t, err, topo.NoNode)
}

func TestGetAliasForCell(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t, "zone1", "zone2", "zone3")
	raw := rawConn(t, f)

	_, err := ts.GetAliasForCell(ctx, "zone1")
	requireCodeT(t, err, topo.NoNode)
	require.NoError(t, ts.CreateCellsAlias(ctx, "east", aliasOf("zone1", "zone2")))
	require.NoError(t, ts.CreateCellsAlias(ctx, "west", aliasOf("zone3")))
	for cell, want := range map[string]string{"zone1": "east", "zone2": "east", "zone3": "west"} {
		got, err := ts.GetAliasForCell(ctx, cell)
		require.NoError(t, err)
		require.Equal(t, want, got, cell)
	}
	_, err = ts.GetAliasForCell(ctx, "zone9")
	requireCodeT(t, err, topo.NoNode)
	_, err = ts.GetAliasForCell(ctx, "a/b")
	requireCodeT(t, err, topo.InvalidArgument)

	// A store that breaks the rule (written by another tool) is reported,
	// never resolved to one of the aliases.
	b, err := proto.Marshal(aliasOf("zone3"))
	require.NoError(t, err)
	_, err = raw.Create(ctx, "global/"+topo.CellsAliasPath("other"), b)
	require.NoError(t, err)
	ce := requireConflict(t, func() error { _, err := ts.GetAliasForCell(ctx, "zone3"); return err }())
	require.Equal(t, &topo.CellsAliasConflictError{Cell: "zone3", Aliases: []string{"other", "west"}}, ce)
}

// TestCellsAliasConcurrentCreates races writers that each put the same cell
// into an alias of their own: at most one record keeps it, and every writer
// that got nil has its record in the store.
func TestCellsAliasConcurrentCreates(t *testing.T) {
	ctx := t.Context()
	for round := range 20 {
		ts, _ := newServer(t, "zone1")
		const writers = 8
		var wg sync.WaitGroup
		errs := make([]error, writers)
		for i := range writers {
			wg.Go(func() {
				if i%2 == 0 {
					errs[i] = ts.CreateCellsAlias(ctx, fmt.Sprintf("a%d", i), aliasOf("shared", fmt.Sprintf("own%d", i)))
				} else {
					errs[i] = ts.UpdateCellsAlias(ctx, fmt.Sprintf("a%d", i), func(ca *topodatapb.CellsAlias) error {
						ca.Cells = []string{fmt.Sprintf("own%d", i), "shared"}
						return nil
					})
				}
			})
		}
		wg.Wait()
		all, err := ts.GetCellsAliases(ctx)
		require.NoError(t, err)
		var holders, succeeded []string
		for name, ca := range all {
			if slices.Contains(ca.GetCells(), "shared") {
				holders = append(holders, name)
			}
		}
		for i, err := range errs {
			if err == nil {
				succeeded = append(succeeded, fmt.Sprintf("a%d", i))
				continue
			}
			requireConflict(t, err)
		}
		slices.Sort(holders)
		require.LessOrEqualf(t, len(holders), 1, "round %d: the cell is in %v", round, holders)
		require.Equalf(t, succeeded, holders, "round %d: a writer that got nil lost its record, or a refused one kept it", round)
		if len(holders) == 1 {
			got, err := ts.GetAliasForCell(ctx, "shared")
			require.NoError(t, err)
			require.Equal(t, holders[0], got)
		}
	}
}

// TestUpdateCellsAliasRetries makes the first compare-and-set lose to a
// concurrent writer, and a permanent store error end the loop at once.
func TestUpdateCellsAliasRetries(t *testing.T) {
	ctx := t.Context()
	ts, f := newServer(t, "zone1")
	require.NoError(t, ts.CreateCellsAlias(ctx, "east", aliasOf("zone1")))
	var calls atomic.Int32
	require.NoError(t, ts.UpdateCellsAlias(ctx, "east", func(ca *topodatapb.CellsAlias) error {
		if calls.Add(1) == 1 {
			require.NoError(t, ts.UpdateCellsAlias(ctx, "east", func(ca *topodatapb.CellsAlias) error {
				ca.Cells = append(ca.Cells, "zone2")
				return nil
			}))
		}
		ca.Cells = append(ca.Cells, "zone3")
		return nil
	}))
	require.EqualValues(t, 2, calls.Load())
	got, err := ts.GetCellsAlias(ctx, "east")
	require.NoError(t, err)
	require.Equal(t, []string{"zone1", "zone2", "zone3"}, got.GetCells())

	remove := f.AddFault(memorytopo.Fault{Op: memorytopo.OpUpdate, Prefix: "cells_aliases/", Err: topo.PermissionDenied})
	defer remove()
	calls.Store(0)
	err = ts.UpdateCellsAlias(ctx, "east", func(ca *topodatapb.CellsAlias) error {
		calls.Add(1)
		ca.Cells = append(ca.Cells, "zone4")
		return nil
	})
	requireCodeT(t, err, topo.PermissionDenied)
	require.EqualValues(t, 1, calls.Load())
}

// vitessCellsAliasDescriptor is Vitess's topodata.CellsAlias as Vitess's
// topodata.proto declares it: `repeated string cells = 2;`.
func vitessCellsAliasDescriptor(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	fdp := &descriptorpb.FileDescriptorProto{
		Name:    proto.String("topodata.proto"),
		Package: proto.String("topodata"),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("CellsAlias"),
			Field: []*descriptorpb.FieldDescriptorProto{{
				Name: proto.String("cells"), Number: proto.Int32(2), JsonName: proto.String("cells"),
				Type:  descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(),
				Label: descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum(),
			}},
		}},
	}
	fd, err := protodesc.NewFile(fdp, nil)
	require.NoError(t, err)
	return fd.Messages().ByName("CellsAlias")
}

// vitessProtoset returns Vitess's own descriptor of topodata.CellsAlias
// from vitess-topodata.protoset: in $TOPOKIT_SHARED_DATA, else in a
// shared/data directory beside the repository or one of its parents. It
// returns nil (and logs where it looked) when there is none.
func vitessProtoset(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	var candidates []string
	if d := os.Getenv("TOPOKIT_SHARED_DATA"); d != "" {
		candidates = append(candidates, d)
	}
	dir, err := os.Getwd()
	require.NoError(t, err)
	for ; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		candidates = append(candidates, filepath.Join(dir, "shared", "data"))
	}
	for _, d := range candidates {
		b, err := os.ReadFile(filepath.Join(d, "vitess-topodata.protoset"))
		if err != nil {
			continue
		}
		set := &descriptorpb.FileDescriptorSet{}
		require.NoError(t, proto.Unmarshal(b, set))
		files, err := protodesc.NewFiles(set)
		require.NoError(t, err)
		desc, err := files.FindDescriptorByName("topodata.CellsAlias")
		require.NoError(t, err)
		t.Logf("Vitess's descriptor from %s", d)
		return desc.(protoreflect.MessageDescriptor)
	}
	t.Logf("vitess-topodata.protoset not found in %v; checking against the hand-written descriptor only", candidates)
	return nil
}

// TestCellsAliasVitessBytes checks that the record topokit stores is the
// one Vitess stores: it decodes as Vitess's topodata.CellsAlias, and a
// record encoded with Vitess's descriptor is read back by topokit.
func TestCellsAliasVitessBytes(t *testing.T) {
	ctx := t.Context()
	descs := []protoreflect.MessageDescriptor{vitessCellsAliasDescriptor(t)}
	if d := vitessProtoset(t); d != nil {
		f := d.Fields().ByName("cells")
		require.NotNil(t, f)
		require.EqualValues(t, 2, f.Number())
		require.Equal(t, protoreflect.StringKind, f.Kind())
		require.Equal(t, protoreflect.Repeated, f.Cardinality())
		require.Equal(t, 1, d.Fields().Len())
		descs = append(descs, d)
	}
	for _, desc := range descs {
		ts, f := newServer(t, "zone1", "zone2")
		raw := rawConn(t, f)
		require.NoError(t, ts.CreateCellsAlias(ctx, "east", aliasOf("zone1", "zone2")))
		data, _, err := raw.Get(ctx, "global/cells_aliases/east/CellsAlias")
		require.NoError(t, err)
		m := dynamicpb.NewMessage(desc)
		require.NoError(t, proto.Unmarshal(data, m))
		list := m.Get(desc.Fields().ByName("cells")).List()
		require.Equal(t, 2, list.Len())
		require.Equal(t, "zone1", list.Get(0).String())
		require.Equal(t, "zone2", list.Get(1).String())
		require.Empty(t, m.GetUnknown())

		// And the other way: Vitess's bytes, read by topokit.
		v := dynamicpb.NewMessage(desc)
		l := v.Mutable(desc.Fields().ByName("cells")).List()
		l.Append(protoreflect.ValueOfString("zone3"))
		vb, err := proto.MarshalOptions{Deterministic: true}.Marshal(v)
		require.NoError(t, err)
		_, err = raw.Create(ctx, "global/cells_aliases/west/CellsAlias", vb)
		require.NoError(t, err)
		got, err := ts.GetCellsAlias(ctx, "west")
		require.NoError(t, err)
		require.Equal(t, []string{"zone3"}, got.GetCells())
		alias, err := ts.GetAliasForCell(ctx, "zone3")
		require.NoError(t, err)
		require.Equal(t, "west", alias)
		ours, err := proto.MarshalOptions{Deterministic: true}.Marshal(got)
		require.NoError(t, err)
		require.Equal(t, vb, ours, "the bytes differ from Vitess's")
	}
}
